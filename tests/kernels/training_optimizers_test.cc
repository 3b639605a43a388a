// ai.onnx.preview.training's Adagrad, Adam and Momentum (reference kernels): their values are
// the ONNX node suite's (test_adagrad*, test_adam, test_momentum*, test_nesterov_momentum); here,
// the refusals of inputs that do not fit.
#include <gtest/gtest.h>

#include <cmath>

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

// Without an epsilon attribute the ONNX schema's 1e-6 applies (the importer fills no defaults
// in). With a gradient of 1e-6 it is half of Adagrad's denominator: the step halves.
TEST(TrainingOptimizers, EpsilonDefaultsToTheSchemas) {
  const Tensor r = Tensor::scalar<float>(0.1f), t = Tensor::scalar<int64_t>(0);
  const Tensor x = Tensor::from_vector<float>({1}), g = Tensor::from_vector<float>({1e-6f});
  const Tensor zero = Tensor::from_vector<float>({0});
  auto adagrad = run_kernel(training_call("Adagrad", {r, t, x, g, zero}, 2));
  ASSERT_TRUE(adagrad.ok()) << adagrad.status().to_string();
  EXPECT_NEAR(adagrad.value()[0].at_double(0), 1 - 0.1 * 1e-6 / (1e-6 + 1e-6), 1e-6);  // 0.95, not 0.9
  // Adam at T = 0 (no bias correction), alpha 0.9, beta 0.999: V = 0.1 g, H = 0.001 g^2.
  auto adam = run_kernel(training_call("Adam", {r, t, x, g, zero, zero}, 3));
  ASSERT_TRUE(adam.ok()) << adam.status().to_string();
  const double v = 0.1 * 1e-6, h = 0.001 * 1e-12;
  EXPECT_NEAR(adam.value()[0].at_double(0), 1 - 0.1 * v / (std::sqrt(h) + 1e-6), 1e-6);
}

}  // namespace
}  // namespace gearbox::testing
