// Learning-rate schedulers: torch 1.13's chainable get_lr() formulas (torch/optim/
// lr_scheduler.py), in double as Python computes them, so every epoch's rate equals torch's.
// Each step() advances the epoch and sets the optimizer's lr from the rate it has now.
#include <cmath>
#include <numbers>

#include "frontend/optim/optimizer_state.h"
#include "frontend/tensor_impl.h"

namespace gbx::nn {
namespace {

void check(bool ok, const char* who, const std::string& why) {
  if (!ok) throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, who, ": ", why));
}

// Python's a % b for b > 0 (never negative).
int64_t py_mod(int64_t a, int64_t b) { return ((a % b) + b) % b; }

}  // namespace

void LRScheduler::step() {
  ++last_epoch_;
  ++step_count_;
  optimizer_.set_lr(next_lr(optimizer_.lr()));
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  check(step_size > 0 && gamma >= 0, "StepLR", "step_size must be > 0 and gamma >= 0");
  step();
}

double StepLR::next_lr(double current) const {
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return current;
  return current * gamma_;
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  check(t_max > 0, "CosineAnnealingLR", "t_max must be > 0");
  step();
}

double CosineAnnealingLR::next_lr(double current) const {
  const double pi = std::numbers::pi, t = static_cast<double>(t_max_), e = static_cast<double>(last_epoch_);
  if (last_epoch_ == 0) return current;
  if (step_count_ == 1 && last_epoch_ > 0) return eta_min_ + (base_lr_ - eta_min_) * (1 + std::cos(e * pi / t)) / 2;
  if (py_mod(last_epoch_ - 1 - t_max_, 2 * t_max_) == 0)
    return current + (base_lr_ - eta_min_) * (1 - std::cos(pi / t)) / 2;
  return (1 + std::cos(pi * e / t)) / (1 + std::cos(pi * (e - 1) / t)) * (current - eta_min_) + eta_min_;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  check(start_factor > 0 && start_factor <= 1 && end_factor >= 0 && end_factor <= 1 && total_iters > 0, "LinearLR",
        "start_factor must be in (0, 1], end_factor in [0, 1] and total_iters > 0");
  step();
}

double LinearLR::next_lr(double current) const {
  if (last_epoch_ == 0) return current * start_factor_;
  if (last_epoch_ > total_iters_) return current;
  return current *
         (1. + (end_factor_ - start_factor_) / (static_cast<double>(total_iters_) * start_factor_ +
                                                static_cast<double>(last_epoch_ - 1) * (end_factor_ - start_factor_)));
}

std::map<std::string, Tensor> LRScheduler::state_dict() const {
  return {{"last_epoch", Tensor::from_vector(std::vector<int64_t>{last_epoch_}, {})},
          {"step_count", Tensor::from_vector(std::vector<int64_t>{step_count_}, {})},
          {"base_lr", Tensor::scalar(base_lr_, DType::Float64)}};
}

void LRScheduler::load_state_dict(const std::map<std::string, Tensor>& state) {
  auto get = [&](const char* key, DType dtype) {
    auto it = state.find(key);
    if (it == state.end())
      throw_status(
          gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, "scheduler state '", key, "' is missing"));
    if (it->second.dtype() != dtype || it->second.numel() != 1)
      throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, "scheduler state '", key, "' is ",
                                       it->second.describe(), ", not a ", dtype_name(dtype), " scalar"));
    return it->second;
  };
  const int64_t last_epoch = get("last_epoch", DType::Int64).to_int64_vector()[0];
  const int64_t step_count = get("step_count", DType::Int64).to_int64_vector()[0];
  const double base_lr = get("base_lr", DType::Float64).item();
  for (const auto& [key, t] : state)
    if (key != "last_epoch" && key != "step_count" && key != "base_lr")
      throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, "scheduler state '", key,
                                       "' is not a scheduler counter"));
  if (last_epoch < -1 || step_count < 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_INVALID, "scheduler state: last_epoch ", last_epoch,
                                     ", step_count ", step_count, " are out of range"));
  last_epoch_ = last_epoch;
  step_count_ = step_count;
  base_lr_ = base_lr;
}

}  // namespace gbx::nn
