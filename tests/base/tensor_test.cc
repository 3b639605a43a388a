// DType, Shape, Tensor and the half-precision conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "base/dtype.h"
#include "base/shape.h"
#include "base/tensor.h"

namespace gearbox {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::U64), 8u);
  EXPECT_EQ(dtype_name(DType::F16), "float16");
  EXPECT_EQ(dtype_from_name("int64"), DType::I64);
  EXPECT_EQ(dtype_from_name("f32"), DType::F32);
  EXPECT_EQ(dtype_from_name("complex64"), DType::Undefined);
  // Values match ONNX TensorProto.DataType.
  EXPECT_EQ(static_cast<int>(DType::BF16), 16);
  EXPECT_EQ(static_cast<int>(DType::Bool), 9);
}

TEST(Half, KnownBitPatterns) {
  // IEEE binary16 encodings (numpy: np.float16(x).view(np.uint16)).
  EXPECT_EQ(Half(1.0f).bits, 0x3c00);
  EXPECT_EQ(Half(-2.0f).bits, 0xc000);
  EXPECT_EQ(Half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(Half(1e6f).bits, 0x7c00);                 // overflow to +inf
  EXPECT_EQ(Half(5.960464477539063e-08f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(Half(0.1f).bits, 0x2e66);
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_FLOAT_EQ(Half::to_float(0x3555), 0.333251953125f);
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(BFloat16(3.140625f).bits, 0x4049);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(BFloat16(1.00390625f).bits, 0x3f80);
  EXPECT_FLOAT_EQ(static_cast<float>(BFloat16(-0.5f)), -0.5f);
}

TEST(Shape, SymbolicDimsAcceptAnySize) {
  Shape s({Dim::symbolic("batch"), Dim(3)});
  EXPECT_TRUE(s.accepts({7, 3}));
  EXPECT_FALSE(s.accepts({7, 4}));
  EXPECT_FALSE(s.accepts({3}));
  EXPECT_FALSE(s.fully_known());
  EXPECT_EQ(to_string(s), "[batch,3]");
  EXPECT_TRUE(Shape().accepts({1, 2, 3}));  // unranked accepts anything
}

TEST(Shape, NumelDetectsOverflow) {
  EXPECT_EQ(numel({}), 1);
  EXPECT_EQ(numel({2, 0, 5}), 0);
  EXPECT_EQ(numel({1LL << 40, 1LL << 40}), -1);
  EXPECT_EQ(numel({-1, 2}), -1);
}

TEST(Tensor, SharesOnCopyAndClonesDeep) {
  Tensor a(DType::F32, {2, 2});
  a.data<float>()[0] = 1.0f;
  Tensor b = a;
  EXPECT_EQ(a.raw(), b.raw());
  Tensor c = a.clone();
  EXPECT_NE(a.raw(), c.raw());
  c.data<float>()[0] = 5.0f;
  EXPECT_FLOAT_EQ(a.data<float>()[0], 1.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw()) % 64, 0u);
  Tensor r = a.reshaped({4});
  EXPECT_EQ(r.raw(), a.raw());
  EXPECT_EQ(r.dims(), (Dims{4}));
}

TEST(Tensor, AllocateRefusesAbsurdSizes) {
  EXPECT_EQ(Tensor::allocate(DType::F32, {1LL << 30, 1LL << 30}).status().code(), ErrorCode::OUT_OF_MEMORY);
  EXPECT_EQ(Tensor::allocate(DType::F32, {-3}).status().code(), ErrorCode::INVALID_ARGUMENT);
  // 2^60 strings of 32 bytes: the refusal's own byte count overflowed int64 (UBSan; found by
  // fuzz/onnx_import, a string initializer with huge dims).
  EXPECT_EQ(Tensor::allocate(DType::String, {1LL << 30, 1LL << 30}).status().code(), ErrorCode::OUT_OF_MEMORY);
  EXPECT_EQ(Tensor::allocate(DType::F64, {1LL << 31, 1LL << 31}).status().code(), ErrorCode::OUT_OF_MEMORY);
  auto s = Tensor::allocate(DType::String, {2});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->strings().size(), 2u);
}

}  // namespace
}  // namespace gearbox
