// nn::LSTM and nn::GRU against torch 1.13's torch.nn.LSTM / torch.nn.GRU (torch_reference.py's
// write_rnn and write_rnn_training), and their parameters, options and refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include "torch_refs.h"

namespace gbx::nn {
namespace {

using testing::expect_close;
using testing::kRefDir;
using testing::load;
using testing::Mode;
using testing::train_against_torch;

// The module torch_reference.py's _rnn_cases() builds under `name`.
std::shared_ptr<RNNBase> make_case(const std::string& name) {
  const bool lstm = name.rfind("lstm", 0) == 0;
  auto make = [lstm](int64_t in, int64_t hidden, RNNOptions o) -> std::shared_ptr<RNNBase> {
    if (lstm) return std::make_shared<LSTM>(in, hidden, o);
    return std::make_shared<GRU>(in, hidden, o);
  };
  const std::string rest = name.substr(name.find('_') + 1);
  if (rest == "1layer") return make(5, 7, {});
  if (rest == "2layer_bidir_batch_first_state")
    return make(5, 6, {.num_layers = 2, .batch_first = true, .bidirectional = true});
  if (rest == "2layer_nobias_state") return make(4, 5, {.num_layers = 2, .bias = false});
  if (rest == "bidir_batch_first") return make(3, 4, {.batch_first = true, .bidirectional = true});
  if (rest == "unbatched_state") return make(3, 4, {});
  throw std::runtime_error("no such case " + name);
}

class TorchRecurrent : public ::testing::TestWithParam<std::string> {};

// float32 on both sides, torch's parameters: the output, h_n (and c_n) for the same inputs, and
// the gradients of sum(out * g_out) + sum(h_n * g_h) [+ sum(c_n * g_c)] for the input, the
// initial states and every parameter.
TEST_P(TorchRecurrent, OutputStatesAndGradientsMatch) {
  const std::string name = GetParam(), dir = kRefDir + "/rnn/" + name;
  std::shared_ptr<RNNBase> module = make_case(name);
  std::map<std::string, Tensor> state;
  for (const auto& [pname, mine] : module->state_dict()) state[pname] = load(dir + "/param_" + pname + ".npy");
  size_t torch_params = 0;  // torch's state dict has no name the module lacks
  for (const auto& f : std::filesystem::directory_iterator(dir))
    torch_params += f.path().filename().string().rfind("param_", 0) == 0;
  ASSERT_EQ(torch_params, state.size()) << name;
  module->load_state_dict(state);
  std::map<std::string, Tensor> in;
  for (const char* k : {"x", "h0", "c0"})
    if (std::filesystem::exists(dir + "/in_" + k + ".npy")) in[k] = load(dir + "/in_" + k + ".npy").set_requires_grad();

  auto given = [&in](const char* k) { return in.count(k) ? in.at(k) : Tensor(); };  // undefined: zeros
  RNNResult r;
  if (auto* lstm = dynamic_cast<LSTM*>(module.get()))
    r = lstm->forward_with_state(given("x"), given("h0"), given("c0"));
  else r = dynamic_cast<GRU*>(module.get())->forward_with_state(given("x"), given("h0"));

  std::map<std::string, Tensor> results{{"out", r.output}, {"h_n", r.h_n}};
  if (r.c_n.defined()) results["c_n"] = r.c_n;
  EXPECT_EQ(r.c_n.defined(), std::filesystem::exists(dir + "/c_n.npy")) << name;
  Tensor total;
  for (const auto& [k, t] : results) {
    expect_close(t, load(dir + "/" + k + ".npy"), 1e-5, 1e-6, name + " " + k);
    Tensor term = sum(mul(t, load(dir + "/grad_" + k + ".npy")));
    total = total.defined() ? add(total, term) : term;
  }
  total.backward();
  for (auto& [k, t] : in) {
    ASSERT_TRUE(t.grad().defined()) << name << " " << k << " got no gradient";
    expect_close(t.grad(), load(dir + "/grad_in_" + k + ".npy"), 1e-4, 1e-5, name + " d/d" + k);
  }
  for (const auto& [pname, p] : module->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name << " " << pname << " got no gradient";
    expect_close(p.grad(), load(dir + "/grad_param_" + pname + ".npy"), 1e-4, 1e-5, name + " d/d" + pname);
  }
}

INSTANTIATE_TEST_SUITE_P(Frontend, TorchRecurrent,
                         ::testing::Values("lstm_1layer", "lstm_2layer_bidir_batch_first_state",
                                           "lstm_2layer_nobias_state", "lstm_bidir_batch_first", "lstm_unbatched_state",
                                           "gru_1layer", "gru_2layer_bidir_batch_first_state",
                                           "gru_2layer_nobias_state", "gru_bidir_batch_first", "gru_unbatched_state"),
                         [](const auto& info) { return info.param; });

// torch_reference.py's DigitsRnn: each digit's 8 rows as a sequence, a 1-layer LSTM or GRU of
// 32 (batch-first), a linear head on the last hidden state.
class DigitsRnn : public Module {
 public:
  explicit DigitsRnn(bool lstm) : head_(std::make_shared<Linear>(32, 10)) {
    if (lstm) register_module("rnn", lstm_ = std::make_shared<LSTM>(8, 32, RNNOptions{.batch_first = true}));
    else register_module("rnn", gru_ = std::make_shared<GRU>(8, 32, RNNOptions{.batch_first = true}));
    register_module("head", head_);
  }
  Tensor forward(const Tensor& x) override {
    Tensor seq = reshape(x, {-1, 8, 8});
    RNNResult r = lstm_ ? lstm_->forward_with_state(seq) : gru_->forward_with_state(seq);
    return (*head_)(reshape(r.h_n, {-1, 32}));  // one layer, one direction: h_n[-1]
  }

