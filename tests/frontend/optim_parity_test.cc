// Every optimizer against torch.optim for 1,000 steps, as PyTorch's own C++ frontend tests its
// optimizers (test/cpp/api/optim.cpp): optim_reference.py runs torch 1.13 at test time (the
// frontend.optim_reference fixture) on a fixed small network, Linear(3, 6) - tanh - Linear(6, 2) -
// sigmoid with the sum of the outputs as the loss, from torch's initial weights, and samples the
// parameters after step 1 and every 100th; this runs gearbox's optimizer on the same network and
// compares every sample, then the final state dict (every group's hyperparameters and parameter
// indices, every state buffer) against torch's optimizer.state_dict().
//
// Tolerance: parameters |gearbox - torch| <= 1e-5 (|torch| + 0.1), i.e. 1e-5 relative for values
// of magnitude 0.1 and above, 1e-6 absolute below; state buffers |gearbox - torch| <= 1e-2 of the
// buffer's largest magnitude; step counts and hyperparameters equal. Both sides are float32 and
// differ only in the forward/backward kernels' summation order (an ulp here and there per step),
// fed back for 1,000 steps. How far two correct float32 runs part is measured on torch itself
// (`optim_reference.py --calibrate`: each case against 3 copies of itself from initial weights
// perturbed by 2e-7 relative, about an ulp): parameters by at most 1.8e-6 in the measure above,
// so the bound leaves a margin of 5; state buffers by up to 1.6e-3 of their scale (RMSprop's
// momentum buffer sums g / sqrt(v), whose small entries carry the last steps' rounding), a margin
// of 6. A wrong formula, index or buffer name parts by orders of magnitude more. (torch's own C++
// test compares float64 runs at 1e-3 relative, 5e-4 absolute.) The cases are ones whose runs
// are not chaotic: a centered RMSprop with alpha 0.9, tried first, parts by 1e-2 on torch itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "torch_refs.h"

namespace gbx::nn {
namespace {

using testing::load;

const std::string kOptimDir = GEARBOX_OPTIM_REF_DIR;
constexpr double kRtol = 1e-5, kAtol = 1e-6, kStateTol = 1e-2;

// torch.nn.Sequential(Linear(3, 6), Tanh(), Linear(6, 2), Sigmoid()), with torch's names.
class SmallNet : public Module {
 public:
  SmallNet() : l0_(std::make_shared<Linear>(3, 6)), l2_(std::make_shared<Linear>(6, 2)) {
    register_module("0", l0_);
    register_module("2", l2_);
  }
  Tensor forward(const Tensor& x) override { return sigmoid((*l2_)(tanh((*l0_)(x)))); }
  std::vector<Tensor> weights() const { return {l0_->weight(), l2_->weight()}; }
  std::vector<Tensor> biases() const { return {l0_->bias(), l2_->bias()}; }
  std::vector<Tensor> layer0() const { return {l0_->weight(), l0_->bias()}; }
  std::vector<Tensor> layer2() const { return {l2_->weight(), l2_->bias()}; }

