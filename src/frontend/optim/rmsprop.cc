// nn::RMSprop: torch.optim.RMSprop's update (torch/optim/rmsprop.py, _single_tensor_rmsprop),
// in float32 with torch 1.13's order of operations:
//   g += wd * p;  v = alpha v + (1 - alpha) g g
//   centered: a = alpha a + (1 - alpha) g;  avg = sqrt(v - a a) + eps   else avg = sqrt(v) + eps
//   momentum: buf = momentum buf + g / avg;  p -= lr buf       else p -= lr g / avg
#include <cmath>

#include "frontend/optim/for_each_gradient.h"
#include "frontend/optim/optimizer_state.h"

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

std::map<std::string, Tensor> RMSprop::state_dict() const {
  OptimizerStateWriter w(params_);
  for (size_t k = 0; k < params_.size(); ++k) {
    w.buffer(k, "square_avg", square_avg_[k]);
    w.buffer(k, "grad_avg", grad_avg_[k]);
    w.buffer(k, "momentum_buffer", momentum_buffer_[k]);
  }
  w.hyperparameter("lr", opt_.lr);
  w.hyperparameter("alpha", opt_.alpha);
  w.hyperparameter("eps", opt_.eps);
  w.hyperparameter("weight_decay", opt_.weight_decay);
  w.hyperparameter("momentum", opt_.momentum);
  w.hyperparameter("centered", opt_.centered ? 1 : 0);
  return w.take();
}

void RMSprop::load_state_dict(const std::map<std::string, Tensor>& state) {
  OptimizerStateReader r(kind(), params_, state);
  RMSpropOptions o;
  o.lr = r.hyperparameter("lr");
  o.alpha = r.hyperparameter("alpha");
  o.eps = r.hyperparameter("eps");
  o.weight_decay = r.hyperparameter("weight_decay");
  o.momentum = r.hyperparameter("momentum");
  o.centered = r.hyperparameter("centered") != 0;
  check_loaded_options(kind(), [&] { [[maybe_unused]] RMSprop probe(std::vector<Tensor>{}, o); });
  std::vector<std::vector<float>> v(params_.size()), a(params_.size()), buf(params_.size());
  for (size_t k = 0; k < params_.size(); ++k) {
    const bool has_v = r.buffer(k, "square_avg", &v[k]);
    const bool has_a = r.buffer(k, "grad_avg", &a[k]);
    const bool has_buf = r.buffer(k, "momentum_buffer", &buf[k]);
    // step() creates a parameter's buffers together at its first step, as the options ask, and
    // then indexes them without looking: the set must be exactly that one.
    if (has_v ? (has_a != o.centered || has_buf != (o.momentum > 0)) : (has_a || has_buf))
      throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_INVALID, kind(), " state of parameter ", k,
                                       ": its buffers (square_avg ", has_v, ", grad_avg ", has_a, ", momentum_buffer ",
                                       has_buf, ") do not fit centered ", o.centered, ", momentum ", o.momentum));
  }
  r.finish();
  opt_ = o;
  square_avg_ = std::move(v);
  grad_avg_ = std::move(a);
  momentum_buffer_ = std::move(buf);
}

}  // namespace gbx::nn
