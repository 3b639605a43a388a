// nn::Adam / nn::AdamW: torch.optim.Adam's and AdamW's update (torch/optim/adam.py and
// adamw.py, _single_tensor_*), in float32 with torch's order of operations; the step-size
// scalars are computed in double, as Python computes them, then applied as float:
//   AdamW: p *= 1 - lr * wd     Adam: g += wd * p
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p += -(lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
#include <cmath>

#include "frontend/optim/for_each_gradient.h"
#include "frontend/optim/optimizer_state.h"

namespace gbx::nn {

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled_weight_decay)
    : Optimizer(std::move(params)), opt_(options), decoupled_(decoupled_weight_decay) {
  if (opt_.lr < 0 || opt_.eps < 0 || opt_.beta1 < 0 || opt_.beta1 >= 1 || opt_.beta2 < 0 || opt_.beta2 >= 1 ||
      opt_.weight_decay < 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, decoupled_ ? "AdamW" : "Adam", ": lr ",
                                     opt_.lr, ", betas (", opt_.beta1, ", ", opt_.beta2, "), eps ", opt_.eps,
                                     ", weight_decay ", opt_.weight_decay,
                                     ": need lr, eps, weight_decay >= 0 and betas in [0, 1)"));
  exp_avg_.resize(params_.size());
  exp_avg_sq_.resize(params_.size());
}

void Adam::step() {
  ++step_;
  const double t = static_cast<double>(step_);
  const float b1 = static_cast<float>(opt_.beta1), b2 = static_cast<float>(opt_.beta2);
  const float one_b1 = static_cast<float>(1 - opt_.beta1), one_b2 = static_cast<float>(1 - opt_.beta2);
  const float wd = static_cast<float>(opt_.weight_decay), eps = static_cast<float>(opt_.eps);
  const float decay = static_cast<float>(1 - opt_.lr * opt_.weight_decay);
  const float step_size = static_cast<float>(opt_.lr / (1 - std::pow(opt_.beta1, t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(opt_.beta2, t)));
  for_each_gradient(params_, [&](size_t k, float* w, const float* gd, size_t n) {
    std::vector<float>& m = exp_avg_[k];
    std::vector<float>& v = exp_avg_sq_[k];
    if (m.empty()) {
      m.assign(n, 0.0f);
      v.assign(n, 0.0f);
    }
    for (size_t i = 0; i < n; ++i) {
      if (decoupled_) w[i] *= decay;
      const float gi = !decoupled_ && wd != 0 ? gd[i] + wd * w[i] : gd[i];
      m[i] = m[i] * b1 + one_b1 * gi;
      v[i] = v[i] * b2 + one_b2 * (gi * gi);
      const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
      w[i] += -step_size * (m[i] / denom);
    }
  });
}

size_t Adam::state_bytes() const { return float_buffer_bytes(exp_avg_) + float_buffer_bytes(exp_avg_sq_); }

std::map<std::string, Tensor> Adam::state_dict() const {
  OptimizerStateWriter w(params_);
  for (size_t k = 0; k < params_.size(); ++k) {
    if (exp_avg_[k].empty()) continue;
    // One counter for all parameters here; torch keeps one per parameter, so it is written per parameter.
    w.step(k, step_);
    w.buffer(k, "exp_avg", exp_avg_[k]);
    w.buffer(k, "exp_avg_sq", exp_avg_sq_[k]);
  }
  w.hyperparameter("lr", opt_.lr);
  w.hyperparameter("beta1", opt_.beta1);
  w.hyperparameter("beta2", opt_.beta2);
  w.hyperparameter("eps", opt_.eps);
  w.hyperparameter("weight_decay", opt_.weight_decay);
  return w.take();
}

void Adam::load_state_dict(const std::map<std::string, Tensor>& state) {
  OptimizerStateReader r(kind(), params_, state);
  AdamOptions o;
  o.lr = r.hyperparameter("lr");
  o.beta1 = r.hyperparameter("beta1");
  o.beta2 = r.hyperparameter("beta2");
  o.eps = r.hyperparameter("eps");
  o.weight_decay = r.hyperparameter("weight_decay");
  check_loaded_options(kind(), [&] { [[maybe_unused]] Adam probe(std::vector<Tensor>{}, o, decoupled_); });
  std::vector<std::vector<float>> m(params_.size()), v(params_.size());
  int64_t step = 0;
  bool have_step = false;
  for (size_t k = 0; k < params_.size(); ++k) {
    int64_t s = 0;
    const bool has_s = r.step(k, &s), has_m = r.buffer(k, "exp_avg", &m[k]), has_v = r.buffer(k, "exp_avg_sq", &v[k]);
    // step() creates the moments together, so a parameter has all three entries or none.
    if (has_s != has_m || has_m != has_v)
      throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_INVALID, kind(), " state of parameter ", k,
                                       ": step, exp_avg and exp_avg_sq must be present together"));
    if (!has_s) continue;
    if (have_step && s != step)
      throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, kind(), " state 'state.", k,
                                       ".step' is ", s, " but another parameter's is ", step,
                                       ": this Adam counts steps for all parameters together"));
    step = s;
    have_step = true;
  }
  r.finish();
  opt_ = o;
  step_ = step;
  exp_avg_ = std::move(m);
  exp_avg_sq_ = std::move(v);
}

}  // namespace gbx::nn
