// Tests for BatchNormalization (inference and training mode), InstanceNormalization,
// LayerNormalization (with Mean/InvStdDev), LRN, MeanVarianceNormalization and
// LpNormalization, with expected values from torch.nn.functional computed when the test was
// written or by hand; and com.gearbox.BatchNormalizationGrad against central differences of the
// training-mode BatchNormalization kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
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

// Training-mode BatchNormalization (momentum 0: outputs 1 and 2 are the batch mean and
// population variance) in float64.
std::vector<Tensor> bn_train(const Tensor& x, const Tensor& scale, const Tensor& bias, float eps) {
  const int64_t c = x.dim(1);
  Tensor ones(DType::F64, {c});
  for (int64_t i = 0; i < c; ++i) ones.data<double>()[i] = 1.0;
  KernelCall call = make_call("BatchNormalization", 15, {x, scale, bias, Tensor(DType::F64, {c}), ones});
  call.attrs["training_mode"] = attr_int(1);
  call.attrs["momentum"] = attr_float(0.0f);
  call.attrs["epsilon"] = attr_float(eps);
  call.num_outputs = 3;
  auto out = run_kernel(call);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? out.value() : std::vector<Tensor>{};
}

KernelCall bn_grad_call(const Tensor& dy, const Tensor& x, const Tensor& scale, const Tensor& mean, const Tensor& var,
                        float eps) {
  KernelCall call = make_call("BatchNormalizationGrad", 1, {dy, x, scale, mean, var});
  call.domain = "com.gearbox";
  call.attrs["epsilon"] = attr_float(eps);
  call.num_outputs = 3;
  return call;
}

// t in dtype `to`, by the Cast kernel.
Tensor cast(const Tensor& t, DType to) {
  KernelCall call = make_call("Cast", 19, {t});
  call.attrs["to"] = attr_int(static_cast<int64_t>(to));
  auto out = run_kernel(call);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? out.value()[0] : Tensor();
}

Tensor random_f64(Dims dims, std::mt19937& g, double lo = -2, double hi = 2) {
  Tensor t(DType::F64, std::move(dims));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = u(g);
  return t;
}

TEST(BatchNormGrad, MatchesCentralDifferencesOfTheTrainingForward) {
  // L = sum(dY * BN(x; scale, bias)) with the batch statistics: dL/dx, dL/dscale, dL/dbias by
  // central differences of the forward kernel, against the gradient kernel.
  std::mt19937 g(3);
  const float eps = 1e-3f;
  for (const Dims& dims : std::vector<Dims>{{4, 3, 2, 3}, {5, 2}, {2, 3, 7}}) {
    const int64_t c = dims[1];
    Tensor x = random_f64(dims, g), dy = random_f64(dims, g), scale = random_f64({c}, g, 0.5, 2),
           bias = random_f64({c}, g);
    auto loss = [&](const Tensor& xv, const Tensor& sv, const Tensor& bv) {
      const Tensor y = bn_train(xv, sv, bv, eps)[0];
      double l = 0;
      for (int64_t i = 0; i < y.numel(); ++i) l += y.data<double>()[i] * dy.data<double>()[i];
      return l;
    };
    const std::vector<Tensor> fwd = bn_train(x, scale, bias, eps);
    auto out = run_kernel(bn_grad_call(dy, x, scale, fwd[1], fwd[2], eps));
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor* params[3] = {&x, &scale, &bias};
    for (size_t p = 0; p < 3; ++p) {
      ASSERT_EQ(out.value()[p].dims(), params[p]->dims());
      for (int64_t i = 0; i < params[p]->numel(); ++i) {
        Tensor plus[3] = {x.clone(), scale.clone(), bias.clone()}, minus[3] = {x.clone(), scale.clone(), bias.clone()};
        const double h = 1e-6;
        plus[p].data<double>()[i] += h;
        minus[p].data<double>()[i] -= h;
        const double numeric = (loss(plus[0], plus[1], plus[2]) - loss(minus[0], minus[1], minus[2])) / (2 * h);
        EXPECT_NEAR(out.value()[p].data<double>()[i], numeric, 1e-6 * (1 + std::abs(numeric)))
            << "input " << p << " element " << i << " of " << to_string(dims);
      }
    }
  }
}

TEST(BatchNormGrad, Float32AndBfloat16FollowFloat64) {
  std::mt19937 g(5);
  Tensor x = random_f64({8, 4, 3, 3}, g), dy = random_f64({8, 4, 3, 3}, g), scale = random_f64({4}, g, 0.5, 2);
  const std::vector<Tensor> fwd = bn_train(x, scale, random_f64({4}, g), 1e-5f);
  auto want = run_kernel(bn_grad_call(dy, x, scale, fwd[1], fwd[2], 1e-5f));
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  for (DType dt : {DType::F32, DType::BF16}) {
    auto to = [&](const Tensor& t) { return cast(t, dt); };
    auto got = run_kernel(bn_grad_call(to(dy), to(x), to(scale), to(fwd[1]), to(fwd[2]), 1e-5f));
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    const double tol = dt == DType::F32 ? 1e-5 : 0.1;
    for (size_t k = 0; k < 3; ++k) {
      ASSERT_EQ(got.value()[k].dtype(), dt);
      for (int64_t i = 0; i < want.value()[k].numel(); ++i)
        EXPECT_NEAR(got.value()[k].at_double(i), want.value()[k].at_double(i),
                    tol * (1 + std::abs(want.value()[k].at_double(i))))
            << dtype_name(dt) << " output " << k << " element " << i;
    }
  }
}

TEST(BatchNormGrad, BadShapesAndDtypesAreErrors) {
  std::mt19937 g(7);
  Tensor x = random_f64({2, 3, 4}, g), v = random_f64({3}, g, 0.5, 1);
  auto code = [](const KernelCall& call) { return run_kernel(call).status().code(); };
  EXPECT_EQ(code(bn_grad_call(random_f64({2, 3, 5}, g), x, v, v, v, 1e-5f)), ErrorCode::SHAPE_MISMATCH);  // dY
  EXPECT_EQ(code(bn_grad_call(x, x, random_f64({4}, g), v, v, 1e-5f)), ErrorCode::SHAPE_MISMATCH);        // scale
  EXPECT_EQ(code(bn_grad_call(x, x, v, cast(v, DType::F32), v, 1e-5f)), ErrorCode::SHAPE_MISMATCH);       // mean dtype
  EXPECT_EQ(code(bn_grad_call(random_f64({3}, g), random_f64({3}, g), v, v, v, 1e-5f)),
            ErrorCode::SHAPE_MISMATCH);  // rank 1
  EXPECT_EQ(code(bn_grad_call(random_f64({0, 3}, g), random_f64({0, 3}, g), v, v, v, 1e-5f)),
            ErrorCode::SHAPE_MISMATCH);  // empty batch
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
