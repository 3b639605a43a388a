// Quantization operators against the examples of the ONNX operator spec.
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

TEST(MiscQuantize, QuantizeLinearSaturatesAndRoundsHalfEven) {
  auto c = make_call("QuantizeLinear", 13,
              {Tensor::from_vector<float>({0, 2, 3, 1000, -254, -1000}), Tensor::scalar<float>(2),
               Tensor::scalar<uint8_t>(128)});
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r.value()[0].dtype(), DType::U8);
  const uint8_t want[] = {128, 129, 130, 255, 1, 0};  // 3/2 = 1.5 rounds to 2
  for (int i = 0; i < 6; ++i) EXPECT_EQ(r.value()[0].data<uint8_t>()[i], want[i]);
}

TEST(MiscQuantize, DequantizeLinearPerAxis) {
  // x [1, 2, 2], axis 1: channel 0 scale 2 zp 1, channel 1 scale 0.5 zp 3.
  auto c = make_call("DequantizeLinear", 13,
              {Tensor::from_vector<uint8_t>({1, 5, 3, 7}, {1, 2, 2}), Tensor::from_vector<float>({2, 0.5f}),
               Tensor::from_vector<uint8_t>({1, 3})});
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const float want[] = {0, 8, 0, 2};
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(r.value()[0].data<float>()[i], want[i]);
}

TEST(MiscQuantize, DynamicQuantizeLinear) {
  auto c = make_call("DynamicQuantizeLinear", 11, {Tensor::from_vector<float>({0, 2, -3, -2.5f, 1.34f, 0.5f})});
  c.num_outputs = 3;
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const uint8_t want[] = {153, 255, 0, 26, 221, 179};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(r.value()[0].data<uint8_t>()[i], want[i]);
  EXPECT_NEAR(r.value()[1].at_double(0), 0.019607844, 1e-8);
  EXPECT_EQ(r.value()[2].data<uint8_t>()[0], 153);
}

TEST(MiscQuantize, MatMulIntegerWithZeroPoints) {
  // (a - 1) @ (b - 2) with a = [[2, 3]], b = [[3], [4]]: [1, 2] . [1, 2] = 5.
  auto c = make_call("MatMulInteger", 10,
              {Tensor::from_vector<uint8_t>({2, 3}, {1, 2}), Tensor::from_vector<uint8_t>({3, 4}, {2, 1}),
               Tensor::scalar<uint8_t>(1), Tensor::scalar<uint8_t>(2)});
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r.value()[0].dims(), (Dims{1, 1}));
  EXPECT_EQ(r.value()[0].data<int32_t>()[0], 5);
}

TEST(MiscQuantize, ScaleShapeMismatchIsAnError) {
  auto c = make_call("DequantizeLinear", 13,
              {Tensor::from_vector<uint8_t>({1, 5, 3, 7}, {1, 2, 2}), Tensor::from_vector<float>({2, 0.5f, 1}),
               Tensor::from_vector<uint8_t>({1, 3, 0})});
  auto r = run_kernel(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::SHAPE_MISMATCH);
}

TEST(MiscQuantize, QLinearMatMulEmptyScaleIsAnError) {
  auto c = make_call("QLinearMatMul", 10,
              {Tensor::from_vector<uint8_t>({1}, {1, 1}), Tensor::scalar<float>(1), Tensor::scalar<uint8_t>(0),
               Tensor::from_vector<uint8_t>({1}, {1, 1}), Tensor::scalar<float>(1), Tensor::scalar<uint8_t>(0),
               Tensor(DType::F32, {0}), Tensor::scalar<uint8_t>(0)});
  auto r = run_kernel(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(MiscQuantize, QuantizeLinearDividesInFloat) {
  // 0.5 / 0.019607844f is exactly 25.5 in float (rounds to even 26), 25.4999999 in double.
  auto c = make_call("QuantizeLinear", 13,
              {Tensor::from_vector<float>({0.5f}), Tensor::scalar<float>(0.019607844f), Tensor::scalar<uint8_t>(153)});
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value()[0].data<uint8_t>()[0], 179);
}

}  // namespace
}  // namespace gearbox::testing
