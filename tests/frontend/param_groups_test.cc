// Parameter groups (nn.hpp, "optimizers"): each group is stepped exactly as an optimizer of its own
// with the group's hyperparameters would step it, for every optimizer; the defaults fill what a
// group leaves out; schedulers scale every group's rate; state dicts record every group and load
// only into the same grouping; a state dict from before groups still loads; bad groups are
// INVALID_ARGUMENT naming the group. (Against torch: optim_parity_test.cc's groups_* cases.)
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "gearbox/nn.hpp"

namespace gbx::nn {
namespace {

// The nn::Error code f throws ("" if none), its message in *message.
std::string code_of(const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  return "";
}

Tensor leaf(std::vector<float> v) { return Tensor::from_vector(v).set_requires_grad(); }

// Four parameters of a fixed loss, sum(sin-like weights * p^2 + p) (no generator involved).
std::vector<Tensor> make_params() {
  return {leaf({0.5f, -1.0f, 2.0f}), leaf({0.25f, 0.75f}), leaf({-0.5f}), leaf({1.5f, -2.5f, 0.125f, 1.0f})};
}
void backward_fixed_loss(const std::vector<Tensor>& params, int step) {
  Tensor total = Tensor::scalar(0.0);
  for (size_t k = 0; k < params.size(); ++k) {
    const double a = 0.3 + 0.1 * static_cast<double>(k) + 0.05 * (step % 3);
    total = add(total, sum(add(mul(params[k] * a, params[k]), tanh(params[k]))));
  }
  total.backward();
}

struct GroupCase {
  std::string name;
  // Two groups, (params[0], params[1]) and (params[2], params[3]), with different hyperparameters.
  std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)> grouped;
  // The same two groups as two optimizers of one group each.
  std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>, int group)> single;
};

std::vector<Tensor> half(const std::vector<Tensor>& p, int group) {
  return group == 0 ? std::vector<Tensor>{p[0], p[1]} : std::vector<Tensor>{p[2], p[3]};
}

std::vector<GroupCase> group_cases() {
  return {
      {"SGD",
       [](std::vector<Tensor> p) {
         return std::make_unique<SGD>(
             std::vector<SGDParamGroup>{{.params = half(p, 0), .lr = 0.1, .weight_decay = 1e-2},
                                        {.params = half(p, 1), .momentum = 0.5, .nesterov = true}},
             SGDOptions{.lr = 0.05, .momentum = 0.9});
       },
       [](std::vector<Tensor> p, int g) {
         return std::make_unique<SGD>(half(p, g), g == 0 ? SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-2}
                                                         : SGDOptions{.lr = 0.05, .momentum = 0.5, .nesterov = true});
       }},
      {"Adam",
       [](std::vector<Tensor> p) {
         return std::make_unique<Adam>(
             std::vector<AdamParamGroup>{{.params = half(p, 0), .beta1 = 0.5, .amsgrad = true},
                                         {.params = half(p, 1), .lr = 0.02, .weight_decay = 1e-2}},
             AdamOptions{.lr = 0.05});
       },
       [](std::vector<Tensor> p, int g) {
         return std::make_unique<Adam>(half(p, g), g == 0 ? AdamOptions{.lr = 0.05, .beta1 = 0.5, .amsgrad = true}
                                                          : AdamOptions{.lr = 0.02, .weight_decay = 1e-2});
       }},
      {"AdamW",
       [](std::vector<Tensor> p) {
         return std::make_unique<AdamW>(std::vector<AdamParamGroup>{
             {.params = half(p, 0), .lr = 3e-3, .weight_decay = 0.0}, {.params = half(p, 1), .eps = 1e-3}});
       },
       [](std::vector<Tensor> p, int g) {
         // AdamW's defaults are torch's: lr 1e-3, weight_decay 1e-2.
         return std::make_unique<AdamW>(half(p, g), g == 0
                                                        ? AdamOptions{.lr = 3e-3, .weight_decay = 0.0}
                                                        : AdamOptions{.lr = 1e-3, .eps = 1e-3, .weight_decay = 1e-2});
       }},
      {"RMSprop",
       [](std::vector<Tensor> p) {
         return std::make_unique<RMSprop>(
             std::vector<RMSpropParamGroup>{{.params = half(p, 0), .centered = true},
                                            {.params = half(p, 1), .lr = 0.02, .alpha = 0.9, .momentum = 0.5}},
             RMSpropOptions{.lr = 0.01, .weight_decay = 1e-3});
       },
       [](std::vector<Tensor> p, int g) {
         return std::make_unique<RMSprop>(
             half(p, g), g == 0 ? RMSpropOptions{.lr = 0.01, .weight_decay = 1e-3, .centered = true}
                                : RMSpropOptions{.lr = 0.02, .alpha = 0.9, .weight_decay = 1e-3, .momentum = 0.5});
       }},
      {"Adagrad",
       [](std::vector<Tensor> p) {
         return std::make_unique<Adagrad>(
             std::vector<AdagradParamGroup>{{.params = half(p, 0), .lr_decay = 0.1, .initial_accumulator_value = 0.5},
                                            {.params = half(p, 1), .lr = 0.2}},
             AdagradOptions{.lr = 0.1});
       },
       [](std::vector<Tensor> p, int g) {
         return std::make_unique<Adagrad>(
             half(p, g), g == 0 ? AdagradOptions{.lr = 0.1, .lr_decay = 0.1, .initial_accumulator_value = 0.5}
                                : AdagradOptions{.lr = 0.2});
       }},
  };
}

