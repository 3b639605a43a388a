// ai.onnx.preview.training's Adagrad, Adam and Momentum (reference kernels): their values are
// the ONNX node suite's (test_adagrad*, test_adam, test_momentum*, test_nesterov_momentum); here,
// the refusals of inputs that do not fit.
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

KernelCall training_call(const std::string& op, std::vector<Tensor> inputs, size_t outputs) {
  KernelCall c = make_call(op, 1, std::move(inputs));
  c.domain = "ai.onnx.preview.training";
  c.num_outputs = outputs;
  return c;
}

ErrorCode code_of(const KernelCall& c) {
  auto r = run_kernel(c);
  return r.ok() ? ErrorCode::OK : r.status().code();
}

TEST(TrainingOptimizers, RefuseInputsThatDoNotFit) {
  const Tensor r = Tensor::scalar<float>(0.1f), t = Tensor::scalar<int64_t>(1);
  const Tensor x = Tensor::from_vector<float>({1, 2}), g = Tensor::from_vector<float>({0.5f, -1});
  const Tensor h = Tensor::from_vector<float>({1, 1});
  ASSERT_EQ(code_of(training_call("Adagrad", {r, t, x, g, h}, 2)), ErrorCode::OK);
  // A parameter without its accumulator; outputs that do not match the parameters.
  EXPECT_EQ(code_of(training_call("Adagrad", {r, t, x, g}, 2)), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(code_of(training_call("Adagrad", {r, t, x, g, h}, 3)), ErrorCode::INVALID_ARGUMENT);
  // T must be an int64 scalar, R a float scalar.
  EXPECT_EQ(code_of(training_call("Adagrad", {r, Tensor::scalar<float>(1), x, g, h}, 2)), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(code_of(training_call("Adagrad", {x, t, x, g, h}, 2)), ErrorCode::INVALID_ARGUMENT);
  // A gradient of another shape.
  EXPECT_EQ(code_of(training_call("Adam", {r, t, x, Tensor::from_vector<float>({1, 2, 3}), h, h}, 3)),
            ErrorCode::SHAPE_MISMATCH);
  auto m = training_call("Momentum", {r, t, x, g, h}, 2);
  m.attrs["mode"] = attr_string("heavy_ball");
  EXPECT_EQ(code_of(m), ErrorCode::ATTRIBUTE_INVALID);
  m.attrs["mode"] = attr_string("nesterov");
  EXPECT_EQ(code_of(m), ErrorCode::OK);
}

}  // namespace
}  // namespace gearbox::testing
