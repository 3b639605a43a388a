// Element-wise reference kernels, part 1: unary math, activations, broadcasting
// arithmetic, comparisons, logical ops and BitShift. Expected values come from the ONNX
// spec's examples or from numpy/math (computed with /usr/bin/python3 while writing these
// tests and pasted in; the expression is given in a comment), or from hand calculation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "elementwise_test_util.h"

namespace gearbox::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- unary math ---------------------------------------------------------------------------

TEST(UnaryMath, ExpLogSqrtReciprocal) {
  // numpy: np.exp(np.float32([-2.5,-1,0,0.5,3]))
  expect_close(run1("Exp", 13, {f32({-2.5f, -1, 0, 0.5f, 3})}),
               {0.0820850059390068, 0.3678794205188751, 1.0, 1.6487212181091309, 20.08553695678711});
  // numpy: np.log(np.float32([0.5,1,2,10]))
  expect_close(run1("Log", 13, {f32({0.5f, 1, 2, 10})}),
               {-0.6931471824645996, 0.0, 0.6931471824645996, 2.3025851249694824});
  expect_close(run1("Log", 13, {f32({0.0f, -1.0f})}), {-kInf, kNaN});
  expect_close(run1("Sqrt", 13, {f32({0, 1, 2, 9})}), {0.0, 1.0, 1.4142135381698608, 3.0});
  expect_close(run1("Reciprocal", 13, {f32({-4, 0.5f, 3})}), {-0.25, 2.0, 0.3333333432674408});
}

TEST(UnaryMath, FloorCeilRoundHalfToEven) {
  expect_exact(run1("Floor", 13, {f32({-1.5f, 1.2f, 2.0f})}), {-2, 1, 2});
  expect_exact(run1("Ceil", 13, {f32({-1.5f, 1.2f, 2.0f})}), {-1, 2, 2});
  // numpy: np.round(np.float32([0.5,1.5,2.5,-0.5,-1.5,2.3,-2.7])) (half to even)
  Tensor r = run1("Round", 11, {f32({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.3f, -2.7f})});
  expect_exact(r, {0, 2, 2, -0.0, -2, 2, -3});
  EXPECT_TRUE(std::signbit(r.data<float>()[3]));  // -0.5 rounds to -0
}

TEST(UnaryMath, AbsNegSignIntegersWrapLikeNumpy) {
  // np.abs(np.int8(-128)) == -128 (two's complement wrap)
  expect_exact(run1("Abs", 13, {tensor<int8_t>({-128, -5, 0, 7})}), {-128, 5, 0, 7});
  expect_exact(run1("Abs", 13, {tensor<uint8_t>({200, 0})}), {200, 0});
  expect_exact(run1("Neg", 13, {tensor<int32_t>({std::numeric_limits<int32_t>::min(), -3, 4})}),
               {double(std::numeric_limits<int32_t>::min()), 3, -4});
  expect_exact(run1("Sign", 13, {f32({-2.5f, 0, 3})}), {-1, 0, 1});
  expect_exact(run1("Sign", 13, {tensor<int64_t>({-9, 0, 4})}), {-1, 0, 1});
  expect_close(run1("Sign", 13, {f32({std::nanf("")})}), {kNaN});
  Tensor a = run1("Abs", 13, {f16({-1.5f, 2.25f})});
  EXPECT_EQ(a.dtype(), DType::F16);
  expect_exact(a, {1.5, 2.25});
}

