// Graph mode for training (nn::GraphTrainStep, include/gearbox/nn_graph.hpp): a step's forward
// and backward traced into one graph give eager mode's loss, outputs and gradients (eager is
// itself checked against torch in torch_parity_test.cc, where every training run also runs in
// graph mode), accumulate into grad() as backward() does, follow parameter updates and frozen
// parameters, run the convolution family, check class ids at run time, and refuse what a
// graph cannot hold. The GraphTrainStep over named tensors (no Module) is used once.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "frontend/autodiff/tape.h"
#include "gearbox/nn.hpp"
#include "gearbox/nn_amp.hpp"
#include "gearbox/nn_graph.hpp"
#include "torch_refs.h"

namespace gbx::nn {
namespace {

using testing::error_code;
using testing::expect_close;

std::shared_ptr<Sequential> mlp() {
  return std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
      std::make_shared<Linear>(6, 8), std::make_shared<ReLU>(), std::make_shared<Linear>(8, 4)});
}

Tensor ids(std::vector<int64_t> v) {
  const auto n = static_cast<int64_t>(v.size());
  return Tensor::from_vector(v, {n});
}

// The loss, with label smoothing and an ignored row, and the logits as a second output.
TensorFunction smoothed_loss(Module& net) {
  return [&net](const std::vector<Tensor>& in) {
    Tensor logits = net(in[0]);
    return std::vector<Tensor>{
        cross_entropy(logits, in[1], CrossEntropyOptions{.ignore_index = -1, .label_smoothing = 0.2}), logits};
  };
}

// Two steps without zero_grad(): the loss, the second output and the summed gradients equal
// eager mode's; the second call, on other values of the same shape, runs the same graph.
TEST(GraphTraining, LossOutputsAndAccumulatedGradientsMatchEager) {
  manual_seed(3);
  auto net = mlp();
  Tensor x1 = Tensor::randn({5, 6}), x2 = Tensor::randn({5, 6});
  Tensor y1 = ids({0, 3, -1, 2, 1}), y2 = ids({1, 1, 2, -1, 0});
  const TensorFunction loss_fn = smoothed_loss(*net);

  std::vector<std::vector<Tensor>> eager;
  for (const auto& [x, y] : {std::pair{x1, y1}, std::pair{x2, y2}}) {
    std::vector<Tensor> outs = loss_fn({x, y});
    outs[0].backward();
    eager.push_back(outs);
  }
  std::map<std::string, Tensor> eager_grads;
  for (auto& [name, p] : net->named_parameters()) {
    eager_grads[name] = wrap(p.grad().impl()->value.clone());
    p.zero_grad();
  }

  GraphTrainStep step(*net, loss_fn);
  std::vector<Tensor> g1 = step({x1, y1}), g2 = step({x2, y2});
  ASSERT_EQ(g1.size(), 2u);
  expect_close(g1[0], eager[0][0], 1e-6, 1e-7, "loss 1");
  expect_close(g2[0], eager[1][0], 1e-6, 1e-7, "loss 2");
  expect_close(g2[1], eager[1][1], 1e-6, 1e-7, "logits 2");
  EXPECT_FALSE(g1[0].requires_grad()) << "graph outputs carry no gradient";
  for (auto& [name, p] : net->named_parameters()) expect_close(p.grad(), eager_grads[name], 1e-5, 1e-7, name);
  EXPECT_EQ(step.traces(), 1u);
}

// The weights are inputs: an optimizer step is seen by the next call without a retrace. A
// frozen parameter takes no gradient, and freezing one traces again.
TEST(GraphTraining, FollowsWeightUpdatesAndFrozenParameters) {
  manual_seed(4);
  auto net = mlp();
  Tensor x = Tensor::randn({4, 6});
  Tensor y = ids({0, 1, 2, 3});
  GraphTrainStep step(
      *net, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*net)(in[0]), in[1])}; });
  SGD opt(net->parameters(), SGDOptions{.lr = 0.5});
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    const double loss = step({x, y})[0].item();
    NoGradGuard no_grad;
    EXPECT_NEAR(loss, cross_entropy((*net)(x), y).item(), 1e-6) << "step " << i;
    opt.step();
  }
  EXPECT_EQ(step.traces(), 1u);

  Tensor first_weight = net->named_parameters()[0].second;
  first_weight.set_requires_grad(false);
  opt.zero_grad();
  step({x, y});
  EXPECT_EQ(step.traces(), 2u) << "another set of trained parameters is another graph";
  EXPECT_FALSE(first_weight.grad().defined());
  EXPECT_TRUE(net->named_parameters()[1].second.grad().defined());
}

