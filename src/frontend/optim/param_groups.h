// What the optimizers do alike with their parameter groups, from one table per optimizer of its
// hyperparameters (torch's name, where it sits in the Options and in the ParamGroup): fill each
// group's options from the defaults, write them into a state dict and read them back.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "frontend/optim/optimizer_state.h"

namespace gbx::nn {

template <typename Options, typename Group>
struct Hyperparameter {
  const char* name;
  // A number or a flag (float64 0 or 1 in a state dict).
  double Options::*number = nullptr;
  std::optional<double> Group::*group_number = nullptr;
  bool Options::*flag = nullptr;
  std::optional<bool> Group::*group_flag = nullptr;
  // Added after the first checkpoints were written: a state dict without it means the default.
  bool may_be_absent = false;
};

template <typename Options, typename Group>
using Hyperparameters = std::vector<Hyperparameter<Options, Group>>;

// Each group's parameters (copies of the handles), for Optimizer's group constructor.
template <typename Group>
std::vector<std::vector<Tensor>> group_params(const std::vector<Group>& groups) {
  std::vector<std::vector<Tensor>> out;
  for (const Group& g : groups) out.push_back(g.params);
  return out;
}

// Each group's options: what it sets, the defaults otherwise; checked by `check(options, who)`
// with who naming the group.
template <typename Options, typename Group, typename Check>
std::vector<Options> resolve_groups(const std::string& kind, const std::vector<Group>& groups, const Options& defaults,
                                    const Hyperparameters<Options, Group>& table, Check&& check) {
  std::vector<Options> out;
  for (size_t g = 0; g < groups.size(); ++g) {
    Options o = defaults;
    for (const auto& h : table) {
      if (h.number && groups[g].*h.group_number) o.*h.number = *(groups[g].*h.group_number);
      if (h.flag && groups[g].*h.group_flag) o.*h.flag = *(groups[g].*h.group_flag);
    }
    check(o, kind + " parameter group " + std::to_string(g));
    out.push_back(o);
  }
  return out;
}

// "param_groups.<g>.<name>" for every hyperparameter of every group, and ".params".
template <typename Options, typename Group>
void write_groups(OptimizerStateWriter& w, const Optimizer& opt, const std::vector<Options>& options,
                  const Hyperparameters<Options, Group>& table) {
  for (size_t g = 0; g < options.size(); ++g) {
    w.group_params(g, opt.param_group_begin(g), opt.param_group_end(g));
    for (const auto& h : table)
      w.hyperparameter(g, h.name, h.number ? options[g].*h.number : (options[g].*h.flag ? 1.0 : 0.0));
  }
}

// Every group's options from a state dict (the groups checked against the optimizer's), each
// checked by `check` (an invalid one is CHECKPOINT_INVALID).
template <typename Options, typename Group, typename Check>
std::vector<Options> read_groups(OptimizerStateReader& r, const Optimizer& opt,
                                 const Hyperparameters<Options, Group>& table, Check&& check) {
  r.check_groups(opt);
  std::vector<Options> out;
  for (size_t g = 0; g < opt.param_group_count(); ++g) {
    Options o;
    for (const auto& h : table) {
      const double fallback = h.number ? o.*h.number : (o.*h.flag ? 1.0 : 0.0);
      const double v = h.may_be_absent ? r.hyperparameter(g, h.name, fallback) : r.hyperparameter(g, h.name);
      if (h.number) o.*h.number = v;
      else o.*h.flag = v != 0;
    }
    const std::string who = opt.kind() + (opt.param_group_count() > 1 ? " parameter group " + std::to_string(g) : "");
    check_loaded_options(opt.kind(), [&] { check(o, who); });
    out.push_back(o);
  }
  return out;
}

}  // namespace gbx::nn
