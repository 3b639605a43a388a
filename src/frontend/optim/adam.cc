// nn::Adam / nn::AdamW: torch.optim.Adam's and AdamW's update (torch/optim/adam.py and
// adamw.py, _single_tensor_*), in float32 with torch's order of operations; the step-size
// scalars are computed in double, as Python computes them, then applied as float:
//   AdamW: p *= 1 - lr * wd     Adam: g += wd * p
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p += -(lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
#include <cmath>

#include "frontend/optim/for_each_gradient.h"

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

}  // namespace gbx::nn