TEST(UnaryMath, Trigonometric) {
  const std::vector<float> x = {-2.5f, -1, 0, 0.5f, 3};
  // numpy: np.sin / np.tan / np.arctan / np.arcsinh / np.cosh of np.float32(x)
  expect_close(run1("Sin", 7, {f32(x)}),
               {-0.5984721779823303, -0.8414710164070129, 0.0, 0.4794255495071411, 0.14112000167369843});
  expect_close(run1("Tan", 7, {f32(x)}),
               {0.747022271156311, -1.5574077367782593, 0.0, 0.5463024973869324, -0.14254653453826904}, 1e-5);
  expect_close(run1("Atan", 7, {f32(x)}),
               {-1.1902899742126465, -0.7853981852531433, 0.0, 0.46364760398864746, 1.249045729637146});
  expect_close(run1("Asinh", 9, {f32(x)}),
               {-1.647231101989746, -0.8813735842704773, 0.0, 0.4812118113040924, 1.8184465169906616});
  expect_close(run1("Cosh", 9, {f32(x)}),
               {6.132289886474609, 1.5430806875228882, 1.0, 1.1276260614395142, 10.06766128540039});
  // numpy: np.arccosh(np.float32([1,2,10])), np.arctanh(np.float32([-0.5,0,0.9]))
  expect_close(run1("Acosh", 9, {f32({1, 2, 10})}), {0.0, 1.316957950592041, 2.993222951889038});
  expect_close(run1("Atanh", 9, {f32({-0.5f, 0, 0.9f})}), {-0.5493061542510986, 0.0, 1.4722193479537964});
  // ONNX spec examples: cos(0) = 1, acos(1) = 0, asin(0) = 0.
  expect_close(run1("Cos", 7, {f32({0})}), {1});
  expect_close(run1("Acos", 7, {f32({1})}), {0});
  expect_close(run1("Asin", 7, {f32({0})}), {0});
  expect_close(run1("Sinh", 9, {f32({0})}), {0});
}

TEST(UnaryMath, ErfFloat32ApproximationIsAccurate) {
  // Python: [math.erf(v) for v in [-3,-0.5,0,0.1,1,2.5,5]]
  expect_close(run1("Erf", 13, {f32({-3, -0.5f, 0, 0.1f, 1, 2.5f, 5})}),
               {-0.9999779095030014, -0.5204998778130465, 0.0, 0.1124629160182849, 0.8427007929497149,
                0.999593047982555, 0.9999999999984626},
               1e-6);
  expect_close(run1("Erf", 13, {f32({std::nanf(""), INFINITY, -INFINITY, -0.0f})}), {kNaN, 1, -1, 0});
  expect_close(run1("Erf", 13, {tensor<double>({1.0})}), {0.8427007929497149}, 1e-15);
}

TEST(UnaryMath, IsNaNIsInfNot) {
  Tensor x = f32({std::nanf(""), INFINITY, -INFINITY, 1.0f});
  Tensor n = run1("IsNaN", 13, {x});
  EXPECT_EQ(n.dtype(), DType::Bool);
  expect_exact(n, {1, 0, 0, 0});
  expect_exact(run1("IsInf", 10, {x}), {0, 1, 1, 0});
  expect_exact(run1("IsInf", 10, {x}, {{"detect_negative", attr_int(0)}}), {0, 1, 0, 0});
  expect_exact(run1("IsInf", 10, {x}, {{"detect_positive", attr_int(0)}}), {0, 0, 1, 0});
  expect_exact(run1("Not", 1, {tensor<bool>({true, false})}), {0, 1});
}

TEST(UnaryMath, RejectsUnsupportedDtypes) {
  EXPECT_EQ(run_code("Exp", 13, {tensor<int32_t>({1})}), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Neg", 13, {tensor<uint8_t>({1})}), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Not", 1, {f32({1})}), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Abs", 13, {tensor<bool>({true})}), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Abs", 13, {tensor<std::string>({"a"})}), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Exp", 13, {}), ErrorCode::INVALID_ARGUMENT);
}

// ---- activations --------------------------------------------------------------------------