class ParamGroups : public ::testing::TestWithParam<size_t> {};

// Six steps under a StepLR (so the rates change, group by group): the grouped optimizer's
// parameters and state equal, bit for bit, those of one optimizer per group.
TEST_P(ParamGroups, EachGroupStepsAsAnOptimizerOfItsOwn) {
  const GroupCase c = group_cases()[GetParam()];
  std::vector<Tensor> a = make_params(), b = make_params();
  auto grouped = c.grouped(a);
  auto first = c.single(b, 0), second = c.single(b, 1);
  StepLR sched(*grouped, 2, 0.5), sched0(*first, 2, 0.5), sched1(*second, 2, 0.5);
  ASSERT_EQ(grouped->param_group_count(), 2u);
  EXPECT_EQ(grouped->group_lr(0), first->lr());
  EXPECT_EQ(grouped->group_lr(1), second->lr());
  for (int s = 0; s < 6; ++s) {
    grouped->zero_grad(), first->zero_grad(), second->zero_grad();
    backward_fixed_loss(a, s);
    backward_fixed_loss(b, s);
    grouped->step(), first->step(), second->step();
    sched.step(), sched0.step(), sched1.step();
  }
  for (size_t k = 0; k < a.size(); ++k)
    EXPECT_EQ(a[k].to_float_vector(), b[k].to_float_vector()) << c.name << " parameter " << k;
  EXPECT_EQ(sched.last_lrs(), (std::vector<double>{first->lr(), second->lr()}));
  EXPECT_NE(first->lr(), second->lr());
  // Group 1's state is the second optimizer's, its parameter indices shifted by 2.
  auto grouped_state = grouped->state_dict(), s0 = first->state_dict(), s1 = second->state_dict();
  size_t state_keys = 0;
  for (auto& [key, t] : grouped_state) state_keys += key.rfind("state.", 0) == 0;
  size_t want_keys = 0;
  for (auto& [key, t] : s0) {
    if (key.rfind("state.", 0) != 0) continue;
    ++want_keys;
    EXPECT_EQ(grouped_state.at(key).to_double_vector(), t.to_double_vector()) << key;
  }
  for (auto& [key, t] : s1) {
    if (key.rfind("state.", 0) != 0) continue;
    ++want_keys;
    const std::string shifted = "state." + std::to_string(std::stoi(key.substr(6)) + 2) + key.substr(key.find('.', 6));
    EXPECT_EQ(grouped_state.at(shifted).to_double_vector(), t.to_double_vector()) << shifted;
  }
  EXPECT_EQ(state_keys, want_keys);
  // And the hyperparameters: group g's are the g-th optimizer's.
  for (auto& [key, t] : s0) {
    if (key.rfind("param_groups.0.", 0) != 0 || key == "param_groups.0.params") continue;
    EXPECT_EQ(grouped_state.at(key).item(), t.item()) << key;
  }
  for (auto& [key, t] : s1) {
    if (key.rfind("param_groups.0.", 0) != 0 || key == "param_groups.0.params") continue;
    EXPECT_EQ(grouped_state.at("param_groups.1." + key.substr(15)).item(), t.item()) << key;
  }
  EXPECT_EQ(grouped_state.at("param_groups.0.params").to_int64_vector(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(grouped_state.at("param_groups.1.params").to_int64_vector(), (std::vector<int64_t>{2, 3}));
}

// A state dict of two groups loads into an optimizer of the same two groups (another rate
// replaced), continues bit-identically, and is refused by one grouped otherwise.
TEST_P(ParamGroups, StateDictRecordsEveryGroup) {
  const GroupCase c = group_cases()[GetParam()];
  std::vector<Tensor> a = make_params(), b = make_params();
  auto straight = c.grouped(a);
  for (int s = 0; s < 3; ++s) {
    straight->zero_grad();
    backward_fixed_loss(a, s);
    straight->step();
  }
  auto state = straight->state_dict();
  for (size_t k = 0; k < a.size(); ++k)
    std::memcpy(b[k].mutable_data(), a[k].data(), static_cast<size_t>(a[k].numel()) * sizeof(float));
  auto resumed = c.grouped(b);
  resumed->set_group_lr(1, 123.0);
  resumed->load_state_dict(state);
  EXPECT_EQ(resumed->group_lr(1), straight->group_lr(1));
  for (int s = 3; s < 6; ++s) {
    straight->zero_grad(), resumed->zero_grad();
    backward_fixed_loss(a, s);
    backward_fixed_loss(b, s);
    straight->step(), resumed->step();
  }
  for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(a[k].to_float_vector(), b[k].to_float_vector()) << c.name;

  // One group over the same parameters: CHECKPOINT_MISMATCH, and nothing changed.
  auto one_group = c.single(make_params(), 0);
  std::string message;
  EXPECT_EQ(code_of([&] { one_group->load_state_dict(state); }, &message), "CHECKPOINT_MISMATCH");
  EXPECT_NE(message.find("parameter group"), std::string::npos) << message;
  // The same groups of other parameters: their indices differ.
  auto moved = state;
  moved["param_groups.1.params"] = Tensor::from_vector(std::vector<int64_t>{1, 2}, {2});
  EXPECT_EQ(code_of([&] { resumed->load_state_dict(moved); }, &message), "CHECKPOINT_MISMATCH");
  EXPECT_NE(message.find("param_groups.1.params"), std::string::npos) << message;
  // A group's invalid rate: CHECKPOINT_INVALID naming the group.
  auto negative = state;
  negative["param_groups.1.lr"] = Tensor::scalar(-1, DType::Float64);
  EXPECT_EQ(code_of([&] { resumed->load_state_dict(negative); }, &message), "CHECKPOINT_INVALID");
  EXPECT_NE(message.find("parameter group 1"), std::string::npos) << message;
  EXPECT_EQ(resumed->group_lr(1), straight->group_lr(1));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ParamGroups, ::testing::Range<size_t>(0, 5),
                         [](const ::testing::TestParamInfo<size_t>& i) { return group_cases()[i.param].name; });

TEST(ParamGroupsApi, DefaultsFillWhatAGroupLeavesOut) {
  std::vector<Tensor> p = make_params();
  SGD opt({{.params = {p[0]}, .lr = 0.5}, {.params = {p[1], p[2]}, .weight_decay = 0.25, .nesterov = true}},
          {.lr = 0.1, .momentum = 0.9, .dampening = 0.0, .weight_decay = 1e-3});
  EXPECT_EQ(opt.options(0).lr, 0.5);
  EXPECT_EQ(opt.options(0).momentum, 0.9);
  EXPECT_EQ(opt.options(0).weight_decay, 1e-3);
  EXPECT_FALSE(opt.options(0).nesterov);
  EXPECT_EQ(opt.options(1).lr, 0.1);
  EXPECT_EQ(opt.options(1).weight_decay, 0.25);
  EXPECT_TRUE(opt.options(1).nesterov);
  EXPECT_EQ(opt.params().size(), 3u);
  EXPECT_EQ(opt.param_group_begin(1), 1u);
  EXPECT_EQ(opt.param_group_end(1), 3u);
  // lr() is group 0's; set_lr() sets every group's.
  EXPECT_EQ(opt.lr(), 0.5);
  opt.set_lr(0.01);
  EXPECT_EQ(opt.group_lr(1), 0.01);
  EXPECT_EQ(code_of([&] { opt.group_lr(2); }), "INVALID_ARGUMENT");
  EXPECT_EQ(code_of([&] { opt.options(2); }), "INVALID_ARGUMENT");
  // torch's AdamW default weight decay (1e-2) when none is given.
  AdamW adamw({{.params = {p[3]}}});
  EXPECT_EQ(adamw.options(0).weight_decay, 1e-2);
}

TEST(ParamGroupsApi, BadGroupsAreInvalidArgumentNamingTheGroup) {
  std::vector<Tensor> p = make_params();
  std::string message;
  // A parameter in two groups.
  EXPECT_EQ(code_of([&] { SGD({{.params = {p[0], p[1]}}, {.params = {p[2], p[0]}}}); }, &message), "INVALID_ARGUMENT");
  EXPECT_NE(message.find("parameter group 1, parameter 1"), std::string::npos) << message;
  EXPECT_NE(message.find("parameter group 0"), std::string::npos) << message;
  // Twice in one.
  EXPECT_EQ(code_of([&] { Adam({{.params = {p[1], p[1]}}}); }, &message), "INVALID_ARGUMENT");
  EXPECT_NE(message.find("parameter group 0, parameter 1"), std::string::npos) << message;
  // An empty group; no groups.
  EXPECT_EQ(code_of([&] { RMSprop({{.params = {p[0]}}, {.params = {}}}); }, &message), "INVALID_ARGUMENT");
  EXPECT_NE(message.find("parameter group 1 has no parameters"), std::string::npos) << message;
  EXPECT_EQ(code_of([&] { Adagrad(std::vector<AdagradParamGroup>{}); }), "INVALID_ARGUMENT");
  // A negative rate in one group (the defaults are fine), for every optimizer.
  EXPECT_EQ(code_of([&] { SGD({{.params = {p[0]}}, {.params = {p[1]}, .lr = -0.1}}); }, &message), "INVALID_ARGUMENT");
  EXPECT_NE(message.find("SGD parameter group 1: lr -0.1"), std::string::npos) << message;
  EXPECT_EQ(code_of([&] { Adam({{.params = {p[0]}, .lr = -1.0}}); }, &message), "INVALID_ARGUMENT");
  EXPECT_NE(message.find("Adam parameter group 0"), std::string::npos) << message;
  EXPECT_EQ(code_of(
                [&] {
                  AdamW({{.params = {p[0]}}, {.params = {p[1]}, .beta2 = 1.0}});
                },
                &message),
            "INVALID_ARGUMENT");
  EXPECT_NE(message.find("AdamW parameter group 1"), std::string::npos) << message;
  EXPECT_EQ(code_of([&] { RMSprop({{.params = {p[0]}, .lr = -1.0}}); }), "INVALID_ARGUMENT");
  EXPECT_EQ(code_of(
                [&] {
                  Adagrad({{.params = {p[0]}}, {.params = {p[1]}, .lr = -1.0}});
                },
                &message),
            "INVALID_ARGUMENT");
  EXPECT_NE(message.find("Adagrad parameter group 1"), std::string::npos) << message;
  // A group's Nesterov without momentum (the default has none).
  EXPECT_EQ(code_of([&] { SGD({{.params = {p[0]}, .nesterov = true}}); }), "INVALID_ARGUMENT");
  // A tensor that takes no gradient, named by group and position.
  EXPECT_EQ(code_of(
                [&] {
                  SGD({{.params = {p[0]}}, {.params = {Tensor::zeros({2})}}});
                },
                &message),
            "INVALID_ARGUMENT");
  EXPECT_NE(message.find("parameter group 1, parameter 0"), std::string::npos) << message;
}

// A state dict written before parameter groups (one group, no "param_groups.0.params", Adam
// without "amsgrad"; the scheduler's one "base_lr") loads, and the run continues as it would.
TEST(ParamGroupsApi, StateDictFromBeforeGroupsLoads) {
  std::vector<Tensor> a = make_params(), b = make_params();
  Adam straight(a, AdamOptions{.lr = 0.05, .weight_decay = 1e-3});
  StepLR sched(straight, 2, 0.5);
  for (int s = 0; s < 3; ++s) {
    straight.zero_grad();
    backward_fixed_loss(a, s);
    straight.step();
    sched.step();
  }
  auto old = straight.state_dict();
  ASSERT_EQ(old.erase("param_groups.0.params"), 1u);
  ASSERT_EQ(old.erase("param_groups.0.amsgrad"), 1u);
  auto old_sched = sched.state_dict();
  old_sched["base_lr"] = Tensor::scalar(old_sched.at("base_lrs").to_double_vector().at(0), DType::Float64);
  old_sched.erase("base_lrs");

  for (size_t k = 0; k < a.size(); ++k)
    std::memcpy(b[k].mutable_data(), a[k].data(), static_cast<size_t>(a[k].numel()) * sizeof(float));
  Adam resumed(b, AdamOptions{.lr = 7.0});
  StepLR resumed_sched(resumed, 2, 0.5);
  resumed.load_state_dict(old);
  resumed_sched.load_state_dict(old_sched);
  for (int s = 3; s < 6; ++s) {
    straight.zero_grad(), resumed.zero_grad();
    backward_fixed_loss(a, s);
    backward_fixed_loss(b, s);
    straight.step(), resumed.step();
    sched.step(), resumed_sched.step();
  }
  EXPECT_EQ(resumed.lr(), straight.lr());
  for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(a[k].to_float_vector(), b[k].to_float_vector()) << k;

  // The old scheduler state over an optimizer of two groups: one base rate for two groups.
  std::vector<Tensor> p = make_params();
  SGD two({{.params = {p[0]}}, {.params = {p[1]}}});
  StepLR two_sched(two, 2, 0.5);
  EXPECT_EQ(code_of([&] { two_sched.load_state_dict(old_sched); }), "CHECKPOINT_MISMATCH");
}

}  // namespace
}  // namespace gbx::nn
