// nn::RMSprop: torch.optim.RMSprop's update (torch/optim/rmsprop.py, _single_tensor_rmsprop),
// in float32 with torch 1.13's order of operations:
//   g += wd * p;  v = alpha v + (1 - alpha) g g
//   centered: a = alpha a + (1 - alpha) g;  avg = sqrt(v - a a) + eps   else avg = sqrt(v) + eps
//   momentum: buf = momentum buf + g / avg;  p -= lr buf       else p -= lr g / avg
#include <cmath>

#include "frontend/optim/for_each_gradient.h"
#include "frontend/optim/param_groups.h"

namespace gbx::nn {
namespace {

const Hyperparameters<RMSpropOptions, RMSpropParamGroup>& hyperparameters() {
  static const Hyperparameters<RMSpropOptions, RMSpropParamGroup> table = {
      {.name = "lr", .number = &RMSpropOptions::lr, .group_number = &RMSpropParamGroup::lr},
      {.name = "alpha", .number = &RMSpropOptions::alpha, .group_number = &RMSpropParamGroup::alpha},
      {.name = "eps", .number = &RMSpropOptions::eps, .group_number = &RMSpropParamGroup::eps},
      {.name = "weight_decay",
       .number = &RMSpropOptions::weight_decay,
       .group_number = &RMSpropParamGroup::weight_decay},
      {.name = "momentum", .number = &RMSpropOptions::momentum, .group_number = &RMSpropParamGroup::momentum},
      {.name = "centered", .flag = &RMSpropOptions::centered, .group_flag = &RMSpropParamGroup::centered},
  };
  return table;
}

void check(const RMSpropOptions& o, const std::string& who) {
  if (o.lr < 0 || o.eps < 0 || o.alpha < 0 || o.momentum < 0 || o.weight_decay < 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, who, ": lr ", o.lr, ", alpha ", o.alpha,
                                     ", eps ", o.eps, ", momentum ", o.momentum, ", weight_decay ", o.weight_decay,
                                     ": need non-negative values"));
}

}  // namespace

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions options) : GroupedOptimizer(std::move(params), options) {
  check(options, "RMSprop");
  square_avg_.resize(params_.size());
  grad_avg_.resize(params_.size());
  momentum_buffer_.resize(params_.size());
}

RMSprop::RMSprop(std::vector<RMSpropParamGroup> groups, RMSpropOptions defaults)
    : GroupedOptimizer("RMSprop", group_params(groups)) {
  opt_ = resolve_groups("RMSprop", groups, defaults, hyperparameters(), check);
  square_avg_.resize(params_.size());
  grad_avg_.resize(params_.size());
  momentum_buffer_.resize(params_.size());
}

void RMSprop::step() {
  for (size_t g = 0; g < opt_.size(); ++g) {
    const RMSpropOptions& o = opt_[g];
    const float lr = static_cast<float>(o.lr), wd = static_cast<float>(o.weight_decay);
    const float alpha = static_cast<float>(o.alpha), one_alpha = static_cast<float>(1 - o.alpha);
    const float eps = static_cast<float>(o.eps), mom = static_cast<float>(o.momentum);
    for_each_gradient(params_, param_group_begin(g), param_group_end(g),
                      [&](size_t k, float* w, const float* gd, size_t n) {
                        std::vector<float>& v = square_avg_[k];
                        std::vector<float>& a = grad_avg_[k];
                        std::vector<float>& buf = momentum_buffer_[k];
                        if (v.empty()) {
                          v.assign(n, 0.0f);
                          if (o.centered) a.assign(n, 0.0f);
                          if (mom > 0) buf.assign(n, 0.0f);
                        }
                        for (size_t i = 0; i < n; ++i) {
                          const float gi = wd != 0 ? gd[i] + wd * w[i] : gd[i];
                          v[i] = v[i] * alpha + one_alpha * gi * gi;
                          float avg = 0;
                          if (o.centered) {
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
  write_groups(w, *this, opt_, hyperparameters());
  return w.take();
}

void RMSprop::load_state_dict(const std::map<std::string, Tensor>& state) {
  OptimizerStateReader r(kind(), params_, state);
  std::vector<RMSpropOptions> o = read_groups(r, *this, hyperparameters(), check);
  std::vector<std::vector<float>> v(params_.size()), a(params_.size()), buf(params_.size());
  for (size_t g = 0; g < o.size(); ++g)
    for (size_t k = param_group_begin(g); k < param_group_end(g); ++k) {
      const bool has_v = r.buffer(k, "square_avg", &v[k]);
      const bool has_a = r.buffer(k, "grad_avg", &a[k]);
      const bool has_buf = r.buffer(k, "momentum_buffer", &buf[k]);
      // step() creates a parameter's buffers together at its first step, as its group's options
      // ask, and then indexes them without looking: the set must be exactly that one.
      if (has_v ? (has_a != o[g].centered || has_buf != (o[g].momentum > 0)) : (has_a || has_buf))
        throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_INVALID, kind(), " state of parameter ", k,
                                         ": its buffers (square_avg ", has_v, ", grad_avg ", has_a,
                                         ", momentum_buffer ", has_buf, ") do not fit centered ", o[g].centered,
                                         ", momentum ", o[g].momentum));
    }
  r.finish();
  opt_ = std::move(o);
  square_avg_ = std::move(v);
  grad_avg_ = std::move(a);
  momentum_buffer_ = std::move(buf);
}

}  // namespace gbx::nn
