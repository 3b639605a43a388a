// Element-wise reference kernels, part 2: Sum/Mean/Max/Min, Where, Clip, Cast, CastLike.
// Expected values come from the ONNX spec's examples, numpy (computed with /usr/bin/python3
// while writing these tests; the expression is in a comment) or hand calculation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "elementwise_test_util.h"

namespace gearbox::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Attribute to_attr(DType t) { return attr_int(static_cast<int64_t>(t)); }

// ---- variadic -----------------------------------------------------------------------------

TEST(Variadic, SpecExamples) {
  // ONNX spec (sum/mean/max/min examples): data_0 [3,2,1], data_1 [1,4,4], data_2 [2,5,3]
  Tensor a = f32({3, 2, 1}), b = f32({1, 4, 4}), c = f32({2, 5, 3});
  expect_exact(run1("Sum", 13, {a, b, c}), {6, 11, 8});
  expect_exact(run1("Max", 13, {a, b, c}), {3, 5, 4});
  expect_exact(run1("Min", 13, {a, b, c}), {1, 2, 1});
  expect_exact(run1("Mean", 13, {a, b, c}), {2, 11.0f / 3, 8.0f / 3});
  // One input is forwarded unchanged.
  expect_exact(run1("Sum", 13, {a}), {3, 2, 1});
  expect_exact(run1("Mean", 13, {a}), {3, 2, 1});
}

TEST(Variadic, BroadcastIntegersAndNaN) {
  // [2,1] with [3] with scalar -> [2,3]
  Tensor s = run1("Sum", 13, {f32({1, 2}, {2, 1}), f32({10, 20, 30}), f32s(100)});
  ASSERT_EQ(s.dims(), (Dims{2, 3}));
  expect_exact(s, {111, 121, 131, 112, 122, 132});
  expect_exact(run1("Max", 13, {tensor<int64_t>({-5, 7}), tensor<int64_t>({3})}), {3, 7});
  expect_exact(run1("Min", 13, {tensor<uint8_t>({200, 7}), tensor<uint8_t>({9, 9})}), {9, 7});
  // NaN propagates (numpy.maximum/minimum), from either side.
  expect_close(run1("Max", 13, {f32({std::nanf(""), 1}), f32({1, std::nanf("")})}), {kNaN, kNaN});
  expect_close(run1("Min", 13, {f32({std::nanf(""), 1}), f32({1, std::nanf("")})}), {kNaN, kNaN});
  // float16 Mean: (1 + 2) / 2 = 1.5 exactly.
  Tensor m = run1("Mean", 13, {f16({1, 4}), f16({2, 5})});
  EXPECT_EQ(m.dtype(), DType::F16);
  expect_exact(m, {1.5, 4.5});
}

TEST(Variadic, Errors) {
  EXPECT_EQ(run_code("Sum", 13, {f32({1, 2}), f32({1, 2, 3})}), ErrorCode::SHAPE_MISMATCH);
  EXPECT_EQ(run_code("Max", 13, {f32({1}), tensor<int32_t>({1})}), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Sum", 13, {tensor<int32_t>({1}), tensor<int32_t>({1})}), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Max", 13, {tensor<bool>({true})}), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Sum", 13, {}), ErrorCode::INVALID_ARGUMENT);
}

// ---- Where --------------------------------------------------------------------------------

TEST(Where, ThreeWayBroadcast) {
  // ONNX spec where_example: cond [[1,0],[1,1]], x [[1,2],[3,4]], y [[9,8],[7,6]] -> [[1,8],[3,4]]
  Tensor c = tensor<bool>({true, false, true, true}, {2, 2});
  expect_exact(run1("Where", 16, {c, f32({1, 2, 3, 4}, {2, 2}), f32({9, 8, 7, 6}, {2, 2})}), {1, 8, 3, 4});
  // cond [2,1], x [3], y scalar -> [2,3]
  Tensor w = run1("Where", 16, {tensor<bool>({true, false}, {2, 1}), tensor<int64_t>({1, 2, 3}),
                                Tensor::scalar<int64_t>(-1)});
  ASSERT_EQ(w.dims(), (Dims{2, 3}));
  expect_exact(w, {1, 2, 3, -1, -1, -1});
  Tensor s = run1("Where", 16, {tensor<bool>({false, true}), tensor<std::string>({"x0", "x1"}),
                                tensor<std::string>({"y"})});
  ASSERT_EQ(s.dtype(), DType::String);
  EXPECT_EQ(s.strings()[0], "y");
  EXPECT_EQ(s.strings()[1], "x1");
  EXPECT_EQ(run_code("Where", 16, {f32({1}), f32({1}), f32({1})}), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Where", 16, {tensor<bool>({true}), f32({1}), tensor<double>({1})}),
            ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Where", 16, {tensor<bool>({true, false}), f32({1, 2, 3}), f32({1})}),
            ErrorCode::SHAPE_MISMATCH);
}

