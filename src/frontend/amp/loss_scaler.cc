// LossScaler (gearbox/nn_amp.hpp): scaling the loss, unscaling and checking the gradients, the
// skip-and-back-off / grow rule, and its state for checkpoints.
#include <cmath>

#include "frontend/amp/autocast.h"
#include "frontend/graph/trace_hook.h"
#include "frontend/tensor_impl.h"
#include "gearbox/nn_amp.hpp"

namespace gbx::nn {

namespace {

template <typename... Args>
[[noreturn]] void invalid(const Args&... args) {
  throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "LossScaler: ", args...));
}

bool finite_positive(double v) { return std::isfinite(v) && v > 0; }

}  // namespace

LossScaler::LossScaler(LossScalerOptions options) : options_(options), scale_(options.init_scale) {
  if (!finite_positive(options.init_scale)) invalid("init_scale ", options.init_scale, " must be finite and > 0");
  if (!(std::isfinite(options.growth_factor) && options.growth_factor >= 1))
    invalid("growth_factor ", options.growth_factor, " must be finite and >= 1");
  if (!(finite_positive(options.backoff_factor) && options.backoff_factor < 1))
    invalid("backoff_factor ", options.backoff_factor, " must be in (0, 1)");
  if (options.growth_interval < 1) invalid("growth_interval ", options.growth_interval, " must be >= 1");
}

Tensor LossScaler::scale(const Tensor& loss) const {
  refuse_while_tracing("LossScaler::scale",
                       "the scale changes between steps, and a graph would keep this step's as a constant; give "
                       "the scaler to GraphTrainStep as GraphOptions::loss_scaler instead");
  amp::AutocastSuspended float32;  // the product stays float32 whatever Autocast is alive
  const Tensor l = loss.to(DType::Float32);
  return mul(l, Tensor::scalar(scale_, DType::Float32));
}

void LossScaler::unscale(Optimizer& optimizer) {
  if (unscaled_) return;
  // Multiplying by the inverse, as torch does: exact for a power-of-two scale.
  const float inverse = static_cast<float>(1.0 / scale_);
  bool overflow = false;
  for (const Tensor& p : optimizer.params()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (g.dtype() != DType::Float32)
      throw_status(gearbox::make_error(gearbox::ErrorCode::DTYPE_UNSUPPORTED, "LossScaler::unscale: gradient ",
                                       g.describe(), ": optimizers update float32 parameters (master weights)"));
    auto* v = static_cast<float*>(g.mutable_data());
    for (int64_t i = 0; i < g.numel(); ++i) {
      v[i] *= inverse;
      overflow = overflow || !std::isfinite(v[i]);
    }
  }
  found_overflow_ = overflow;
  unscaled_ = true;
}

bool LossScaler::step(Optimizer& optimizer) {
  unscale(optimizer);
  const bool stepped = !found_overflow_;
  if (stepped) optimizer.step();
  ++steps_;
  if (found_overflow_) {
    ++skipped_steps_;
    growth_tracker_ = 0;
    if (options_.dynamic) scale_ *= options_.backoff_factor;
  } else if (++growth_tracker_ == options_.growth_interval) {
    growth_tracker_ = 0;
    if (options_.dynamic) scale_ *= options_.growth_factor;
  }
  unscaled_ = false;
  found_overflow_ = false;
  return stepped;
}

std::map<std::string, Tensor> LossScaler::state_dict() const {
  return {{"scale", Tensor::scalar(scale_, DType::Float64)},
          {"growth_tracker", Tensor::scalar(static_cast<double>(growth_tracker_), DType::Int64)},
          {"steps", Tensor::scalar(static_cast<double>(steps_), DType::Int64)},
          {"skipped_steps", Tensor::scalar(static_cast<double>(skipped_steps_), DType::Int64)}};
}

void LossScaler::load_state_dict(const std::map<std::string, Tensor>& state) {
  const std::map<std::string, Tensor> mine = state_dict();
  for (const auto& [name, t] : state)
    if (!mine.count(name))
      throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, "loss scaler state has '",
                                       name.substr(0, 64), "', which a LossScaler does not write"));
  std::map<std::string, double> v;
  for (const auto& [name, like] : mine) {
    auto it = state.find(name);
    if (it == state.end())
      throw_status(
          gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, "loss scaler state has no '", name, "'"));
    if (it->second.dtype() != like.dtype() || it->second.numel() != 1 || it->second.rank() != 0)
      throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, "loss scaler state '", name, "' is ",
                                       it->second.describe(), ", not ", like.describe()));
    v[name] = it->second.item();
  }
  if (!finite_positive(v["scale"]) || v["growth_tracker"] < 0 || v["steps"] < 0 || v["skipped_steps"] < 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_INVALID, "loss scaler state: scale ", v["scale"],
                                     " must be finite and > 0 and the counts >= 0"));
  scale_ = v["scale"];
  growth_tracker_ = static_cast<int64_t>(v["growth_tracker"]);
  steps_ = static_cast<int64_t>(v["steps"]);
  skipped_steps_ = static_cast<int64_t>(v["skipped_steps"]);
  unscaled_ = found_overflow_ = false;
}

}  // namespace gbx::nn
