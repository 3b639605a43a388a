// nn::RMSprop: torch.optim.RMSprop's update (torch/optim/rmsprop.py, _single_tensor_rmsprop),
// in float32 with torch 1.13's order of operations:
//   g += wd * p;  v = alpha v + (1 - alpha) g g
//   centered: a = alpha a + (1 - alpha) g;  avg = sqrt(v - a a) + eps   else avg = sqrt(v) + eps
//   momentum: buf = momentum buf + g / avg;  p -= lr buf       else p -= lr g / avg
#include <cmath>

#include "frontend/optim/for_each_gradient.h"

namespace gbx::nn {

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions options) : Optimizer(std::move(params)), opt_(options) {
  if (opt_.lr < 0 || opt_.eps < 0 || opt_.alpha < 0 || opt_.momentum < 0 || opt_.weight_decay < 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "RMSprop: lr ", opt_.lr, ", alpha ",
                                     opt_.alpha, ", eps ", opt_.eps, ", momentum ", opt_.momentum, ", weight_decay ",
                                     opt_.weight_decay, ": need non-negative values"));
  square_avg_.resize(params_.size());
  grad_avg_.resize(params_.size());
  momentum_buffer_.resize(params_.size());
}

void RMSprop::step() {
  const float lr = static_cast<float>(opt_.lr), wd = static_cast<float>(opt_.weight_decay);
  const float alpha = static_cast<float>(opt_.alpha), one_alpha = static_cast<float>(1 - opt_.alpha);
  const float eps = static_cast<float>(opt_.eps), mom = static_cast<float>(opt_.momentum);
  for_each_gradient(params_, [&](size_t k, float* w, const float* gd, size_t n) {
    std::vector<float>& v = square_avg_[k];
    std::vector<float>& a = grad_avg_[k];
    std::vector<float>& buf = momentum_buffer_[k];
    if (v.empty()) {
      v.assign(n, 0.0f);
      if (opt_.centered) a.assign(n, 0.0f);
      if (mom > 0) buf.assign(n, 0.0f);
    }
    for (size_t i = 0; i < n; ++i) {
      const float gi = wd != 0 ? gd[i] + wd * w[i] : gd[i];
      v[i] = v[i] * alpha + one_alpha * gi * gi;
      float avg = 0;
      if (opt_.centered) {
        a[i] = a[i] * alpha + one_alpha * gi;
        avg = std::sqrt(v[i] + -1.0f * a[i] * a[i]) + eps;
      } else {
        avg = std::sqrt(v[i]) + eps;
      }
      if (mom > 0) {
        buf[i] = buf[i] * mom + gi / avg;
        w[i] += -lr * buf[i];
      } else {
        w[i] += -lr * gi / avg;
      }
    }
  });
}

size_t RMSprop::state_bytes() const {
  return float_buffer_bytes(square_avg_) + float_buffer_bytes(grad_avg_) + float_buffer_bytes(momentum_buffer_);
}

}  // namespace gbx::nn