 private:
  std::shared_ptr<Linear> l0_, l2_;
};

struct OptimizerRun {
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<LRScheduler> sched;  // declared after opt: destroyed before it
};

// optim_reference.py's CASES, by name.
OptimizerRun make_run(const std::string& name, SmallNet& n) {
  std::vector<Tensor> p = n.parameters();
  OptimizerRun r;
  if (name == "sgd") r.opt = std::make_unique<SGD>(p, SGDOptions{.lr = 0.1});
  if (name == "sgd_weight_decay") r.opt = std::make_unique<SGD>(p, SGDOptions{.lr = 0.1, .weight_decay = 1e-2});
  if (name == "sgd_momentum_dampening")
    r.opt = std::make_unique<SGD>(p, SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.1});
  if (name == "sgd_nesterov_weight_decay")
    r.opt = std::make_unique<SGD>(p, SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true});
  if (name == "adam") r.opt = std::make_unique<Adam>(p, AdamOptions{.lr = 1e-2});
  if (name == "adam_weight_decay") r.opt = std::make_unique<Adam>(p, AdamOptions{.lr = 1e-2, .weight_decay = 1e-2});
  if (name == "adam_amsgrad")
    r.opt = std::make_unique<Adam>(
        p, AdamOptions{.lr = 1e-2, .beta1 = 0.8, .beta2 = 0.99, .weight_decay = 1e-3, .amsgrad = true});
  if (name == "adamw") r.opt = std::make_unique<AdamW>(p, AdamOptions{.lr = 1e-2, .weight_decay = 0.1});
  if (name == "adamw_amsgrad")
    r.opt = std::make_unique<AdamW>(p, AdamOptions{.lr = 1e-2, .weight_decay = 1e-2, .amsgrad = true});
  if (name == "rmsprop") r.opt = std::make_unique<RMSprop>(p, RMSpropOptions{.lr = 1e-3});
  if (name == "rmsprop_momentum_weight_decay")
    r.opt = std::make_unique<RMSprop>(p, RMSpropOptions{.lr = 1e-3, .weight_decay = 1e-3, .momentum = 0.9});
  if (name == "rmsprop_centered")
    r.opt = std::make_unique<RMSprop>(p, RMSpropOptions{.lr = 1e-3, .weight_decay = 1e-2, .centered = true});
  if (name == "rmsprop_centered_momentum")
    r.opt = std::make_unique<RMSprop>(p, RMSpropOptions{.lr = 1e-3, .momentum = 0.5, .centered = true});
  if (name == "adagrad") r.opt = std::make_unique<Adagrad>(p, AdagradOptions{.lr = 0.1});
  if (name == "adagrad_lr_decay")
    r.opt = std::make_unique<Adagrad>(
        p, AdagradOptions{.lr = 0.1, .lr_decay = 1e-2, .weight_decay = 1e-3, .initial_accumulator_value = 0.1});
  if (name == "groups_sgd_steplr") {
    r.opt = std::make_unique<SGD>(
        std::vector<SGDParamGroup>{{.params = n.weights(), .lr = 0.1, .weight_decay = 1e-3}, {.params = n.biases()}},
        SGDOptions{.lr = 0.05, .momentum = 0.9});
    r.sched = std::make_unique<StepLR>(*r.opt, 300, 0.5);
  }
  if (name == "groups_adamw_cosine") {
    r.opt = std::make_unique<AdamW>(std::vector<AdamParamGroup>{{.params = n.weights(), .weight_decay = 0.1},
                                                                {.params = n.biases(), .lr = 3e-3, .amsgrad = true}},
                                    AdamOptions{.lr = 1e-2, .weight_decay = 1e-2});
    r.sched = std::make_unique<CosineAnnealingLR>(*r.opt, 400, 1e-4);
  }
  if (name == "groups_rmsprop_linear") {
    r.opt =
        std::make_unique<RMSprop>(std::vector<RMSpropParamGroup>{{.params = n.layer0(), .centered = true},
                                                                 {.params = n.layer2(), .lr = 3e-3, .momentum = 0.5}},
                                  RMSpropOptions{.lr = 1e-3});
    r.sched = std::make_unique<LinearLR>(*r.opt, 0.1, 1.0, 200);
  }
  if (name == "groups_adagrad_steplr") {
    r.opt =
        std::make_unique<Adagrad>(std::vector<AdagradParamGroup>{{.params = n.layer2(), .lr = 0.05, .lr_decay = 1e-2},
                                                                 {.params = n.layer0(), .weight_decay = 1e-2}},
                                  AdagradOptions{.lr = 0.05});
    r.sched = std::make_unique<StepLR>(*r.opt, 250, 0.7);
  }
  return r;
}

const std::vector<std::string>& case_names() {
  static const std::vector<std::string> names = {"sgd",
                                                 "sgd_weight_decay",
                                                 "sgd_momentum_dampening",
                                                 "sgd_nesterov_weight_decay",
                                                 "adam",
                                                 "adam_weight_decay",
                                                 "adam_amsgrad",
                                                 "adamw",
                                                 "adamw_amsgrad",
                                                 "rmsprop",
                                                 "rmsprop_momentum_weight_decay",
                                                 "rmsprop_centered",
                                                 "rmsprop_centered_momentum",
                                                 "adagrad",
                                                 "adagrad_lr_decay",
                                                 "groups_sgd_steplr",
                                                 "groups_adamw_cosine",
                                                 "groups_rmsprop_linear",
                                                 "groups_adagrad_steplr"};
  return names;
}

// The worst difference so far, and where: parameters |got - want| / (kAtol / kRtol + |want|),
// state buffers max |got - want| / max |want|.
struct Worst {
  double rel = 0, abs = 0, state = 0;
  std::string where, state_where;
  void add(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      const double d = std::abs(got[i] - want[i]), r = d / (kAtol / kRtol + std::abs(want[i]));
      EXPECT_LE(r, kRtol) << what << " element " << i << ": gearbox " << got[i] << ", torch " << want[i];
      abs = std::max(abs, d);
      if (r > rel) rel = r, where = what;
    }
  }
  void add_state(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double scale = 0, d = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      scale = std::max(scale, std::abs(want[i]));
      d = std::max(d, std::abs(got[i] - want[i]));
    }
    const double r = d / std::max(scale, 1e-30);
    EXPECT_LE(r, kStateTol) << what << ": differs by " << d << " from torch's, whose largest magnitude is " << scale;
    if (r > state) state = r, state_where = what;
  }
};