TEST(Activations, SpecExamples) {
  const Tensor x = f32({-1, 0, 1});
  // ONNX spec examples (onnx/backend/test/case/node/*.py)
  expect_close(run1("Elu", 6, {x}, {{"alpha", attr_float(2)}}), {-1.2642411, 0, 1});
  expect_close(run1("Selu", 6, {x}, {{"alpha", attr_float(2)}, {"gamma", attr_float(3)}}), {-3.79272318, 0, 3});
  expect_close(run1("LeakyRelu", 16, {x}, {{"alpha", attr_float(0.1f)}}), {-0.1, 0, 1});
  expect_close(run1("HardSigmoid", 6, {x}, {{"alpha", attr_float(0.5f)}, {"beta", attr_float(0.6f)}}), {0.1, 0.6, 1});
  expect_close(run1("ThresholdedRelu", 10, {f32({-1.5f, 0, 1.2f, 2, 2.2f})}, {{"alpha", attr_float(2)}}),
               {0, 0, 0, 0, 2.2});
  expect_close(run1("Softsign", 1, {x}), {-0.5, 0, 0.5});
  expect_close(run1("Softplus", 1, {x}), {0.31326166, 0.69314718, 1.31326163});
  expect_close(run1("Sigmoid", 13, {x}), {0.26894142, 0.5, 0.73105858});
  // Shrink: spec examples (hard: lambd 1.5; soft: lambd 1.5, bias 1.5)
  const Tensor s = f32({-2, -1, 0, 1, 2});
  expect_exact(run1("Shrink", 9, {s}, {{"lambd", attr_float(1.5f)}}), {-2, 0, 0, 0, 2});
  expect_close(run1("Shrink", 9, {s}, {{"lambd", attr_float(1.5f)}, {"bias", attr_float(1.5f)}}), {-0.5, 0, 0, 0, 0.5});
  expect_exact(run1("Shrink", 9, {tensor<int32_t>({-2, -1, 0, 1, 2})}, {{"lambd", attr_float(1.5f)}}),
               {-2, 0, 0, 0, 2});
}

TEST(Activations, AgainstNumpy) {
  const Tensor x = f32({-2.5f, -1, 0, 0.5f, 3});
  // numpy: 1/(1+np.exp(-x)), np.log1p(np.exp(x)), np.tanh(x), x*np.clip(x/6+0.5,0,1)
  expect_close(run1("Sigmoid", 13, {x}),
               {0.07585818320512772, 0.26894140243530273, 0.5, 0.622459352016449, 0.9525741338729858});
  expect_close(run1("Softplus", 1, {x}),
               {0.07888974249362946, 0.31326162815093994, 0.6931471824645996, 0.9740769863128662, 3.0485873222351074});
  expect_close(run1("Tanh", 13, {x}),
               {-0.9866142868995667, -0.7615941762924194, 0.0, 0.46211719512939453, 0.9950547814369202});
  expect_close(run1("HardSwish", 14, {x}), {-0.208333358168602, -0.3333333134651184, 0.0, 0.2916666567325592, 3.0});
  // numpy: np.maximum(0,x)+np.minimum(0,2*(np.exp(x/2)-1))
  expect_close(run1("Celu", 12, {x}, {{"alpha", attr_float(2)}}),
               {-1.4269905090332031, -0.7869386672973633, 0.0, 0.5, 3.0});
  // numpy, default alpha/gamma: np.where(x>0, g*x, g*(a*np.exp(x)-a))
  expect_close(run1("Selu", 6, {x}),
               {-1.613785743713379, -1.1113307476043701, 0.0, 0.5253505110740662, 3.1521029472351074});
  // Softplus of a large input must not overflow to inf (log(1+exp(100)) == 100).
  expect_close(run1("Softplus", 1, {f32({100})}), {100});
  // Sigmoid of a very negative input is 0, not NaN.
  expect_close(run1("Sigmoid", 13, {f32({-1000})}), {0});
}

// Tanh and Erf on float32 use polynomial approximations (fast_math.h); libm in double is
// the independent oracle over a dense sweep.
TEST(Activations, Float32TanhAndErfMatchLibmDensely) {
  std::vector<float> xs;
  for (int i = -2000; i <= 2000; ++i) xs.push_back(float(i) * 0.005f);
  for (float t : {1e-5f, -3e-4f, 1e-30f, 20.0f, -50.0f}) xs.push_back(t);
  std::vector<double> want_tanh, want_erf;
  for (float x : xs) {
    want_tanh.push_back(std::tanh(double(x)));
    want_erf.push_back(std::erf(double(x)));
  }
  expect_close(run1("Tanh", 13, {f32(xs)}), want_tanh, 1e-6, 1e-30);
  expect_close(run1("Erf", 13, {f32(xs)}), want_erf, 1e-6, 1e-30);
  expect_close(run1("Tanh", 13, {f32({std::nanf(""), INFINITY, -INFINITY})}), {kNaN, 1, -1});
  // Other dtypes go through libm.
  expect_close(run1("Tanh", 13, {tensor<double>({0.5})}), {std::tanh(0.5)}, 1e-15);
}