// BatchNorm in training mode: the graph computes the running statistics and the batch count,
// and the step writes them back, as eager mode does in place.
TEST(GraphTraining, BatchNormBuffersFollowEager) {
  manual_seed(5);
  auto make = [] {
    return std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
        std::make_shared<Conv2d>(2, 3, std::vector<int64_t>{3}, Conv2dOptions{.padding = {1}}),
        std::make_shared<BatchNorm2d>(3), std::make_shared<ReLU>(), std::make_shared<Flatten>(),
        std::make_shared<Linear>(3 * 4 * 4, 5)});
  };
  auto eager = make(), graph = make();
  graph->load_state_dict(eager->state_dict());
  Tensor x = Tensor::randn({6, 2, 4, 4});
  Tensor y = ids({0, 1, 2, 3, 4, 0});
  GraphTrainStep step(*graph, [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{cross_entropy((*graph)(in[0]), in[1])};
  });
  SGD eager_opt(eager->parameters(), SGDOptions{.lr = 0.1, .momentum = 0.9});
  SGD graph_opt(graph->parameters(), SGDOptions{.lr = 0.1, .momentum = 0.9});
  for (int i = 0; i < 4; ++i) {
    eager_opt.zero_grad();
    cross_entropy((*eager)(x * static_cast<double>(i + 1)), y).backward();
    eager_opt.step();
    graph_opt.zero_grad();
    step({x * static_cast<double>(i + 1), y});
    graph_opt.step();
  }
  for (const auto& [name, t] : eager->state_dict()) {
    const Tensor& g = graph->state_dict().at(name);
    if (t.dtype() == DType::Int64) EXPECT_EQ(g.to_int64_vector(), t.to_int64_vector()) << name;
    else expect_close(g, t, 1e-5, 1e-6, name);
  }
  EXPECT_EQ(graph->state_dict().at("1.num_batches_tracked").to_int64_vector(), std::vector<int64_t>{4});
}

// Conv1d, ConvTranspose2d and GroupNorm (float32 kernels, weights as graph inputs): a step's
// loss and every gradient in graph mode equal eager mode's.
TEST(GraphTraining, ConvolutionFamilyMatchesEager) {
  manual_seed(8);
  auto up = std::make_shared<ConvTranspose2d>(
      2, 4, std::vector<int64_t>{3}, ConvTranspose2dOptions{.stride = {2}, .padding = {1}, .output_padding = {1}});
  auto norm = std::make_shared<GroupNorm>(2, 4);
  auto conv = std::make_shared<Conv1d>(4, 3, 3, Conv1dOptions{.stride = 2, .padding = 1});
  auto head = std::make_shared<Linear>(3 * 32, 5);
  Sequential net({up, norm, std::make_shared<ReLU>()});
  auto loss_fn = [&](const std::vector<Tensor>& in) {
    Tensor h = net(in[0]);                       // [N, 4, 8, 8]
    h = (*conv)(reshape(h, {h.dim(0), 4, 64}));  // [N, 3, 32]
    return std::vector<Tensor>{cross_entropy((*head)(flatten(h, 1)), in[1])};
  };
  Tensor x = Tensor::randn({3, 2, 4, 4});
  Tensor y = ids({4, 0, 2});
  std::vector<Tensor> params;
  for (Module* m : std::vector<Module*>{&net, conv.get(), head.get()})
    for (const Tensor& p : m->parameters()) params.push_back(p);
  const double eager_loss = loss_fn({x, y})[0].item();
  loss_fn({x, y})[0].backward();
  std::vector<Tensor> eager_grads;
  for (Tensor& p : params) {
    eager_grads.push_back(wrap(p.grad().impl()->value.clone()));
    p.zero_grad();
  }
  std::vector<std::pair<std::string, Tensor>> named;
  for (size_t i = 0; i < params.size(); ++i) named.emplace_back("p" + std::to_string(i), params[i]);
  GraphTrainStep step(named, {}, loss_fn);
  EXPECT_NEAR(step({x, y})[0].item(), eager_loss, 1e-6);
  for (size_t i = 0; i < params.size(); ++i)
    expect_close(params[i].grad(), eager_grads[i], 1e-5, 1e-7, "parameter " + std::to_string(i));
}

