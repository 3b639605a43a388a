// nn::Module bookkeeping, Linear's default initialization, the seeded generator.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>

#include "gearbox/nn.hpp"
#include "torch_refs.h"

namespace gbx::nn {
namespace {

std::shared_ptr<Sequential> mlp() {
  return std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
      std::make_shared<Linear>(8, 4), std::make_shared<ReLU>(), std::make_shared<Linear>(4, 2)});
}

TEST(NnModule, NamesNestLikeTorch) {
  auto net = mlp();
  std::vector<std::string> names;
  for (auto& [n, t] : net->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(net->parameters().size(), 4u);
  for (const Tensor& p : net->parameters()) EXPECT_TRUE(p.requires_grad());
  EXPECT_EQ(net->state_dict().at("2.weight").shape(), (std::vector<int64_t>{2, 4}));
}

TEST(NnModule, TrainEvalReachesChildren) {
  auto net = mlp();
  net->eval();
  for (auto& [n, child] : net->named_children()) EXPECT_FALSE(child->is_training()) << n;
  net->train();
  for (auto& [n, child] : net->named_children()) EXPECT_TRUE(child->is_training()) << n;
}

TEST(NnModule, LinearInitIsTorchsUniformBound) {
  manual_seed(3);
  Linear l(100, 50);
  const double bound = 1.0 / std::sqrt(100.0);
  for (const Tensor& t : {l.weight(), l.bias()}) {
    std::vector<float> v = t.to_float_vector();
    double lo = 1, hi = -1, mean = 0;
    for (float x : v) lo = std::min<double>(lo, x), hi = std::max<double>(hi, x), mean += x / v.size();
    EXPECT_GE(lo, -bound);
    EXPECT_LE(hi, bound);
    // Uniform over the whole interval, not a narrower one.
    EXPECT_LT(lo, -0.8 * bound);
    EXPECT_GT(hi, 0.8 * bound);
  }
}

TEST(NnModule, ManualSeedReproducesWeights) {
  manual_seed(42);
  Linear a(5, 3);
  manual_seed(42);
  Linear b(5, 3);
  EXPECT_EQ(a.weight().to_float_vector(), b.weight().to_float_vector());
  Linear c(5, 3);
  EXPECT_NE(a.weight().to_float_vector(), c.weight().to_float_vector());
}

TEST(NnModule, LoadStateDictCopiesAndChecks) {
  auto a = mlp(), b = mlp();
  b->load_state_dict(a->state_dict());
  EXPECT_EQ(a->state_dict().at("0.weight").to_float_vector(), b->state_dict().at("0.weight").to_float_vector());
  auto bad = a->state_dict();
  bad["0.weight"] = Tensor::zeros({3, 3});
  try {
    b->load_state_dict(bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), "SHAPE_MISMATCH") << e.what();
  }
  bad = a->state_dict();
  bad["9.weight"] = Tensor::zeros({1});
  EXPECT_THROW(b->load_state_dict(bad), Error);
}

TEST(NnModule, Conv2dInitIsTorchsUniformBound) {
  manual_seed(4);
  Conv2d conv(6, 64, {3, 2}, Conv2dOptions{.groups = 2});  // 64 biases: both ends of the interval get reached
  EXPECT_EQ(conv.weight().shape(), (std::vector<int64_t>{64, 3, 3, 2}));
  const double bound = 1.0 / std::sqrt(3.0 * 3 * 2);  // fan_in = in/groups * kH * kW
  for (const Tensor& t : {conv.weight(), conv.bias()}) {
    std::vector<float> v = t.to_float_vector();
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    EXPECT_GE(*lo, -bound);
    EXPECT_LE(*hi, bound);
    EXPECT_LT(*lo, -0.5 * bound);
    EXPECT_GT(*hi, 0.5 * bound);
  }
  EXPECT_FALSE(Conv2d(2, 2, {3}, Conv2dOptions{.bias = false}).bias().defined());
  EXPECT_EQ(conv(Tensor::zeros({1, 6, 5, 4})).shape(), (std::vector<int64_t>{1, 64, 3, 3}));
}