TEST(Activations, ReluFloatIntAndErrors) {
  // ONNX spec: np.clip(x, 0, np.inf); NaN stays NaN as with numpy.maximum(x, 0).
  expect_close(run1("Relu", 14, {f32({-1.5f, 0, 2, std::nanf(""), -INFINITY})}), {0, 0, 2, kNaN, 0});
  Tensor i = run1("Relu", 14, {tensor<int8_t>({-128, 5})});
  EXPECT_EQ(i.dtype(), DType::I8);
  expect_exact(i, {0, 5});
  expect_exact(run1("Relu", 14, {f16({-1, 0.5f})}), {0, 0.5});
  EXPECT_EQ(run_code("Relu", 14, {tensor<uint8_t>({1})}), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Relu", 14, {tensor<bool>({true})}), ErrorCode::DTYPE_UNSUPPORTED);
}

TEST(Activations, ReluGradPassesTheGradientWhereTheOutputIsPositive) {
  // com.gearbox.ReluGrad(dY, Y): dY where Y > 0, else 0, as torch's threshold_backward (a NaN
  // output passes nothing).
  auto grad = [](std::vector<Tensor> in) {
    KernelCall call = make_call("ReluGrad", 1, std::move(in));
    call.domain = "com.gearbox";
    return run_kernel(call);
  };
  auto r = grad({f32({5, 6, 7, 8, kNaN}), f32({-1.5f, 0, 2, std::nanf(""), 3})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_close(r.value()[0], {0, 0, 7, 0, kNaN});
  r = grad({f16({2, 3}), f16({1, -1})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_exact(r.value()[0], {2, 0});
  EXPECT_EQ(grad({f32({1, 2}), f32({1, 2, 3})}).status().code(), ErrorCode::SHAPE_MISMATCH);  // no broadcasting
  EXPECT_EQ(grad({f32({1}), tensor<double>({1})}).status().code(), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(grad({tensor<int32_t>({1}), tensor<int32_t>({1})}).status().code(), ErrorCode::DTYPE_UNSUPPORTED);
}

TEST(Activations, LeakyReluSpecialValues) {
  expect_close(run1("LeakyRelu", 16, {f32({std::nanf(""), -INFINITY, INFINITY, -0.0f, -2})}),
               {kNaN, -kInf, kInf, 0, -0.02});
}

TEST(Activations, PReluBroadcastsSlopeToX) {
  // Spec prelu_broadcast: slope of shape [5] broadcast to X [3,4,5]; here a [2,3] X.
  Tensor x = f32({-1, 2, -3, 4, -5, 6}, {2, 3});
  Tensor slope = f32({0.1f, 0.2f, 0.3f});
  Tensor y = run1("PRelu", 16, {x, slope});
  EXPECT_EQ(y.dims(), (Dims{2, 3}));
  expect_close(y, {-0.1, 2, -0.9, 4, -1.0, 6});
  // The slope may not grow X.
  EXPECT_EQ(run_code("PRelu", 16, {f32({-1}), f32({0.1f, 0.2f})}), ErrorCode::SHAPE_MISMATCH);
  EXPECT_EQ(run_code("PRelu", 16, {f32({-1}), tensor<double>({0.1})}), ErrorCode::DTYPE_UNSUPPORTED);
}

// ---- broadcasting arithmetic --------------------------------------------------------------

TEST(BinaryArith, SameShapeAndBroadcast) {
  expect_exact(run1("Add", 14, {f32({1, 2, 3}), f32({10, 20, 30})}), {11, 22, 33});
  // [2,3] - [3]
  Tensor d = run1("Sub", 14, {f32({1, 2, 3, 4, 5, 6}, {2, 3}), f32({1, 1, 1})});
  EXPECT_EQ(d.dims(), (Dims{2, 3}));
  expect_exact(d, {0, 1, 2, 3, 4, 5});
  // [2,1] * [1,3] -> [2,3]
  Tensor m = run1("Mul", 14, {f32({2, 3}, {2, 1}), f32({1, 10, 100}, {1, 3})});
  EXPECT_EQ(m.dims(), (Dims{2, 3}));
  expect_exact(m, {2, 20, 200, 3, 30, 300});
  // scalar / tensor and tensor / scalar
  expect_exact(run1("Div", 14, {f32s(12), f32({3, 4, 6})}), {4, 3, 2});
  expect_exact(run1("Div", 14, {f32({3, 4, 6}), f32s(2)}), {1.5, 2, 3});
  // 0-d op 0-d keeps the scalar shape
  Tensor s = run1("Add", 14, {f32s(1), f32s(2)});
  EXPECT_EQ(s.dims(), Dims{});
  expect_exact(s, {3});
  // Empty tensors broadcast to empty outputs ([0,3] + [3] -> [0,3]); an integer zero
  // divisor is not an error when nothing is divided.
  Tensor e = run1("Add", 14, {f32({}, {0, 3}), f32({1, 2, 3})});
  EXPECT_EQ(e.dims(), (Dims{0, 3}));
  EXPECT_EQ(run_code("Div", 14, {tensor<int32_t>({}, {0}), tensor<int32_t>({0})}), ErrorCode::OK);
}

TEST(BinaryArith, ManyDimBroadcastMatchesIndexFormula) {
  // a: [2,1,3,1], b: [1,4,1,5] -> [2,4,3,5]; out[i,j,k,l] = a[i,0,k,0] + b[0,j,0,l] by the
  // definition of broadcasting (an independent nested-loop oracle).
  std::vector<float> av(6), bv(20);
  for (int i = 0; i < 6; ++i) av[i] = float(i);
  for (int i = 0; i < 20; ++i) bv[i] = float(100 * i);
  Tensor y = run1("Add", 14, {f32(av, {2, 1, 3, 1}), f32(bv, {1, 4, 1, 5})});
  ASSERT_EQ(y.dims(), (Dims{2, 4, 3, 5}));
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k)
        for (int l = 0; l < 5; ++l) want.push_back(av[i * 3 + k] + bv[j * 5 + l]);
  expect_exact(y, want);
  // Mixed case: [3,1,4] - [1,2,1] keeps every dim distinct.
  std::vector<float> cv(12);
  for (int i = 0; i < 12; ++i) cv[i] = float(i);
  Tensor z = run1("Sub", 14, {f32(cv, {3, 1, 4}), f32({1000, 2000}, {1, 2, 1})});
  ASSERT_EQ(z.dims(), (Dims{3, 2, 4}));
  std::vector<double> wz;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 4; ++k) wz.push_back(cv[i * 4 + k] - 1000.0 * (j + 1));
  expect_exact(z, wz);
}

TEST(BinaryArith, IntegersWrapAndTruncate) {
  // numpy: np.int8([127,-128]) + np.int8([1,-1]) == [-128, 127]
  expect_exact(run1("Add", 14, {tensor<int8_t>({127, -128}), tensor<int8_t>({1, -1})}), {-128, 127});
  // numpy: np.uint16([300,65535]) * np.uint16([300,2]) == [24464, 65534]
  expect_exact(run1("Mul", 14, {tensor<uint16_t>({300, 65535}), tensor<uint16_t>({300, 2})}), {24464, 65534});
  expect_exact(run1("Sub", 14, {tensor<uint8_t>({1}), tensor<uint8_t>({2})}), {255});
  // C-style truncation (as ONNX Runtime): 7/2=3, -7/2=-3, 7/-2=-3, -7/-2=3
  expect_exact(run1("Div", 14, {tensor<int32_t>({7, -7, 7, -7}), tensor<int32_t>({2, 2, -2, -2})}), {3, -3, -3, 3});
  const int64_t mn = std::numeric_limits<int64_t>::min();
  Tensor w = run1("Div", 14, {tensor<int64_t>({mn}), tensor<int64_t>({-1})});
  EXPECT_EQ(w.data<int64_t>()[0], mn);
  EXPECT_EQ(run_code("Div", 14, {tensor<int32_t>({1, 2}), tensor<int32_t>({1, 0})}), ErrorCode::INVALID_ARGUMENT);
  // Float division by zero is IEEE: inf.
  expect_close(run1("Div", 14, {f32({1}), f32({0})}), {kInf});
}

TEST(BinaryArith, Float16RoundsOnceFromFloat) {
  // numpy: np.float16([0.1,1000,-2.5]) + np.float16([0.2,0.3,1]) -> bits [13516, 25553, 48640]
  Tensor y = run1("Add", 14, {f16({0.1f, 1000, -2.5f}), f16({0.2f, 0.3f, 1})});
  ASSERT_EQ(y.dtype(), DType::F16);
  EXPECT_EQ(y.data<Half>()[0].bits, 13516);
  EXPECT_EQ(y.data<Half>()[1].bits, 25553);
  EXPECT_EQ(y.data<Half>()[2].bits, 48640);
}

TEST(BinaryArith, Errors) {
  EXPECT_EQ(run_code("Add", 14, {f32({1, 2, 3}, {3}), f32({1, 2, 3, 4}, {4})}), ErrorCode::SHAPE_MISMATCH);
  EXPECT_EQ(run_code("Mul", 14, {f32({1, 2, 3, 4, 5, 6}, {2, 3}), f32({1, 2}, {2, 1, 1})}), ErrorCode::OK);
  EXPECT_EQ(run_code("Mul", 14, {f32({1, 2, 3, 4, 5, 6}, {2, 3}), f32({1, 2}, {2})}), ErrorCode::SHAPE_MISMATCH);
  EXPECT_EQ(run_code("Add", 14, {f32({1}), tensor<double>({1})}), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Add", 14, {tensor<bool>({true}), tensor<bool>({true})}), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Sub", 14, {tensor<std::string>({"a"}), tensor<std::string>({"b"})}),
            ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Add", 14, {f32({1})}), ErrorCode::INVALID_ARGUMENT);
}

TEST(BinaryArith, ModFollowsFmodAttribute) {
  Tensor a = tensor<int32_t>({-4, 7, 5, 4, -7, 8});
  Tensor b = tensor<int32_t>({2, -3, 8, -2, 3, 5});
  // numpy: np.mod(a, b) (sign of the divisor) and np.fmod(a, b) (sign of the dividend)
  expect_exact(run1("Mod", 13, {a, b}), {0, -2, 5, 0, 2, 3});
  expect_exact(run1("Mod", 13, {a, b}, {{"fmod", attr_int(1)}}), {0, 1, 5, 0, -1, 3});
  // numpy: np.fmod(np.float32([-4.3,7.2,5.0,4.3,-7.2,8.0]), np.float32([2.1,-3.4,8.0,-2.1,3.4,5.0]))
  expect_close(
      run1("Mod", 13, {f32({-4.3f, 7.2f, 5.0f, 4.3f, -7.2f, 8.0f}), f32({2.1f, -3.4f, 8.0f, -2.1f, 3.4f, 5.0f})},
           {{"fmod", attr_int(1)}}),
      {-0.10000038146972656, 0.39999961853027344, 5.0, 0.10000038146972656, -0.39999961853027344, 3.0}, 1e-6);
  expect_exact(run1("Mod", 13, {tensor<uint8_t>({7, 200}), tensor<uint8_t>({3})}), {1, 2});
  EXPECT_EQ(run_code("Mod", 13, {f32({1}), f32({2})}), ErrorCode::ATTRIBUTE_INVALID);
  EXPECT_EQ(run_code("Mod", 13, {a, tensor<int32_t>({0})}), ErrorCode::INVALID_ARGUMENT);
}

TEST(BinaryArith, PowMixedTypes) {
  // numpy: np.power(np.float32([1,2,3]), np.float32([4,5,6]))
  expect_exact(run1("Pow", 15, {f32({1, 2, 3}), f32({4, 5, 6})}), {1, 32, 729});
  // numpy: np.power(np.int64([2,-3,5]), np.int64([10,3,0]))
  Tensor pi = run1("Pow", 15, {tensor<int64_t>({2, -3, 5}), tensor<int64_t>({10, 3, 0})});
  EXPECT_EQ(pi.dtype(), DType::I64);
  expect_exact(pi, {1024, -27, 1});
  // numpy: np.power(np.float32([1.5,2,-2]), np.int64([2,3,3])) -> float32 output
  Tensor pf = run1("Pow", 15, {f32({1.5f, 2, -2}), tensor<int64_t>({2, 3, 3})});
  EXPECT_EQ(pf.dtype(), DType::F32);
  expect_exact(pf, {2.25, 8, -8});
  // numpy: np.power(np.int32([2,3,4]), np.float32([0.5,2.5,-1])).astype(np.int32)
  expect_exact(run1("Pow", 15, {tensor<int32_t>({2, 3, 4}), f32({0.5f, 2.5f, -1})}), {1, 15, 0});
  // Scalar exponent 2 (the x*x fast path) and broadcasting exponent rows.
  expect_exact(run1("Pow", 15, {f32({-3, 0.5f, 4}), f32s(2)}), {9, 0.25, 16});
  expect_exact(run1("Pow", 15, {f32({2, 3}, {2, 1}), f32({1, 2, 3}, {3})}), {2, 4, 8, 3, 9, 27});
  // Before opset 12 the types must agree.
  EXPECT_EQ(run_code("Pow", 7, {f32({2}), tensor<int64_t>({2})}), ErrorCode::DTYPE_UNSUPPORTED);
}

// ---- comparisons, logical, bit shifts ------------------------------------------------------

TEST(Compare, NumericStringAndNaN) {
  Tensor e = run1("Equal", 13, {tensor<int32_t>({1, 2, 3, 4}, {2, 2}), tensor<int32_t>({1, 4})});
  EXPECT_EQ(e.dtype(), DType::Bool);
  expect_exact(e, {1, 0, 0, 1});
  expect_exact(run1("Equal", 13, {tensor<std::string>({"a", "b"}), tensor<std::string>({"a"})}), {1, 0});
  expect_exact(run1("Equal", 13, {tensor<bool>({true, false}), tensor<bool>({true, true})}), {1, 0});
  const Tensor x = f32({1, 2, std::nanf(""), 4});
  const Tensor y = f32s(2);
  expect_exact(run1("Greater", 13, {x, y}), {0, 0, 0, 1});
  expect_exact(run1("Less", 13, {x, y}), {1, 0, 0, 0});
  expect_exact(run1("GreaterOrEqual", 16, {x, y}), {0, 1, 0, 1});
  expect_exact(run1("LessOrEqual", 16, {x, y}), {1, 1, 0, 0});
  expect_exact(run1("Greater", 13, {tensor<uint64_t>({~0ull, 1}), tensor<uint64_t>({1, 2})}), {1, 0});
  EXPECT_EQ(run_code("Greater", 13, {tensor<bool>({true}), tensor<bool>({false})}), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_EQ(run_code("Less", 13, {f32({1, 2}), f32({1, 2, 3})}), ErrorCode::SHAPE_MISMATCH);
}

TEST(Logical, AndOrXorBroadcast) {
  Tensor a = tensor<bool>({true, true, false, false}, {2, 2});
  Tensor b = tensor<bool>({true, false});
  expect_exact(run1("And", 7, {a, b}), {1, 0, 0, 0});
  expect_exact(run1("Or", 7, {a, b}), {1, 1, 1, 0});
  expect_exact(run1("Xor", 7, {a, b}), {0, 1, 1, 0});
  EXPECT_EQ(run_code("And", 7, {f32({1}), f32({1})}), ErrorCode::DTYPE_UNSUPPORTED);
}

TEST(BitShift, LeftRightAndOversizedShifts) {
  // ONNX spec example: [16,4,1] >> [1,2,3] == [8,1,0]; << == [32,16,8]
  Tensor x = tensor<uint8_t>({16, 4, 1});
  Tensor s = tensor<uint8_t>({1, 2, 3});
  expect_exact(run1("BitShift", 11, {x, s}, {{"direction", attr_string("RIGHT")}}), {8, 1, 0});
  expect_exact(run1("BitShift", 11, {x, s}, {{"direction", attr_string("LEFT")}}), {32, 16, 8});
  expect_exact(run1("BitShift", 11, {tensor<uint64_t>({1, 1}), tensor<uint64_t>({63, 64})},
                    {{"direction", attr_string("LEFT")}}),
               {9223372036854775808.0, 0});
  expect_exact(
      run1("BitShift", 11, {tensor<uint8_t>({255}), tensor<uint8_t>({9})}, {{"direction", attr_string("RIGHT")}}), {0});
  EXPECT_EQ(run_code("BitShift", 11, {x, s}, {{"direction", attr_string("UP")}}), ErrorCode::ATTRIBUTE_INVALID);
  EXPECT_EQ(
      run_code("BitShift", 11, {tensor<int32_t>({1}), tensor<int32_t>({1})}, {{"direction", attr_string("LEFT")}}),
      ErrorCode::DTYPE_UNSUPPORTED);
}

}  // namespace
}  // namespace gearbox::testing