// The names of torch's files in `dir` that start with `prefix`, without ".npy".
std::set<std::string> torch_keys(const std::string& dir, const std::string& prefix) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(prefix, 0) == 0 && f.size() > 4) out.insert(f.substr(0, f.size() - 4));
  }
  return out;
}

class OptimizerAgainstTorch : public ::testing::TestWithParam<std::string> {};

TEST_P(OptimizerAgainstTorch, ThousandStepsMatchTorchOptim) {
  const std::string name = GetParam(), dir = kOptimDir + "/" + name;
  ASSERT_TRUE(std::filesystem::exists(dir)) << dir << " is missing (did frontend.optim_reference run?)";
  SmallNet net;
  std::map<std::string, Tensor> init;
  for (const auto& [pname, t] : net.state_dict()) init[pname] = load(kOptimDir + "/init_" + pname + ".npy");
  net.load_state_dict(init);
  OptimizerRun run = make_run(name, net);
  ASSERT_TRUE(run.opt) << name;
  const Tensor x = load(kOptimDir + "/x.npy");
  const std::vector<int64_t> sampled = load(kOptimDir + "/steps.npy").to_int64_vector();
  std::map<std::string, Tensor> samples;
  for (const auto& [pname, p] : net.named_parameters()) samples[pname] = load(dir + "/samples_" + pname + ".npy");

  Worst worst;
  size_t next = 0;
  for (int64_t step = 1; step <= sampled.back(); ++step) {
    Tensor loss = sum(net(x));
    run.opt->zero_grad();
    loss.backward();
    run.opt->step();
    if (run.sched) run.sched->step();
    if (step != sampled[next]) continue;
    for (const auto& [pname, p] : net.named_parameters()) {
      const Tensor& s = samples.at(pname);
      worst.add(p.to_double_vector(), slice(s, 0, next, next + 1).to_double_vector(),
                pname + " after step " + std::to_string(step));
    }
    if (::testing::Test::HasFailure()) return;  // one step's report is enough
    ++next;
  }

  // The final state dict, key for key against torch's optimizer.state_dict().
  const std::map<std::string, Tensor> state = run.opt->state_dict();
  std::set<std::string> mine_groups, mine_state;
  for (const auto& [key, t] : state) {
    const std::string file = dir + "/" + key + ".npy";
    ASSERT_TRUE(std::filesystem::exists(file)) << name << ": gearbox writes '" << key << "', torch has none";
    const Tensor want = load(file);
    if (key.rfind("param_groups.", 0) == 0) {
      mine_groups.insert(key);
      if (t.dtype() == DType::Int64) EXPECT_EQ(t.to_int64_vector(), want.to_int64_vector()) << name << " " << key;
      else EXPECT_DOUBLE_EQ(t.item(), want.to_double_vector().at(0)) << name << " " << key;
    } else {
      mine_state.insert(key);
      if (t.dtype() == DType::Int64) EXPECT_EQ(t.to_int64_vector(), want.to_int64_vector()) << name << " " << key;
      else worst.add_state(t.to_double_vector(), want.to_double_vector(), key);
    }
  }
  EXPECT_EQ(mine_groups, torch_keys(dir, "param_groups.")) << name;
  std::set<std::string> torch_state = torch_keys(dir, "state.");
  // torch's RMSprop counts steps its update never reads (1.13's formula has no bias correction);
  // gearbox keeps no counter.
  if (run.opt->kind() == "RMSprop")
    std::erase_if(torch_state, [](const std::string& k) { return k.ends_with(".step"); });
  EXPECT_EQ(mine_state, torch_state) << name;
  std::printf(
      "[ INFO     ] %s, %lld steps: worst parameter difference to torch %.2e (of 1e-5; %.2e absolute, %s), "
      "worst state buffer difference %.2e (of 1e-2; %s)\n",
      name.c_str(), static_cast<long long>(sampled.back()), worst.rel, worst.abs, worst.where.c_str(), worst.state,
      worst.state_where.empty() ? "none" : worst.state_where.c_str());
}

INSTANTIATE_TEST_SUITE_P(Frontend, OptimizerAgainstTorch, ::testing::ValuesIn(case_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gbx::nn
