// Learning-rate schedulers: torch 1.13's chainable get_lr() formulas (torch/optim/
// lr_scheduler.py), in double as Python computes them, so every epoch's rate equals torch's.
// Each step() advances the epoch and sets every parameter group's lr from the rate it has now and
// its base rate, as torch's get_lr() does group by group.
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

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (size_t g = 0; g < optimizer.param_group_count(); ++g) base_lrs_.push_back(optimizer.group_lr(g));
}

void LRScheduler::step() {
  ++last_epoch_;
  ++step_count_;
  for (size_t g = 0; g < base_lrs_.size(); ++g)
    optimizer_.set_group_lr(g, next_lr(optimizer_.group_lr(g), base_lrs_[g]));
}

std::vector<double> LRScheduler::last_lrs() const {
  std::vector<double> out;
  for (size_t g = 0; g < optimizer_.param_group_count(); ++g) out.push_back(optimizer_.group_lr(g));
  return out;
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  check(step_size > 0 && gamma >= 0, "StepLR", "step_size must be > 0 and gamma >= 0");
  step();
}

double StepLR::next_lr(double current, double) const {
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return current;
  return current * gamma_;
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  check(t_max > 0, "CosineAnnealingLR", "t_max must be > 0");
  step();
}

double CosineAnnealingLR::next_lr(double current, double base_lr) const {
  const double pi = std::numbers::pi, t = static_cast<double>(t_max_), e = static_cast<double>(last_epoch_);
  if (last_epoch_ == 0) return current;
  if (step_count_ == 1 && last_epoch_ > 0) return eta_min_ + (base_lr - eta_min_) * (1 + std::cos(e * pi / t)) / 2;
  if (py_mod(last_epoch_ - 1 - t_max_, 2 * t_max_) == 0)
    return current + (base_lr - eta_min_) * (1 - std::cos(pi / t)) / 2;
  return (1 + std::cos(pi * e / t)) / (1 + std::cos(pi * (e - 1) / t)) * (current - eta_min_) + eta_min_;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  check(start_factor > 0 && start_factor <= 1 && end_factor >= 0 && end_factor <= 1 && total_iters > 0, "LinearLR",
        "start_factor must be in (0, 1], end_factor in [0, 1] and total_iters > 0");
  step();
}

double LinearLR::next_lr(double current, double) const {
  if (last_epoch_ == 0) return current * start_factor_;
  if (last_epoch_ > total_iters_) return current;
  return current *
         (1. + (end_factor_ - start_factor_) / (static_cast<double>(total_iters_) * start_factor_ +
                                                static_cast<double>(last_epoch_ - 1) * (end_factor_ - start_factor_)));
}

std::map<std::string, Tensor> LRScheduler::state_dict() const {
  return {{"last_epoch", Tensor::from_vector(std::vector<int64_t>{last_epoch_}, {})},
          {"step_count", Tensor::from_vector(std::vector<int64_t>{step_count_}, {})},
          {"base_lrs", Tensor::from_vector(base_lrs_, {static_cast<int64_t>(base_lrs_.size())})}};
}

void LRScheduler::load_state_dict(const std::map<std::string, Tensor>& state) {
  auto find = [&](const char* key) -> const Tensor* {
    auto it = state.find(key);
    return it == state.end() ? nullptr : &it->second;
  };
  auto get = [&](const char* key, DType dtype) {
    const Tensor* t = find(key);
    if (!t)
      throw_status(
          gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, "scheduler state '", key, "' is missing"));
    if (t->dtype() != dtype || t->numel() != 1)
      throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, "scheduler state '", key, "' is ",
                                       t->describe(), ", not a ", dtype_name(dtype), " scalar"));
    return *t;
  };
  const int64_t last_epoch = get("last_epoch", DType::Int64).to_int64_vector()[0];
  const int64_t step_count = get("step_count", DType::Int64).to_int64_vector()[0];
  // One base rate per group ("base_lrs"), or the one of a file from before parameter groups.
  const size_t groups = optimizer_.param_group_count();
  std::vector<double> base_lrs;
  const bool before_groups = !find("base_lrs") && find("base_lr");
  const std::string base_key = before_groups ? "base_lr" : "base_lrs";
  if (before_groups) {
    base_lrs.push_back(get("base_lr", DType::Float64).item());
  } else {
    const Tensor* t = find("base_lrs");
    if (!t)
      throw_status(
          gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, "scheduler state 'base_lrs' is missing"));
    if (t->dtype() != DType::Float64 || t->rank() != 1)
      throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, "scheduler state 'base_lrs' is ",
                                       t->describe(), ", not a 1-d float64 tensor"));
    base_lrs = t->to_double_vector();
  }
  if (base_lrs.size() != groups)
    throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, "scheduler state '", base_key, "' has ",
                                     base_lrs.size(), " base rate(s), the optimizer ", groups, " parameter group(s)"));
  for (const auto& [key, t] : state)
    if (key != "last_epoch" && key != "step_count" && key != base_key)
      throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, "scheduler state '", key,
                                       "' is not a scheduler counter"));
  if (last_epoch < -1 || step_count < 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_INVALID, "scheduler state: last_epoch ", last_epoch,
                                     ", step_count ", step_count, " are out of range"));
  last_epoch_ = last_epoch;
  step_count_ = step_count;
  base_lrs_ = std::move(base_lrs);
}

}  // namespace gbx::nn