// ---- Clip ---------------------------------------------------------------------------------

TEST(Clip, InputsAttributesAndDefaults) {
  const Tensor x = f32({-2, 0, 2, std::nanf(""), -INFINITY});
  // numpy: np.clip(x, -1, 1)
  expect_close(run1("Clip", 13, {x, f32s(-1), f32s(1)}), {-1, 0, 1, kNaN, -1});
  // Opset 6: bounds are attributes.
  expect_close(run1("Clip", 6, {x}, {{"min", attr_float(-1)}, {"max", attr_float(1)}}), {-1, 0, 1, kNaN, -1});
  // Only max given (min omitted: an undefined tensor marks a missing optional input).
  expect_close(run1("Clip", 13, {x, Tensor(), f32s(0)}), {-2, 0, 0, kNaN, -kInf});
  // Spec clip_default_int8_min: int8 with only min = 0
  expect_exact(run1("Clip", 13, {tensor<int8_t>({-5, 0, 120}), Tensor::scalar<int8_t>(0)}), {0, 0, 120});
  // min > max gives max everywhere (spec, numpy.clip)
  expect_exact(run1("Clip", 13, {f32({-5, 0, 5}), f32s(2), f32s(1)}), {1, 1, 1});
  // No bounds: identity.
  expect_exact(run1("Clip", 13, {tensor<int64_t>({std::numeric_limits<int64_t>::min(), 3})}),
               {double(std::numeric_limits<int64_t>::min()), 3});
}

TEST(Clip, Errors) {
  EXPECT_EQ(run_code("Clip", 13, {f32({1}), f32({0, 1})}), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run_code("Clip", 13, {f32({1}), tensor<double>({0})}), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Clip", 6, {tensor<int32_t>({1})}), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Clip", 13, {tensor<bool>({true})}), ErrorCode::DTYPE_UNSUPPORTED);
}

// ---- Cast ---------------------------------------------------------------------------------

TEST(Cast, FloatToHalfAndBFloat16RoundToNearestEven) {
  // numpy: np.float32([0.5488135, 65520, 1e-8, 6e-5]).astype(np.float16).view(np.uint16)
  Tensor h = run1("Cast", 13, {f32({0.5488135f, 65520, 1e-8f, 6e-5f})}, {{"to", to_attr(DType::F16)}});
  ASSERT_EQ(h.dtype(), DType::F16);
  const uint16_t want_h[] = {14436, 31744, 0, 1007};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(h.data<Half>()[i].bits, want_h[i]) << i;
  // 1/3 is 0x3EAAAAAB in float32; the low half 0xAAAB > 0x8000 rounds up: bf16 0x3EAB.
  Tensor b = run1("Cast", 13, {f32({1.0f / 3})}, {{"to", to_attr(DType::BF16)}});
  ASSERT_EQ(b.dtype(), DType::BF16);
  EXPECT_EQ(b.data<BFloat16>()[0].bits, 0x3EAB);
  // And back: float16 -> float32 / float64 is exact.
  expect_exact(run1("Cast", 13, {f16({0.5f, -2.25f})}, {{"to", to_attr(DType::F32)}}), {0.5, -2.25});
  expect_exact(run1("Cast", 13, {f16({0.5f, -2.25f})}, {{"to", to_attr(DType::F64)}}), {0.5, -2.25});
}