 private:
  std::shared_ptr<LSTM> lstm_;  // one of the two
  std::shared_ptr<GRU> gru_;
  std::shared_ptr<Linear> head_;
};

class DigitsRnnTraining : public ::testing::TestWithParam<std::tuple<std::string, Mode>> {};

// fp32, torch's initial weights, Adam lr 5e-3 (RNN_LR in torch_reference.py, where rounding
// differences stay small), the same batches of 64, eagerly and in graph mode: the loss at every
// step within 1e-5 relative of torch's, the final parameters within 1e-4 (see below).
TEST_P(DigitsRnnTraining, LossPerStepMatchesTorch) {
  const auto& [kind, mode] = GetParam();
  const std::string dir = kRefDir + "/rnn_training/" + kind + "/";
  DigitsRnn net(kind == "lstm");
  Adam opt(net.parameters(), AdamOptions{.lr = 5e-3});
  train_against_torch(net, opt, dir, kind, 0.8, mode);
  // The parameters within 1e-4 relative, or 1e-5 absolute (1e-4 of their U(±0.18) scale): a few
  // weights end near zero, where Adam's normalized steps turn the ~1e-7 rounding differences
  // of their small gradients into ~3e-6 absolute (torch against itself with the initial weights
  // perturbed by 1e-7 relative parts by 4e-5 relative; see RNN_LR in torch_reference.py).
  for (const auto& [pname, t] : net.state_dict())
    expect_close(t, load(dir + "final_" + pname + ".npy"), 1e-4, 1e-5, kind + " " + pname);
}

INSTANTIATE_TEST_SUITE_P(Frontend, DigitsRnnTraining,
                         ::testing::Combine(::testing::Values("lstm", "gru"),
                                            ::testing::Values(Mode::Eager, Mode::Graph)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + (std::get<1>(info.param) == Mode::Graph ? "_graph" : "");
                         });

std::string code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return "no error";
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// torch's parameter names, shapes and order, and its U(±1/sqrt(hidden)) initialization.
TEST(NnRecurrent, ParametersAreTorchs) {
  manual_seed(3);
  LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true});
  std::vector<std::pair<std::string, std::vector<int64_t>>> got;
  for (const auto& [name, p] : lstm.named_parameters()) got.emplace_back(name, p.shape());
  const std::vector<std::pair<std::string, std::vector<int64_t>>> want = {{"weight_ih_l0", {16, 3}},
                                                                          {"weight_hh_l0", {16, 4}},
                                                                          {"bias_ih_l0", {16}},
                                                                          {"bias_hh_l0", {16}},
                                                                          {"weight_ih_l0_reverse", {16, 3}},
                                                                          {"weight_hh_l0_reverse", {16, 4}},
                                                                          {"bias_ih_l0_reverse", {16}},
                                                                          {"bias_hh_l0_reverse", {16}},
                                                                          {"weight_ih_l1", {16, 8}},
                                                                          {"weight_hh_l1", {16, 4}},
                                                                          {"bias_ih_l1", {16}},
                                                                          {"bias_hh_l1", {16}},
                                                                          {"weight_ih_l1_reverse", {16, 8}},
                                                                          {"weight_hh_l1_reverse", {16, 4}},
                                                                          {"bias_ih_l1_reverse", {16}},
                                                                          {"bias_hh_l1_reverse", {16}}};
  EXPECT_EQ(got, want);
  GRU gru(5, 16, {.bias = false});
  got.clear();
  for (const auto& [name, p] : gru.named_parameters()) got.emplace_back(name, p.shape());
  EXPECT_EQ(got, (std::vector<std::pair<std::string, std::vector<int64_t>>>{{"weight_ih_l0", {48, 5}},
                                                                            {"weight_hh_l0", {48, 16}}}));
  // Every value within the bound, and the bound nearly reached (not a narrower distribution).
  for (RNNBase* m : std::initializer_list<RNNBase*>{&lstm, &gru}) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(m->hidden_size()));
    double largest = 0;
    for (const Tensor& p : m->parameters())
      for (float v : p.to_float_vector()) largest = std::max(largest, std::abs(double(v)));
    EXPECT_LE(largest, bound);
    EXPECT_GT(largest, 0.95 * bound);
  }
  // The same seed, the same weights.
  manual_seed(3);
  LSTM again(3, 4, {.num_layers = 2, .bidirectional = true});
  EXPECT_EQ(again.parameters()[5].to_float_vector(), lstm.parameters()[5].to_float_vector());
}

