// Tests for BatchNormalization (inference and training mode), InstanceNormalization,
// LayerNormalization (with Mean/InvStdDev), LRN, MeanVarianceNormalization and
// LpNormalization, with expected values from torch.nn.functional computed when the test was
// written or by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"

namespace gearbox {
namespace {

using testing::attr_float;
using testing::attr_int;
using testing::attr_ints;
using testing::KernelCall;
using testing::make_call;
using testing::run_kernel;

// x = arange(24).reshape(2,3,4) * 0.3 - 3
std::vector<float> ramp() {
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = i * 0.3f - 3;
  return x;
}

void expect_near(const Tensor& t, const std::vector<float>& expect, double tol) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(expect.size()));
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(t.at_double(static_cast<int64_t>(i)), expect[i], tol) << i;
}

TEST(BatchNorm, InferenceMatchesTorch) {
  // torch batch_norm(x, mean=[0.1,0.2,-0.3], var=[1,2,0.5], weight=[1,-1,2], bias=[0,0.5,1], eps=1e-3)
  KernelCall call =
      make_call("BatchNormalization", 15,
                {Tensor::from_vector(ramp(), {2, 3, 4}), Tensor::from_vector<float>({1, -1, 2}),
                 Tensor::from_vector<float>({0, 0.5f, 1}), Tensor::from_vector<float>({0.1f, 0.2f, -0.3f}),
                 Tensor::from_vector<float>({1, 2, 0.5f})});
  call.attrs["epsilon"] = attr_float(1e-3f);
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  expect_near(out.value()[0], {-3.098451, -2.798601, -2.498751, -2.198901, 1.91386,  1.701781,  1.489702,  1.277623,
                               0.152319,  1.0,       1.847681,  2.695362,  0.49975,  0.7996,    1.099451,  1.399301,
                               -0.631088, -0.843167, -1.055246, -1.267325, 10.32449, 11.172172, 12.019853, 12.867533},
              1e-5);
}

TEST(BatchNorm, TrainingModeUsesBatchStatistics) {
  // x[N=2, C=1, 2]: values 1,3 | 5,7 -> batch mean 4, population var 5.
  KernelCall call =
      make_call("BatchNormalization", 15,
                {Tensor::from_vector<float>({1, 3, 5, 7}, {2, 1, 2}), Tensor::from_vector<float>({1}),
                 Tensor::from_vector<float>({0}), Tensor::from_vector<float>({0}), Tensor::from_vector<float>({1})});
  call.attrs["training_mode"] = attr_int(1);
  call.attrs["epsilon"] = attr_float(0.0f);
  call.attrs["momentum"] = attr_float(0.9f);
  call.num_outputs = 3;
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const double s5 = std::sqrt(5.0);
  expect_near(out.value()[0], {float(-3 / s5), float(-1 / s5), float(1 / s5), float(3 / s5)}, 1e-6);
  expect_near(out.value()[1], {0.4f}, 1e-6);         // 0 * 0.9 + 4 * 0.1
  expect_near(out.value()[2], {0.9f + 0.5f}, 1e-6);  // 1 * 0.9 + 5 * 0.1
}

TEST(InstanceNorm, MatchesTorch) {
  std::vector<float> x = ramp();
  for (auto& v : x) v = v * v;
  KernelCall call = make_call("InstanceNormalization", 6,
                              {Tensor::from_vector(x, {2, 3, 4}), Tensor::from_vector<float>({1, -1, 2}),
                               Tensor::from_vector<float>({0, 0.5f, 1})});
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  expect_near(out.value()[0], {1.392326, 0.394055, -0.499135, -1.287245, -0.933949, 0.153874,  1.043912, 1.736163,
                               4.332419, 0.333516, -0.999452, 0.333518,  -1.204064, -0.570346, 0.316859, 1.457551,
                               1.779737, 1.005942, 0.113104,  -0.898782, -1.603536, 0.028532,  1.816034, 3.758969},
              2e-5);
}