// Conv1d and ConvTranspose2d: torch's weight layouts and init bounds (ConvTranspose2d's fan_in
// is torch's for its weight: out/groups * kH * kW), output shapes; GroupNorm's affine
// parameters; BatchNorm1d's input ranks; the errors. (Their values and gradients against
// torch: Frontend/TorchOp.)
TEST(NnModule, Conv1dConvTranspose2dGroupNormBatchNorm1d) {
  manual_seed(5);
  auto expect_bound = [](const std::vector<std::pair<std::string, Tensor>>& params, double bound) {
    for (const auto& [name, t] : params) {
      std::vector<float> v = t.to_float_vector();
      const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
      EXPECT_GE(*lo, -bound) << name;
      EXPECT_LE(*hi, bound) << name;
      EXPECT_LT(*lo, -0.5 * bound) << name;
      EXPECT_GT(*hi, 0.5 * bound) << name;
    }
  };
  Conv1d c1(4, 64, 3, Conv1dOptions{.stride = 2, .padding = 1, .groups = 2});
  ASSERT_EQ(c1.named_parameters().size(), 2u);
  EXPECT_EQ(c1.named_parameters()[0].second.shape(), (std::vector<int64_t>{64, 2, 3}));
  expect_bound(c1.named_parameters(), 1.0 / std::sqrt(2.0 * 3));
  EXPECT_EQ(c1(Tensor::zeros({2, 4, 9})).shape(), (std::vector<int64_t>{2, 64, 5}));
  ConvTranspose2d ct(6, 64, {3, 2}, ConvTranspose2dOptions{.stride = {2}, .output_padding = {1}, .groups = 2});
  EXPECT_EQ(ct.named_parameters()[0].second.shape(), (std::vector<int64_t>{6, 32, 3, 2}));
  expect_bound(ct.named_parameters(), 1.0 / std::sqrt(32.0 * 3 * 2));
  // (in - 1) * stride + kernel + output_padding: 3 * 2 + 3 + 1, 4 * 2 + 2 + 1.
  EXPECT_EQ(ct(Tensor::zeros({1, 6, 4, 5})).shape(), (std::vector<int64_t>{1, 64, 10, 11}));
  GroupNorm gn(2, 4);
  EXPECT_EQ(gn.named_parameters().size(), 2u);
  EXPECT_EQ(GroupNorm(2, 4, 1e-5, false).named_parameters().size(), 0u);
  EXPECT_EQ(gn(Tensor::randn({3, 4, 5})).shape(), (std::vector<int64_t>{3, 4, 5}));
  BatchNorm1d bn1(4);
  EXPECT_EQ(bn1(Tensor::randn({5, 4})).shape(), (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(bn1(Tensor::randn({5, 4, 3})).shape(), (std::vector<int64_t>{5, 4, 3}));
  EXPECT_EQ(bn1.num_batches_tracked(), 2);
  EXPECT_THROW(bn1(Tensor::randn({5, 4, 3, 2})), Error);
  EXPECT_THROW(BatchNorm2d(4)(Tensor::randn({5, 4})), Error);
  EXPECT_THROW(GroupNorm(3, 4), Error);
  EXPECT_THROW(gn(Tensor::randn({3, 6, 5})), Error);
  EXPECT_THROW(Conv1d(3, 4, 3, Conv1dOptions{.groups = 2}), Error);
  EXPECT_THROW(Conv1d(4, 4, 0), Error);
  EXPECT_THROW(c1(Tensor::zeros({2, 4, 9, 1})), Error);                                             // not [N, C, L]
  EXPECT_THROW(conv_transpose2d(Tensor::zeros({1, 2, 3, 3}), Tensor::zeros({3, 2, 3, 3})), Error);  // C_in
  EXPECT_THROW(conv_transpose2d(Tensor::zeros({1, 2, 3, 3}), Tensor::zeros({2, 2, 3, 3}), Tensor(), {1}, {0}, {1}),
               Error);  // output_padding not below the stride or the dilation
}

// nn::init: the gains and fans equal torch.nn.init's (torch_reference.py's init/); each
// initializer's draws have the bound or spread its formula gives, in place (the same tensor,
// its dtype kept); constants exact; bad uses refused.
TEST(NnInit, GainsFansAndDistributionsFollowTorch) {
  const std::vector<double> gains = testing::load(testing::kRefDir + "/init/gains.npy").to_double_vector();
  const std::vector<std::pair<std::string, double>> cases{{"linear", 0.0},
                                                          {"conv2d", 0.0},
                                                          {"sigmoid", 0.0},
                                                          {"tanh", 0.0},
                                                          {"relu", 0.0},
                                                          {"leaky_relu", 0.01},
                                                          {"leaky_relu", std::sqrt(5.0)},
                                                          {"selu", 0.0}};
  ASSERT_EQ(gains.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_NEAR(init::calculate_gain(cases[i].first, cases[i].second), gains[i], 1e-12) << cases[i].first;
  const std::vector<int64_t> fans = testing::load(testing::kRefDir + "/init/fans.npy").to_int64_vector();
  const std::vector<std::vector<int64_t>> shapes{{7, 3}, {4, 6, 5}, {8, 2, 3, 3}, {2, 3, 2, 2, 2}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto [in, out] = init::fans(Tensor::zeros(shapes[i]));
    EXPECT_EQ(in, fans[2 * i]) << i;
    EXPECT_EQ(out, fans[2 * i + 1]) << i;
  }

  manual_seed(6);
  auto spread = [](const Tensor& t) {
    std::vector<double> v = t.to_double_vector();
    double sum = 0, sq = 0, lo = v[0], hi = v[0];
    for (double e : v) sum += e, sq += e * e, lo = std::min(lo, e), hi = std::max(hi, e);
    const double n = static_cast<double>(v.size()), mean = sum / n;
    return std::array<double, 4>{mean, std::sqrt(sq / n - mean * mean), lo, hi};
  };
  Tensor w = Tensor::zeros({200, 100, 3});  // fan_in 300, fan_out 600: 60,000 draws
  const void* storage = w.data();
  init::xavier_uniform_(w, 2.0);
  auto s = spread(w);
  const double xb = 2.0 * std::sqrt(6.0 / 900.0);
  EXPECT_GE(s[2], -xb);
  EXPECT_LE(s[3], xb);
  EXPECT_GT(s[3], 0.99 * xb);
  EXPECT_EQ(w.data(), storage) << "in place";
  init::kaiming_normal_(w, 0.0, init::FanMode::FanOut, "relu");
  s = spread(w);
  EXPECT_NEAR(s[1], std::sqrt(2.0) / std::sqrt(600.0), 0.02 * std::sqrt(2.0 / 600.0));  // sd of the sd: ~0.3%
  EXPECT_NEAR(s[0], 0.0, 0.01 * s[1]);
  init::kaiming_uniform_(w, std::sqrt(5.0));  // the layers' default: U(±1/sqrt(fan_in))
  s = spread(w);
  EXPECT_LE(s[3], 1.0 / std::sqrt(300.0) * (1 + 1e-12));
  EXPECT_GT(s[3], 0.99 / std::sqrt(300.0));
  init::xavier_normal_(w);
  EXPECT_NEAR(spread(w)[1], std::sqrt(2.0 / 900.0), 0.02 * std::sqrt(2.0 / 900.0));
  init::normal_(w, 3.0, 0.5);
  s = spread(w);
  EXPECT_NEAR(s[0], 3.0, 0.01);
  EXPECT_NEAR(s[1], 0.5, 0.01);
  Tensor d = Tensor::zeros({4, 5}, DType::Float64);
  init::uniform_(d, -2.0, -1.0);
  s = spread(d);
  EXPECT_EQ(d.dtype(), DType::Float64);
  EXPECT_GE(s[2], -2.0);
  EXPECT_LT(s[3], -1.0);
  init::constant_(d, 0.25);
  EXPECT_EQ(d.to_double_vector(), std::vector<double>(20, 0.25));
  init::ones_(d);
  EXPECT_EQ(d.to_double_vector(), std::vector<double>(20, 1.0));
  init::zeros_(d);
  EXPECT_EQ(d.to_double_vector(), std::vector<double>(20, 0.0));
  Tensor bias = Tensor::zeros({5});
  EXPECT_THROW(init::xavier_uniform_(bias), Error);  // no fans for 1 dim
  EXPECT_THROW(init::calculate_gain("swish"), Error);
  Tensor ids = Tensor::zeros({3, 3}, DType::Int64);
  EXPECT_THROW(init::ones_(ids), Error);
}

// BatchNorm2d in train(): batch statistics, running_mean/var moved by momentum 0.1 towards
// the batch mean and the unbiased batch variance (computed here by hand), the counter
// incremented; in eval(): the running statistics, no update.
TEST(NnModule, BatchNorm2dRunningStatistics) {
  manual_seed(8);
  BatchNorm2d bn(2);
  std::vector<std::string> names;
  for (auto& [n, t] : bn.named_buffers()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
  Tensor x = Tensor::uniform({3, 2, 2, 2}, -1, 3, DType::Float32);
  std::vector<float> xv = x.to_float_vector();
  std::vector<double> mean(2, 0), var(2, 0);
  for (size_t i = 0; i < xv.size(); ++i) mean[(i / 4) % 2] += xv[i] / 12.0;
  for (size_t i = 0; i < xv.size(); ++i) var[(i / 4) % 2] += (xv[i] - mean[(i / 4) % 2]) * (xv[i] - mean[(i / 4) % 2]);
  Tensor y = bn(x);
  std::vector<float> yv = y.to_float_vector();
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = (i / 4) % 2;
    EXPECT_NEAR(yv[i], (xv[i] - mean[c]) / std::sqrt(var[c] / 12.0 + 1e-5), 1e-5) << i;
  }
  std::vector<float> rm = bn.running_mean().to_float_vector(), rv = bn.running_var().to_float_vector();
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_NEAR(rm[c], 0.1 * mean[c], 1e-6);
    EXPECT_NEAR(rv[c], 0.9 + 0.1 * var[c] / 11.0, 1e-6);
  }
  EXPECT_EQ(bn.num_batches_tracked(), 1);
  bn.eval();
  yv = bn(x).to_float_vector();
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = (i / 4) % 2;
    EXPECT_NEAR(yv[i], (xv[i] - rm[c]) / std::sqrt(rv[c] + 1e-5), 1e-5) << i;
  }
  EXPECT_EQ(bn.running_mean().to_float_vector(), rm);
  EXPECT_EQ(bn.num_batches_tracked(), 1);
  try {
    bn(Tensor::zeros({2, 3, 2, 2}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), "SHAPE_MISMATCH") << e.what();
  }
  bn.train();
  try {
    bn(Tensor::zeros({1, 2, 1, 1}));  // one value per channel: no batch variance
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), "INVALID_ARGUMENT") << e.what();
  }
  EXPECT_EQ(bn.num_batches_tracked(), 1);  // the rejected batch did not count
  EXPECT_EQ(bn.running_mean().to_float_vector(), rm);
}