TEST(Cast, FloatToIntegerTruncatesAndWrapsLikeNumpy) {
  // numpy: np.float32([-1.7,1.7,2.5]).astype(np.int32) == [-1, 1, 2]
  Tensor i = run1("Cast", 13, {f32({-1.7f, 1.7f, 2.5f})}, {{"to", to_attr(DType::I32)}});
  ASSERT_EQ(i.dtype(), DType::I32);
  expect_exact(i, {-1, 1, 2});
  // numpy: np.float32([-1,300,2.9]).astype(np.uint8) == [255, 44, 2]; np.float32([200]).astype(np.int8) == [-56]
  expect_exact(run1("Cast", 13, {f32({-1, 300, 2.9f})}, {{"to", to_attr(DType::U8)}}), {255, 44, 2});
  expect_exact(run1("Cast", 13, {f32({200})}, {{"to", to_attr(DType::I8)}}), {-56});
  // NaN and out-of-range to int64: the x86 "integer indefinite" value, never a trap.
  Tensor big = run1("Cast", 13, {f32({std::nanf(""), 1e30f})}, {{"to", to_attr(DType::I64)}});
  EXPECT_EQ(big.data<int64_t>()[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(big.data<int64_t>()[1], std::numeric_limits<int64_t>::min());
  // Integer narrowing wraps: int64 300 -> uint8 44, -1 -> uint16 65535.
  expect_exact(run1("Cast", 13, {tensor<int64_t>({300, -1})}, {{"to", to_attr(DType::U8)}}), {44, 255});
  expect_exact(run1("Cast", 13, {tensor<int64_t>({-1})}, {{"to", to_attr(DType::U16)}}), {65535});
}

TEST(Cast, BoolConversions) {
  // x != 0, NaN is true (numpy: np.float32([0, -0.0, 2, nan]).astype(bool))
  Tensor b = run1("Cast", 13, {f32({0, -0.0f, 2, std::nanf("")})}, {{"to", to_attr(DType::Bool)}});
  ASSERT_EQ(b.dtype(), DType::Bool);
  expect_exact(b, {0, 0, 1, 1});
  expect_exact(run1("Cast", 13, {tensor<bool>({true, false})}, {{"to", to_attr(DType::F32)}}), {1, 0});
  expect_exact(run1("Cast", 13, {tensor<int32_t>({0, 7})}, {{"to", to_attr(DType::Bool)}}), {0, 1});
}

TEST(Cast, ToAndFromString) {
  // numpy: np.float32([0.039187793, 1e-5, -2.5, 0.1]).astype(str) (shortest round-trip)
  Tensor s = run1("Cast", 13, {f32({0.039187793f, 1e-5f, -2.5f, 0.1f, std::nanf(""), INFINITY, -INFINITY})},
                  {{"to", to_attr(DType::String)}});
  ASSERT_EQ(s.dtype(), DType::String);
  const std::vector<std::string> want = {"0.039187793", "1e-05", "-2.5", "0.1", "NaN", "INF", "-INF"};
  EXPECT_EQ(s.strings(), want);
  Tensor si = run1("Cast", 13, {tensor<int64_t>({-9223372036854775807LL - 1, 42})}, {{"to", to_attr(DType::String)}});
  EXPECT_EQ(si.strings(), (std::vector<std::string>{"-9223372036854775808", "42"}));
  // numpy: np.float16(0.549).astype(str) == '0.549' (shortest for the 16-bit value)
  Tensor sh = run1("Cast", 13, {f16({0.549f})}, {{"to", to_attr(DType::String)}});
  EXPECT_EQ(sh.strings()[0], "0.549");

  // The suite's cast STRING_to_FLOAT inputs: decimals plus NaN, INF, +INF, -INF.
  Tensor in = tensor<std::string>({"0.47892547", "NaN", "INF", "+INF", "-INF", "1e3", " -0.5 "});
  Tensor f = run1("Cast", 13, {in}, {{"to", to_attr(DType::F32)}});
  ASSERT_EQ(f.dtype(), DType::F32);
  // numpy: np.array(['0.47892547']).astype(np.float32) == 0.4789254665374756
  expect_exact(f, {0.4789254665374756, kNaN, kInf, kInf, -kInf, 1000, -0.5});
  // Integers parse exactly over the full int64 range.
  Tensor i = run1("Cast", 13, {tensor<std::string>({"9223372036854775807", "-3"})}, {{"to", to_attr(DType::I64)}});
  EXPECT_EQ(i.data<int64_t>()[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i.data<int64_t>()[1], -3);
  EXPECT_EQ(run_code("Cast", 13, {tensor<std::string>({"1.5", "abc"})}, {{"to", to_attr(DType::F32)}}),
            ErrorCode::INVALID_ARGUMENT);
}

TEST(Cast, CastLikeAndErrors) {
  Tensor y = run1("CastLike", 15, {f32({1.5f, -2}), tensor<int32_t>({0})});
  ASSERT_EQ(y.dtype(), DType::I32);
  expect_exact(y, {1, -2});
  Tensor d = run1("CastLike", 15, {tensor<Half>({Half(0.5f)}), tensor<double>({0})});
  ASSERT_EQ(d.dtype(), DType::F64);
  expect_exact(d, {0.5});
  EXPECT_EQ(run_code("Cast", 13, {f32({1})}), ErrorCode::ATTRIBUTE_INVALID);
  EXPECT_EQ(run_code("Cast", 13, {f32({1})}, {{"to", attr_int(14)}}), ErrorCode::DTYPE_UNSUPPORTED);  // complex64
  EXPECT_EQ(run_code("Cast", 13, {f32({1})}, {{"to", attr_int(999)}}), ErrorCode::DTYPE_UNSUPPORTED);
}

}  // namespace
}  // namespace gearbox::testing