// Dropout acts between layers in train() only: eval() gives the dropout-free result, train()
// another one, and a single layer has nothing to drop.
TEST(NnRecurrent, DropoutBetweenLayersInTrainingOnly) {
  manual_seed(9);
  LSTM with(4, 6, {.num_layers = 2, .dropout = 0.5});
  LSTM without(4, 6, {.num_layers = 2});
  without.load_state_dict(with.state_dict());
  const Tensor x = Tensor::uniform({5, 3, 4}, -1, 1);
  with.eval();
  EXPECT_EQ(with(x).to_float_vector(), without(x).to_float_vector());
  with.train();
  EXPECT_NE(with(x).to_float_vector(), without(x).to_float_vector());
  GRU one(4, 6, {.dropout = 0.5});
  GRU one_plain(4, 6);
  one_plain.load_state_dict(one.state_dict());
  EXPECT_EQ(one(x).to_float_vector(), one_plain(x).to_float_vector());
}

// Shapes a recurrent layer cannot take are SHAPE_MISMATCH naming what was expected and got.
TEST(NnRecurrent, BadShapesAreErrors) {
  LSTM lstm(4, 6, {.num_layers = 2});
  GRU gru(4, 6, {.batch_first = true, .bidirectional = true});
  const Tensor x = Tensor::zeros({5, 3, 4});
  EXPECT_EQ(code_of([&] { lstm(Tensor::zeros({2, 5, 3, 4})); }), "SHAPE_MISMATCH");  // rank 4
  EXPECT_EQ(code_of([&] { lstm(Tensor::zeros({4})); }), "SHAPE_MISMATCH");           // rank 1
  const std::string features = message_of([&] { gru(Tensor::zeros({3, 5, 7})); });
  EXPECT_NE(features.find("SHAPE_MISMATCH"), std::string::npos) << features;
  EXPECT_NE(features.find("float32[3,5,7]"), std::string::npos) << features;
  EXPECT_NE(features.find("[batch, seq, 4]"), std::string::npos) << features;
  const std::string h0 = message_of([&] {
    lstm.forward_with_state(x, Tensor::zeros({1, 3, 6}), Tensor::zeros({2, 3, 6}));
  });
  EXPECT_NE(h0.find("SHAPE_MISMATCH"), std::string::npos) << h0;
  EXPECT_NE(h0.find("h0 is float32[1,3,6], expected [2, 3, 6]"), std::string::npos) << h0;
  EXPECT_EQ(code_of([&] {
              lstm.forward_with_state(x, Tensor::zeros({2, 3, 6}), Tensor::zeros({2, 3, 5}));
            }),
            "SHAPE_MISMATCH");  // c0
  // Bidirectional: two states per layer; batch_first does not move the state's batch axis.
  EXPECT_EQ(code_of([&] {
              gru.forward_with_state(Tensor::zeros({3, 5, 4}), Tensor::zeros({1, 3, 6}));
            }),
            "SHAPE_MISMATCH");
  EXPECT_EQ(code_of([&] {
              gru.forward_with_state(Tensor::zeros({3, 5, 4}), Tensor::zeros({3, 2, 6}));
            }),
            "SHAPE_MISMATCH");
  EXPECT_EQ(code_of([&] { gru.forward_with_state(Tensor::zeros({3, 5, 4}), Tensor::zeros({2, 3, 6})); }), "no error");
  // Unbatched input takes an unbatched state.
  EXPECT_EQ(code_of([&] {
              gru.forward_with_state(Tensor::zeros({5, 4}), Tensor::zeros({2, 1, 6}));
            }),
            "SHAPE_MISMATCH");
  EXPECT_EQ(code_of([&] { lstm.forward_with_state(x, Tensor::zeros({2, 3, 6})); }), "INVALID_ARGUMENT");  // no c0
  EXPECT_EQ(code_of([&] { lstm(Tensor::zeros({0, 3, 4})); }), "SHAPE_MISMATCH");  // empty sequence
  EXPECT_EQ(code_of([] { LSTM(0, 4); }), "INVALID_ARGUMENT");
  EXPECT_EQ(code_of([] { GRU(3, 4, {.num_layers = 0}); }), "INVALID_ARGUMENT");
  EXPECT_EQ(code_of([] { GRU(3, 4, {.dropout = 1.0}); }), "INVALID_ARGUMENT");
}

}  // namespace
}  // namespace gbx::nn
