// nn::Adam / nn::AdamW: torch.optim.Adam's and AdamW's update (torch/optim/adam.py and
// adamw.py, _single_tensor_*), in float32 with torch's order of operations; the step-size
// scalars are computed in double, as Python computes them, then applied as float:
//   AdamW: p *= 1 - lr * wd     Adam: g += wd * p
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  amsgrad: v_max = max(v_max, v), used for v
//   p += -(lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
#include <algorithm>
#include <cmath>

#include "frontend/optim/for_each_gradient.h"
#include "frontend/optim/param_groups.h"

namespace gbx::nn {
namespace {

const Hyperparameters<AdamOptions, AdamParamGroup>& hyperparameters() {
  static const Hyperparameters<AdamOptions, AdamParamGroup> table = {
      {.name = "lr", .number = &AdamOptions::lr, .group_number = &AdamParamGroup::lr},
      {.name = "beta1", .number = &AdamOptions::beta1, .group_number = &AdamParamGroup::beta1},
      {.name = "beta2", .number = &AdamOptions::beta2, .group_number = &AdamParamGroup::beta2},
      {.name = "eps", .number = &AdamOptions::eps, .group_number = &AdamParamGroup::eps},
      {.name = "weight_decay", .number = &AdamOptions::weight_decay, .group_number = &AdamParamGroup::weight_decay},
      {.name = "amsgrad", .flag = &AdamOptions::amsgrad, .group_flag = &AdamParamGroup::amsgrad, .may_be_absent = true},
  };
  return table;
}

void check(const AdamOptions& o, const std::string& who) {
  if (o.lr < 0 || o.eps < 0 || o.beta1 < 0 || o.beta1 >= 1 || o.beta2 < 0 || o.beta2 >= 1 || o.weight_decay < 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, who, ": lr ", o.lr, ", betas (", o.beta1,
                                     ", ", o.beta2, "), eps ", o.eps, ", weight_decay ", o.weight_decay,
                                     ": need lr, eps, weight_decay >= 0 and betas in [0, 1)"));
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled_weight_decay)
    : GroupedOptimizer(std::move(params), options), decoupled_(decoupled_weight_decay) {
  check(options, kind());
  exp_avg_.resize(params_.size());
  exp_avg_sq_.resize(params_.size());
  max_exp_avg_sq_.resize(params_.size());
}

Adam::Adam(std::vector<AdamParamGroup> groups, AdamOptions defaults, bool decoupled_weight_decay)
    : GroupedOptimizer(decoupled_weight_decay ? "AdamW" : "Adam", group_params(groups)),
      decoupled_(decoupled_weight_decay) {
  opt_ = resolve_groups(kind(), groups, defaults, hyperparameters(), check);
  exp_avg_.resize(params_.size());
  exp_avg_sq_.resize(params_.size());
  max_exp_avg_sq_.resize(params_.size());
}

void Adam::step() {
  ++step_;
  const double t = static_cast<double>(step_);
  for (size_t g = 0; g < opt_.size(); ++g) {
    const AdamOptions& o = opt_[g];
    const float b1 = static_cast<float>(o.beta1), b2 = static_cast<float>(o.beta2);
    const float one_b1 = static_cast<float>(1 - o.beta1), one_b2 = static_cast<float>(1 - o.beta2);
    const float wd = static_cast<float>(o.weight_decay), eps = static_cast<float>(o.eps);
    const float decay = static_cast<float>(1 - o.lr * o.weight_decay);
    const float step_size = static_cast<float>(o.lr / (1 - std::pow(o.beta1, t)));
    const float bc2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(o.beta2, t)));
    for_each_gradient(params_, param_group_begin(g), param_group_end(g),
                      [&](size_t k, float* w, const float* gd, size_t n) {
                        std::vector<float>& m = exp_avg_[k];
                        std::vector<float>& v = exp_avg_sq_[k];
                        std::vector<float>& v_max = max_exp_avg_sq_[k];
                        if (m.empty()) {
                          m.assign(n, 0.0f);
                          v.assign(n, 0.0f);
                          if (o.amsgrad) v_max.assign(n, 0.0f);
                        }
                        for (size_t i = 0; i < n; ++i) {
                          if (decoupled_) w[i] *= decay;
                          const float gi = !decoupled_ && wd != 0 ? gd[i] + wd * w[i] : gd[i];
                          m[i] = m[i] * b1 + one_b1 * gi;
                          v[i] = v[i] * b2 + one_b2 * (gi * gi);
                          float second = v[i];
                          if (o.amsgrad) second = v_max[i] = std::max(v_max[i], v[i]);
                          const float denom = std::sqrt(second) / bc2_sqrt + eps;
                          w[i] += -step_size * (m[i] / denom);
                        }
                      });
  }
}

size_t Adam::state_bytes() const {
  return float_buffer_bytes(exp_avg_) + float_buffer_bytes(exp_avg_sq_) + float_buffer_bytes(max_exp_avg_sq_);
}

std::map<std::string, Tensor> Adam::state_dict() const {
  OptimizerStateWriter w(params_);
  for (size_t k = 0; k < params_.size(); ++k) {
    if (exp_avg_[k].empty()) continue;
    // One counter for all parameters here; torch keeps one per parameter, so it is written per parameter.
    w.step(k, step_);
    w.buffer(k, "exp_avg", exp_avg_[k]);
    w.buffer(k, "exp_avg_sq", exp_avg_sq_[k]);
    w.buffer(k, "max_exp_avg_sq", max_exp_avg_sq_[k]);
  }
  write_groups(w, *this, opt_, hyperparameters());
  return w.take();
}

void Adam::load_state_dict(const std::map<std::string, Tensor>& state) {
  OptimizerStateReader r(kind(), params_, state);
  std::vector<AdamOptions> o = read_groups(r, *this, hyperparameters(), check);
  std::vector<std::vector<float>> m(params_.size()), v(params_.size()), v_max(params_.size());
  int64_t step = 0;
  bool have_step = false;
  for (size_t g = 0; g < o.size(); ++g)
    for (size_t k = param_group_begin(g); k < param_group_end(g); ++k) {
      int64_t s = 0;
      const bool has_s = r.step(k, &s), has_m = r.buffer(k, "exp_avg", &m[k]), has_v = r.buffer(k, "exp_avg_sq", &v[k]),
                 has_max = r.buffer(k, "max_exp_avg_sq", &v_max[k]);
      // step() creates the moments together (the maximum with amsgrad), so a parameter has all of
      // them or none, and step() indexes the maximum without looking.
      if (has_s != has_m || has_m != has_v || has_max != (has_m && o[g].amsgrad))
        throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_INVALID, kind(), " state of parameter ", k,
                                         ": step, exp_avg, exp_avg_sq (and with amsgrad max_exp_avg_sq) must be "
                                         "present together"));
      if (!has_s) continue;
      if (have_step && s != step)
        throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, kind(), " state 'state.", k,
                                         ".step' is ", s, " but another parameter's is ", step,
                                         ": this Adam counts steps for all parameters together"));
      step = s;
      have_step = true;
    }
  r.finish();
  opt_ = std::move(o);
  step_ = step;
  exp_avg_ = std::move(m);
  exp_avg_sq_ = std::move(v);
  max_exp_avg_sq_ = std::move(v_max);
}

}  // namespace gbx::nn
