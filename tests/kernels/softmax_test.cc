// Tests for Softmax / LogSoftmax / Hardmax (opset >= 13 single-axis and opset < 13
// coerce-to-2-D semantics) with values from torch/numpy computed when the test was written,
// plus Dropout's inference behaviour.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"

namespace gearbox {
namespace {

using testing::attr_int;
using testing::KernelCall;
using testing::make_call;
using testing::run_kernel;

const std::vector<float> kX{1, 2, 3, 4, -1, 0.5f, 2, 10};  // shape [2, 4]

TEST(Softmax, LastAxisMatchesTorch) {
  auto out = run_kernel(make_call("Softmax", 13, {Tensor::from_vector(kX, {2, 4})}));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<float> expect{0.032058604f,   0.087144323f,   0.23688284f,    0.64391428f,
                                  1.6694572e-05f, 7.4819880e-05f, 3.3531943e-04f, 0.99957317f};
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(out.value()[0].data<float>()[i], expect[i], 1e-7) << i;
}

TEST(Softmax, LargeInputsDoNotOverflow) {
  auto out = run_kernel(make_call("Softmax", 13, {Tensor::from_vector<float>({1000, 1001, 1002}, {1, 3})}));
  ASSERT_TRUE(out.ok());
  // Same as softmax([0, 1, 2]) = [0.09003057, 0.24472847, 0.66524096].
  EXPECT_NEAR(out.value()[0].data<float>()[0], 0.09003057f, 1e-7);
  EXPECT_NEAR(out.value()[0].data<float>()[2], 0.66524096f, 1e-7);
}

TEST(LogSoftmax, Axis0MatchesTorch) {
  KernelCall call = make_call("LogSoftmax", 13, {Tensor::from_vector(kX, {2, 4})});
  call.attrs["axis"] = attr_int(0);
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<float> expect{-0.12692805f, -0.20141333f, -0.31326166f, -6.0024757f,
                                  -2.1269281f,  -1.7014134f,  -1.3132616f,  -0.0024756519f};
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(out.value()[0].data<float>()[i], expect[i], 1e-6) << i;
}

TEST(Softmax, LegacyOpsetCoercesTo2D) {
  // opset 11, axis 1 on [2,3,4]: each row of the [2, 12] view sums to 1 (numpy values).
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = i * 0.3f - 3;
  KernelCall call = make_call("Softmax", 11, {Tensor::from_vector(x, {2, 3, 4})});
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<float> expect{0.009827982f, 0.013266386f, 0.017907748f, 0.024172936f, 0.032630049f, 0.044045955f};
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(out.value()[0].data<float>()[i], expect[i], 1e-7) << i;
  // At opset 13 with axis=1 the op normalizes along dim 1 only (length 3, stride 4).
  call.opset = 13;
  call.attrs["axis"] = attr_int(1);
  auto out13 = run_kernel(call);
  ASSERT_TRUE(out13.ok());
  double s = 0;
  for (int j = 0; j < 3; ++j) s += out13.value()[0].data<float>()[j * 4];
  EXPECT_NEAR(s, 1.0, 1e-6);
}

TEST(Hardmax, FirstMaximumWins) {
  auto out = run_kernel(make_call("Hardmax", 13, {Tensor::from_vector<double>({3, 7, 7, 1, 5, 2}, {2, 3})}));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<double> expect{0, 1, 0, 0, 1, 0};
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_EQ(out.value()[0].data<double>()[i], expect[i]) << i;
}

TEST(Softmax, AxisOutOfRangeIsAnError) {
  KernelCall call = make_call("Softmax", 13, {Tensor(DType::F32, {2, 3})});
  call.attrs["axis"] = attr_int(2);
  auto out = run_kernel(call);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(Dropout, InferenceIsIdentityWithTrueMask) {
  KernelCall call = make_call("Dropout", 13, {Tensor::from_vector<float>({1, -2, 3})});
  call.num_outputs = 2;
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(out.value()[0].data<float>()[1], -2);
  ASSERT_EQ(out.value()[1].dtype(), DType::Bool);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(out.value()[1].data<bool>()[i]);
}

TEST(Dropout, TrainingWithPositiveRatioIsUnsupported) {
  KernelCall call = make_call(
      "Dropout", 13, {Tensor::from_vector<float>({1, 2}), Tensor::scalar<float>(0.5f), Tensor::scalar<bool>(true)});
  auto out = run_kernel(call);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::OP_UNSUPPORTED);
  // Ratio 0 in training mode is the identity.
  call.inputs[1] = Tensor::scalar<float>(0.0f);
  EXPECT_TRUE(run_kernel(call).ok());
}

}  // namespace
}  // namespace gearbox
