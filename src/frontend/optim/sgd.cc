// nn::SGD: torch.optim.SGD's update (torch/optim/sgd.py, _single_tensor_sgd), in float32
// with the same operation order so that a run matches torch's step for step:
//   d = g + wd * p;  buf = d (first step) | momentum * buf + (1 - dampening) * d
//   d = nesterov ? d + momentum * buf : buf;  p -= lr * d
#include "frontend/optim/for_each_gradient.h"
#include "frontend/optim/param_groups.h"

namespace gbx::nn {
namespace {

const Hyperparameters<SGDOptions, SGDParamGroup>& hyperparameters() {
  static const Hyperparameters<SGDOptions, SGDParamGroup> table = {
      {.name = "lr", .number = &SGDOptions::lr, .group_number = &SGDParamGroup::lr},
      {.name = "momentum", .number = &SGDOptions::momentum, .group_number = &SGDParamGroup::momentum},
      {.name = "dampening", .number = &SGDOptions::dampening, .group_number = &SGDParamGroup::dampening},
      {.name = "weight_decay", .number = &SGDOptions::weight_decay, .group_number = &SGDParamGroup::weight_decay},
      {.name = "nesterov", .flag = &SGDOptions::nesterov, .group_flag = &SGDParamGroup::nesterov},
  };
  return table;
}

void check(const SGDOptions& o, const std::string& who) {
  if (o.lr < 0 || o.momentum < 0 || o.weight_decay < 0 || (o.nesterov && (o.momentum <= 0 || o.dampening != 0)))
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, who, ": lr ", o.lr, ", momentum ",
                                     o.momentum, ", weight_decay ", o.weight_decay,
                                     ": need non-negative values, and nesterov needs momentum > 0 and dampening 0"));
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : GroupedOptimizer(std::move(params), options) {
  check(options, "SGD");
  momentum_.resize(params_.size());
}

SGD::SGD(std::vector<SGDParamGroup> groups, SGDOptions defaults) : GroupedOptimizer("SGD", group_params(groups)) {
  opt_ = resolve_groups("SGD", groups, defaults, hyperparameters(), check);
  momentum_.resize(params_.size());
}

void SGD::step() {
  for (size_t g = 0; g < opt_.size(); ++g) {
    const SGDOptions& o = opt_[g];
    const float lr = static_cast<float>(o.lr), wd = static_cast<float>(o.weight_decay);
    const float mom = static_cast<float>(o.momentum), damp = static_cast<float>(1 - o.dampening);
    for_each_gradient(params_, param_group_begin(g), param_group_end(g),
                      [&](size_t k, float* w, const float* gd, size_t n) {
                        std::vector<float>& buf = momentum_[k];
                        const bool first = buf.empty();
                        if (mom != 0 && first) buf.resize(n);
                        for (size_t i = 0; i < n; ++i) {
                          float d = wd != 0 ? gd[i] + wd * w[i] : gd[i];
                          if (mom != 0) {
                            buf[i] = first ? d : buf[i] * mom + damp * d;
                            d = o.nesterov ? d + mom * buf[i] : buf[i];
                          }
                          w[i] += -lr * d;
                        }
                      });
  }
}

size_t SGD::state_bytes() const { return float_buffer_bytes(momentum_); }

std::map<std::string, Tensor> SGD::state_dict() const {
  OptimizerStateWriter w(params_);
  for (size_t k = 0; k < params_.size(); ++k) w.buffer(k, "momentum_buffer", momentum_[k]);
  write_groups(w, *this, opt_, hyperparameters());
  return w.take();
}

void SGD::load_state_dict(const std::map<std::string, Tensor>& state) {
  OptimizerStateReader r(kind(), params_, state);
  std::vector<SGDOptions> o = read_groups(r, *this, hyperparameters(), check);
  std::vector<std::vector<float>> momentum(params_.size());
  for (size_t k = 0; k < params_.size(); ++k) r.buffer(k, "momentum_buffer", &momentum[k]);
  r.finish();
  opt_ = std::move(o);
  momentum_ = std::move(momentum);
}

}  // namespace gbx::nn