TEST(NnModule, LayerNormPoolsEmbedding) {
  LayerNorm ln({4});
  EXPECT_EQ(ln.named_parameters().size(), 2u);
  std::vector<float> v = ln(Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {1, 4})).to_float_vector();
  const float s = 1.0f / std::sqrt(1.25f + 1e-5f);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(v[i], (static_cast<float>(i) - 1.5f) * s, 1e-5) << i;
  Tensor img = Tensor::from_vector(std::vector<float>{1, 5, 2, 0, 3, 4, 8, 6, 7}, {1, 1, 3, 3});
  EXPECT_EQ(MaxPool2d({2}, {1})(img).to_float_vector(), (std::vector<float>{5, 5, 8, 7}));
  EXPECT_EQ(AvgPool2d({3})(img).to_float_vector(), (std::vector<float>{4}));
  EXPECT_EQ(AdaptiveAvgPool2d({1})(img).to_float_vector(), (std::vector<float>{4}));
  manual_seed(2);
  Embedding emb(5, 3);
  Tensor rows = emb(Tensor::from_vector(std::vector<int64_t>{4, 0}));
  std::vector<float> w = emb.weight().to_float_vector(), r = rows.to_float_vector();
  EXPECT_EQ(std::vector<float>(r.begin(), r.begin() + 3), std::vector<float>(w.begin() + 12, w.end()));
  EXPECT_EQ(std::vector<float>(r.begin() + 3, r.end()), std::vector<float>(w.begin(), w.begin() + 3));
  try {
    emb(Tensor::from_vector(std::vector<int64_t>{5}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), "INVALID_ARGUMENT") << e.what();
  }
  EXPECT_THROW(max_pool2d(img, {3}, {1}, {2}), Error);            // padding over half the kernel
  EXPECT_THROW(conv2d(img, Tensor::zeros({1, 2, 3, 3})), Error);  // channel mismatch
  EXPECT_THROW(Conv2d(3, 4, {3}, Conv2dOptions{.groups = 2}), Error);
}

