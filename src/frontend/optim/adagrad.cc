// nn::Adagrad: torch.optim.Adagrad's update (torch/optim/adagrad.py, _single_tensor_adagrad),
// in float32 with torch 1.13's order of operations; the decayed learning rate is computed in
// double, as Python computes it:
//   g += wd * p;  clr = lr / (1 + (t - 1) lr_decay);  s += g g;  p -= clr g / (sqrt(s) + eps)
#include <cmath>

#include "frontend/optim/for_each_gradient.h"
#include "frontend/optim/param_groups.h"

namespace gbx::nn {
namespace {

const Hyperparameters<AdagradOptions, AdagradParamGroup>& hyperparameters() {
  static const Hyperparameters<AdagradOptions, AdagradParamGroup> table = {
      {.name = "lr", .number = &AdagradOptions::lr, .group_number = &AdagradParamGroup::lr},
      {.name = "lr_decay", .number = &AdagradOptions::lr_decay, .group_number = &AdagradParamGroup::lr_decay},
      {.name = "weight_decay",
       .number = &AdagradOptions::weight_decay,
       .group_number = &AdagradParamGroup::weight_decay},
      {.name = "initial_accumulator_value",
       .number = &AdagradOptions::initial_accumulator_value,
       .group_number = &AdagradParamGroup::initial_accumulator_value},
      {.name = "eps", .number = &AdagradOptions::eps, .group_number = &AdagradParamGroup::eps},
  };
  return table;
}

void check(const AdagradOptions& o, const std::string& who) {
  if (o.lr < 0 || o.lr_decay < 0 || o.weight_decay < 0 || o.initial_accumulator_value < 0 || o.eps < 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, who, ": lr ", o.lr, ", lr_decay ",
                                     o.lr_decay, ", weight_decay ", o.weight_decay, ", initial_accumulator_value ",
                                     o.initial_accumulator_value, ", eps ", o.eps, ": need non-negative values"));
}

}  // namespace

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions options) : GroupedOptimizer(std::move(params), options) {
  check(options, "Adagrad");
  init_sums();
}

Adagrad::Adagrad(std::vector<AdagradParamGroup> groups, AdagradOptions defaults)
    : GroupedOptimizer("Adagrad", group_params(groups)) {
  opt_ = resolve_groups("Adagrad", groups, defaults, hyperparameters(), check);
  init_sums();
}

// torch fills the sums at construction, each with its group's initial value, so a parameter
// that gets no gradient keeps its own.
void Adagrad::init_sums() {
  for (size_t g = 0; g < opt_.size(); ++g)
    for (size_t k = param_group_begin(g); k < param_group_end(g); ++k)
      sum_.emplace_back(static_cast<size_t>(params_[k].numel()), static_cast<float>(opt_[g].initial_accumulator_value));
  steps_.assign(params_.size(), 0);
}

void Adagrad::step() {
  for (size_t g = 0; g < opt_.size(); ++g) {
    const AdagradOptions& o = opt_[g];
    const float wd = static_cast<float>(o.weight_decay), eps = static_cast<float>(o.eps);
    for_each_gradient(params_, param_group_begin(g), param_group_end(g),
                      [&](size_t k, float* w, const float* gd, size_t n) {
                        const double t = static_cast<double>(++steps_[k]);  // torch counts steps per parameter
                        const float clr = static_cast<float>(o.lr / (1 + (t - 1) * o.lr_decay));
                        std::vector<float>& s = sum_[k];
                        for (size_t i = 0; i < n; ++i) {
                          const float gi = wd != 0 ? gd[i] + wd * w[i] : gd[i];
                          s[i] = s[i] + gi * gi;
                          w[i] += -clr * gi / (std::sqrt(s[i]) + eps);
                        }
                      });
  }
}

size_t Adagrad::state_bytes() const { return float_buffer_bytes(sum_); }

std::map<std::string, Tensor> Adagrad::state_dict() const {
  OptimizerStateWriter w(params_);
  for (size_t k = 0; k < params_.size(); ++k) {
    w.step(k, steps_[k]);
    w.buffer(k, "sum", sum_[k]);
  }
  write_groups(w, *this, opt_, hyperparameters());
  return w.take();
}

void Adagrad::load_state_dict(const std::map<std::string, Tensor>& state) {
  OptimizerStateReader r(kind(), params_, state);
  std::vector<AdagradOptions> o = read_groups(r, *this, hyperparameters(), check);
  std::vector<std::vector<float>> sum(params_.size());
  std::vector<int64_t> steps(params_.size(), 0);
  for (size_t k = 0; k < params_.size(); ++k) {
    // Adagrad holds its sums from construction on (torch too): every parameter has both entries.
    // (A parameter of no elements has an empty sum, which the writer leaves out.)
    if (!r.step(k, &steps[k]) || (!r.buffer(k, "sum", &sum[k]) && params_[k].numel() != 0))
      throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, kind(), " state 'state.", k,
                                       ".step' or 'state.", k, ".sum' is missing"));
  }
  r.finish();
  opt_ = std::move(o);
  sum_ = std::move(sum);
  steps_ = std::move(steps);
}

}  // namespace gbx::nn
