// nn::Adagrad: torch.optim.Adagrad's update (torch/optim/adagrad.py, _single_tensor_adagrad),
// in float32 with torch 1.13's order of operations; the decayed learning rate is computed in
// double, as Python computes it:
//   g += wd * p;  clr = lr / (1 + (t - 1) lr_decay);  s += g g;  p -= clr g / (sqrt(s) + eps)
#include <cmath>

#include "frontend/optim/for_each_gradient.h"
#include "frontend/optim/optimizer_state.h"

namespace gbx::nn {

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions options) : Optimizer(std::move(params)), opt_(options) {
  if (opt_.lr < 0 || opt_.lr_decay < 0 || opt_.weight_decay < 0 || opt_.initial_accumulator_value < 0 || opt_.eps < 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "Adagrad: lr ", opt_.lr, ", lr_decay ",
                                     opt_.lr_decay, ", weight_decay ", opt_.weight_decay,
                                     ", initial_accumulator_value ", opt_.initial_accumulator_value, ", eps ", opt_.eps,
                                     ": need non-negative values"));
  // torch fills the sums at construction, so a parameter that gets no gradient keeps its own.
  for (const Tensor& p : params_)
    sum_.emplace_back(static_cast<size_t>(p.numel()), static_cast<float>(opt_.initial_accumulator_value));
  steps_.assign(params_.size(), 0);
}

void Adagrad::step() {
  const float wd = static_cast<float>(opt_.weight_decay), eps = static_cast<float>(opt_.eps);
  for_each_gradient(params_, [&](size_t k, float* w, const float* gd, size_t n) {
    const double t = static_cast<double>(++steps_[k]);  // torch counts steps per parameter
    const float clr = static_cast<float>(opt_.lr / (1 + (t - 1) * opt_.lr_decay));
    std::vector<float>& s = sum_[k];
    for (size_t i = 0; i < n; ++i) {
      const float gi = wd != 0 ? gd[i] + wd * w[i] : gd[i];
      s[i] = s[i] + gi * gi;
      w[i] += -clr * gi / (std::sqrt(s[i]) + eps);
    }
  });
}

size_t Adagrad::state_bytes() const { return float_buffer_bytes(sum_); }

std::map<std::string, Tensor> Adagrad::state_dict() const {
  OptimizerStateWriter w(params_);
  for (size_t k = 0; k < params_.size(); ++k) {
    w.step(k, steps_[k]);
    w.buffer(k, "sum", sum_[k]);
  }
  w.hyperparameter("lr", opt_.lr);
  w.hyperparameter("lr_decay", opt_.lr_decay);
  w.hyperparameter("weight_decay", opt_.weight_decay);
  w.hyperparameter("initial_accumulator_value", opt_.initial_accumulator_value);
  w.hyperparameter("eps", opt_.eps);
  return w.take();
}

void Adagrad::load_state_dict(const std::map<std::string, Tensor>& state) {
  OptimizerStateReader r(kind(), params_, state);
  AdagradOptions o;
  o.lr = r.hyperparameter("lr");
  o.lr_decay = r.hyperparameter("lr_decay");
  o.weight_decay = r.hyperparameter("weight_decay");
  o.initial_accumulator_value = r.hyperparameter("initial_accumulator_value");
  o.eps = r.hyperparameter("eps");
  check_loaded_options(kind(), [&] { [[maybe_unused]] Adagrad probe(std::vector<Tensor>{}, o); });
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
  opt_ = o;
  sum_ = std::move(sum);
  steps_ = std::move(steps);
}

}  // namespace gbx::nn
