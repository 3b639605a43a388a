// nn::Module bookkeeping, Linear's default initialization, the seeded generator.
#include <gtest/gtest.h>

#include <cmath>

#include "gearbox/nn.hpp"

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