// torch's parameter names, shapes and initialization (zero biases, Xavier bound on the stacked
// projection), and clear errors for shapes attention cannot take.
TEST(NnModule, MultiheadAttentionParametersAndErrors) {
  manual_seed(4);
  MultiheadAttention mha(8, 2, MultiheadAttentionOptions{.batch_first = true});
  std::map<std::string, std::vector<int64_t>> shapes;
  for (auto& [name, p] : mha.named_parameters()) shapes[name] = p.shape();
  EXPECT_EQ(
      shapes,
      (std::map<std::string, std::vector<int64_t>>{
          {"in_proj_weight", {24, 8}}, {"in_proj_bias", {24}}, {"out_proj.weight", {8, 8}}, {"out_proj.bias", {8}}}));
  const double bound = std::sqrt(6.0 / (8 + 24));
  for (float v : mha.state_dict().at("in_proj_weight").to_float_vector()) EXPECT_LE(std::abs(v), bound);
  for (const char* b : {"in_proj_bias", "out_proj.bias"})
    for (float v : mha.state_dict().at(b).to_float_vector()) EXPECT_EQ(v, 0.0f) << b;
  auto code_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return "no error";
  };
  EXPECT_EQ(code_of([] { MultiheadAttention(10, 3); }), "INVALID_ARGUMENT");     // heads do not divide
  EXPECT_EQ(code_of([&] { mha(Tensor::zeros({2, 5, 6})); }), "SHAPE_MISMATCH");  // wrong embedding
  EXPECT_EQ(code_of([&] { mha(Tensor::zeros({5, 8})); }), "SHAPE_MISMATCH");     // no batch axis
  EXPECT_EQ(code_of([&] {
              mha.attend(Tensor::zeros({2, 5, 8}), Tensor::zeros({3, 4, 8}), Tensor::zeros({3, 4, 8}));
            }),
            "SHAPE_MISMATCH");  // batch sizes differ
  EXPECT_EQ(
      code_of([&] {
        mha.attend(Tensor::zeros({2, 5, 8}), Tensor::zeros({2, 4, 8}), Tensor::zeros({2, 4, 8}), Tensor::zeros({5, 5}));
      }),
      "SHAPE_MISMATCH");  // mask is not [L, S]
  EXPECT_EQ(code_of([] { TransformerEncoderLayer(8, 2, TransformerEncoderLayerOptions{.dim_feedforward = 0}); }),
            "INVALID_ARGUMENT");
}