TEST(LayerNorm, Axis1WithStatsMatchesTorch) {
  // torch layer_norm(x, (3,4), weight=linspace(0.5,2,12), bias=linspace(-1,1,12)).
  std::vector<float> w(12), b(12);
  for (int i = 0; i < 12; ++i) {
    w[i] = 0.5f + 1.5f * i / 11;
    b[i] = -1.0f + 2.0f * i / 11;
  }
  KernelCall call = make_call(
      "LayerNormalization", 17,
      {Tensor::from_vector(ramp(), {2, 3, 4}), Tensor::from_vector(w, {3, 4}), Tensor::from_vector(b, {3, 4})});
  call.attrs["axis"] = attr_int(1);
  call.num_outputs = 3;
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<float> row{-1.796624, -1.647724, -1.41982, -1.112912, -0.727,   -0.262085,
                               0.281835,  0.904759,  1.606687, 2.387619,  3.247555, 4.186495};
  std::vector<float> both(row);
  both.insert(both.end(), row.begin(), row.end());
  expect_near(out.value()[0], both, 1e-5);
  // Mean of each [3,4] block: (0..11)*0.3-3 -> 1.65 - 3 = -1.35; second block +3.6.
  ASSERT_EQ(out.value()[1].dims(), (Dims{2, 1, 1}));
  expect_near(out.value()[1], {-1.35f, 2.25f}, 1e-5);
  // Population std of 0.3 * (0..11) = 0.3 * sqrt(143/12).
  const float inv = static_cast<float>(1.0 / std::sqrt(0.09 * 143.0 / 12.0 + 1e-5));
  expect_near(out.value()[2], {inv, inv}, 1e-5);
}

TEST(LayerNorm, ScaleThatDoesNotBroadcastIsAnError) {
  KernelCall call = make_call("LayerNormalization", 17, {Tensor(DType::F32, {2, 4}), Tensor(DType::F32, {3})});
  auto out = run_kernel(call);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::SHAPE_MISMATCH);
}

TEST(LRN, MatchesTorch) {
  // torch local_response_norm(x.reshape(1,6,4), size=3, alpha=0.01, beta=0.75, k=2)
  KernelCall call = make_call("LRN", 13, {Tensor::from_vector(ramp(), {1, 6, 4})});
  call.attrs["size"] = attr_int(3);
  call.attrs["alpha"] = attr_float(0.01f);
  call.attrs["beta"] = attr_float(0.75f);
  call.attrs["bias"] = attr_float(2.0f);
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  expect_near(out.value()[0], {-1.756997, -1.586547, -1.414339, -1.240581, -1.053733, -0.881318, -0.707169, -0.531618,
                               -0.355006, -0.177682, 0.0,       0.177682,  0.355006,  0.531619,  0.707169,  0.881318,
                               1.053733,  1.224099,  1.392113,  1.557489,  1.756997,  1.925483,  2.091813,  2.255802},
              2e-6);
}

TEST(MeanVarianceNormalization, ZeroMeanUnitVariancePerChannel) {
  // [N=1, C=2, 1, 2]: channel 0 = {1, 3} -> {-1, 1}; channel 1 = {10, 10} -> {0, 0}.
  auto out = run_kernel(
      make_call("MeanVarianceNormalization", 13, {Tensor::from_vector<float>({1, 3, 10, 10}, {1, 2, 1, 2})}));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  expect_near(out.value()[0], {-1, 1, 0, 0}, 1e-6);
}

TEST(LpNormalization, L1AndL2) {
  KernelCall call = make_call("LpNormalization", 1, {Tensor::from_vector<float>({3, -4, 1, 1}, {2, 2})});
  auto l2 = run_kernel(call);
  call.attrs["p"] = attr_int(1);
  call.attrs["axis"] = attr_int(0);
  auto l1 = run_kernel(call);
  ASSERT_TRUE(l2.ok() && l1.ok());
  expect_near(l2.value()[0], {0.6f, -0.8f, float(1 / std::sqrt(2.0)), float(1 / std::sqrt(2.0))}, 1e-6);
  expect_near(l1.value()[0], {0.75f, -0.8f, 0.25f, 0.2f}, 1e-6);
}

}  // namespace
}  // namespace gearbox