// Dropout in training mode: its masks are graph inputs drawn for every step from the seeded
// generator, in eager mode's order, so a seeded graph step equals a seeded eager step (loss and
// gradients), two steps draw different masks, and the first (tracing) call draws once.
TEST(GraphTraining, DropoutDrawsAFreshMaskEveryStepAsEagerDoes) {
  manual_seed(9);
  auto layer = std::make_shared<TransformerEncoderLayer>(
      8, 2, TransformerEncoderLayerOptions{.dim_feedforward = 16, .dropout = 0.3, .batch_first = true});
  auto head = std::make_shared<Linear>(8, 3);
  Sequential net({layer});
  auto loss_fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{cross_entropy((*head)(mean(net(in[0]), {1})), in[1])};
  };
  std::vector<Tensor> params = net.parameters();
  for (const Tensor& p : head->parameters()) params.push_back(p);
  Tensor x = Tensor::randn({4, 5, 8});
  Tensor y = ids({0, 2, 1, 2});
  auto eager_step = [&](uint64_t seed) {
    manual_seed(seed);
    Tensor loss = loss_fn({x, y})[0];
    loss.backward();
    std::vector<Tensor> grads;
    for (Tensor& p : params) {
      grads.push_back(wrap(p.grad().impl()->value.clone()));
      p.zero_grad();
    }
    return std::make_pair(loss.item(), grads);
  };
  std::vector<std::pair<std::string, Tensor>> named;
  for (size_t i = 0; i < params.size(); ++i) named.emplace_back("p" + std::to_string(i), params[i]);
  GraphTrainStep step(named, {}, loss_fn);
  std::vector<double> graph_losses;
  for (uint64_t seed : {11, 12}) {
    const auto [eager_loss, eager_grads] = eager_step(seed);
    manual_seed(seed);
    graph_losses.push_back(step({x, y})[0].item());
    EXPECT_NEAR(graph_losses.back(), eager_loss, 1e-6) << "seed " << seed;
    for (size_t i = 0; i < params.size(); ++i) {
      expect_close(params[i].grad(), eager_grads[i], 1e-5, 1e-7, "seed " + std::to_string(seed));
      params[i].zero_grad();
    }
  }
  EXPECT_NE(graph_losses[0], graph_losses[1]) << "another seed, other masks";
  EXPECT_EQ(step.traces(), 1u);
  // Without reseeding, consecutive steps draw on: the same losses as eager's consecutive steps.
  manual_seed(13);
  const double e1 = eager_step(13).first;
  manual_seed(13);
  step({x, y});
  for (Tensor& p : params) p.zero_grad();
  const double g2 = step({x, y})[0].item();
  for (Tensor& p : params) p.zero_grad();
  manual_seed(13);
  loss_fn({x, y});  // eager's first step's draws
  const double e2 = loss_fn({x, y})[0].item();
  EXPECT_NEAR(g2, e2, 1e-6);
  EXPECT_NE(e1, e2);
}

// Class ids are a graph input: the graph checks them when it runs (GatherElements), as eager
// mode checks them on the host; an id out of range never reads another row.
TEST(GraphTraining, ChecksClassIdsAtRunTime) {
  manual_seed(6);
  auto net = mlp();
  Tensor x = Tensor::randn({3, 6});
  GraphTrainStep step(
      *net, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*net)(in[0]), in[1])}; });
  EXPECT_EQ(error_code([&] { step({x, ids({0, 1, 2})}); }), "");
  for (int64_t bad : {4, 100, -2}) {
    EXPECT_EQ(error_code([&] { step({x, ids({0, bad, 2})}); }), "INVALID_ARGUMENT") << "graph, id " << bad;
    EXPECT_EQ(error_code([&] {
                cross_entropy((*net)(x), ids({0, bad, 2}));
              }),
              "INVALID_ARGUMENT")
        << "eager, id " << bad;
  }
  EXPECT_EQ(step.traces(), 1u);
}

TEST(GraphTraining, RefusesWhatAGraphCannotHold) {
  manual_seed(7);
  auto net = mlp();
  Tensor x = Tensor::randn({3, 6});
  Tensor y = ids({0, 1, 2});
  auto fails = [&](TensorFunction fn) { return error_code([&] { GraphTrainStep(*net, std::move(fn))({x, y}); }); };
  // The first output must be a one-element loss that depends on a trained parameter.
  EXPECT_EQ(fails([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(*net)(in[0])}; }),
            "API_INVALID_ARGUMENT");
  EXPECT_EQ(fails([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum(in[0])}; }),
            "API_INVALID_ARGUMENT");
  EXPECT_EQ(fails([](const std::vector<Tensor>&) { return std::vector<Tensor>{}; }), "API_INVALID_ARGUMENT");
  // A loss scaler's scale changes from step to step.
  LossScaler scaler;
  EXPECT_EQ(fails([&](const std::vector<Tensor>& in) {
              return std::vector<Tensor>{scaler.scale(cross_entropy((*net)(in[0]), in[1]))};
            }),
            "API_INVALID_ARGUMENT");
  // A refused trace leaves the gradients as they were (none) and eager mode working.
  for (const auto& [name, p] : net->named_parameters()) EXPECT_FALSE(p.grad().defined()) << name;
  EXPECT_NO_THROW(cross_entropy((*net)(x), y).backward());
}

}  // namespace
}  // namespace gbx::nn
