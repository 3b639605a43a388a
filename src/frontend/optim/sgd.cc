// nn::SGD: torch.optim.SGD's update (torch/optim/sgd.py, _single_tensor_sgd), in float32
// with the same operation order so that a run matches torch's step for step:
//   d = g + wd * p;  buf = d (first step) | momentum * buf + (1 - dampening) * d
//   d = nesterov ? d + momentum * buf : buf;  p -= lr * d
#include "frontend/optim/for_each_gradient.h"
#include "frontend/optim/optimizer_state.h"

namespace gbx::nn {

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : Optimizer(std::move(params)), opt_(options) {
  if (opt_.lr < 0 || opt_.momentum < 0 || opt_.weight_decay < 0 ||
      (opt_.nesterov && (opt_.momentum <= 0 || opt_.dampening != 0)))
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "SGD: lr ", opt_.lr, ", momentum ",
                                     opt_.momentum, ", weight_decay ", opt_.weight_decay,
                                     ": need non-negative values, and nesterov needs momentum > 0 and dampening 0"));
  momentum_.resize(params_.size());
}

void SGD::step() {
  const float lr = static_cast<float>(opt_.lr), wd = static_cast<float>(opt_.weight_decay);
  const float mom = static_cast<float>(opt_.momentum), damp = static_cast<float>(1 - opt_.dampening);
  for_each_gradient(params_, [&](size_t k, float* w, const float* gd, size_t n) {
    std::vector<float>& buf = momentum_[k];
    const bool first = buf.empty();
    if (mom != 0 && first) buf.resize(n);
    for (size_t i = 0; i < n; ++i) {
      float d = wd != 0 ? gd[i] + wd * w[i] : gd[i];
      if (mom != 0) {
        buf[i] = first ? d : buf[i] * mom + damp * d;
        d = opt_.nesterov ? d + mom * buf[i] : buf[i];
      }
      w[i] += -lr * d;
    }
  });
}

size_t SGD::state_bytes() const { return float_buffer_bytes(momentum_); }

std::map<std::string, Tensor> SGD::state_dict() const {
  OptimizerStateWriter w(params_);
  for (size_t k = 0; k < params_.size(); ++k) w.buffer(k, "momentum_buffer", momentum_[k]);
  w.hyperparameter("lr", opt_.lr);
  w.hyperparameter("momentum", opt_.momentum);
  w.hyperparameter("dampening", opt_.dampening);
  w.hyperparameter("weight_decay", opt_.weight_decay);
  w.hyperparameter("nesterov", opt_.nesterov ? 1 : 0);
  return w.take();
}

void SGD::load_state_dict(const std::map<std::string, Tensor>& state) {
  OptimizerStateReader r(kind(), params_, state);
  SGDOptions o;
  o.lr = r.hyperparameter("lr");
  o.momentum = r.hyperparameter("momentum");
  o.dampening = r.hyperparameter("dampening");
  o.weight_decay = r.hyperparameter("weight_decay");
  o.nesterov = r.hyperparameter("nesterov") != 0;
  check_loaded_options(kind(), [&] { [[maybe_unused]] SGD probe(std::vector<Tensor>{}, o); });
  std::vector<std::vector<float>> momentum(params_.size());
  for (size_t k = 0; k < params_.size(); ++k) r.buffer(k, "momentum_buffer", &momentum[k]);
  r.finish();
  opt_ = o;
  momentum_ = std::move(momentum);
}

}  // namespace gbx::nn