// The losses' refusals name the argument at fault, with its catalogue code.
TEST(NnLoss, BadArgumentsAreErrors) {
  auto code_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return "no error";
  };
  const Tensor logits = Tensor::zeros({2, 3}), ids = Tensor::from_vector(std::vector<int64_t>{0, 2});
  EXPECT_EQ(code_of([&] { cross_entropy(logits, ids, CrossEntropyOptions{.label_smoothing = 1.5}); }),
            "INVALID_ARGUMENT");
  EXPECT_EQ(code_of([&] {
              cross_entropy(logits, Tensor::from_vector(std::vector<int64_t>{0, 3}));
            }),
            "INVALID_ARGUMENT");  // class 3 of 3
  EXPECT_EQ(code_of([&] { nll_loss(logits, Tensor::from_vector(std::vector<int64_t>{0})); }), "SHAPE_MISMATCH");
  EXPECT_EQ(code_of([&] { nll_loss(logits, Tensor::zeros({2})); }), "INPUT_DTYPE_MISMATCH");  // float targets
  EXPECT_EQ(code_of([&] { l1_loss(logits, Tensor::zeros({3, 2})); }), "SHAPE_MISMATCH");
  EXPECT_EQ(code_of([&] { binary_cross_entropy_with_logits(logits, logits, Tensor::zeros({2})); }), "SHAPE_MISMATCH");
  // Every row ignored: torch's mean over no rows is NaN, and so is this one.
  EXPECT_TRUE(std::isnan(cross_entropy(logits, Tensor::from_vector(std::vector<int64_t>{-100, -100})).item()));
}

TEST(NnOptim, SgdStepIsTheFormula) {
  // One step by hand: p - lr * (g + wd * p) with g = 2p from sum(p^2).
  Tensor p = Tensor::from_vector(std::vector<float>{1.0f, -2.0f}).set_requires_grad();
  SGD opt({p}, SGDOptions{.lr = 0.1, .weight_decay = 0.5});
  sum(p * p).backward();
  opt.step();
  std::vector<float> v = p.to_float_vector();
  EXPECT_FLOAT_EQ(v[0], 1.0f - 0.1f * (2.0f + 0.5f));
  EXPECT_FLOAT_EQ(v[1], -2.0f - 0.1f * (-4.0f - 1.0f));
  EXPECT_THROW(SGD({p}, SGDOptions{.lr = -1}), Error);
  EXPECT_THROW(Adam({Tensor::zeros({2})}, AdamOptions{}), Error);  // does not require a gradient
}

}  // namespace
}  // namespace gbx::nn
