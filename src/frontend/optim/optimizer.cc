// nn::Optimizer's shared part: the parameter list and its groups, zero_grad.
#include <unordered_map>

#include "frontend/tensor_impl.h"

namespace gbx::nn {
namespace {

void check_parameter(const Tensor& p, const std::string& where) {
  if (!p.defined() || !p.requires_grad() || p.dtype() != DType::Float32)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, where, p.describe(),
                                     " must be a float32 tensor that requires a gradient"));
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)), group_begin_{0} {
  for (const Tensor& p : params_) check_parameter(p, "optimizer: parameter ");
}

Optimizer::Optimizer(const std::string& who, std::vector<std::vector<Tensor>> groups) {
  if (groups.empty())
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, who, ": no parameter groups"));
  // Where each parameter went first: a parameter in two groups (or twice in one) would be
  // stepped twice per step(), with two sets of state (torch refuses it too).
  std::unordered_map<const TensorImpl*, std::pair<size_t, size_t>> seen;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].empty())
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, who, ": parameter group ", g,
                                       " has no parameters"));
    group_begin_.push_back(params_.size());
    for (size_t i = 0; i < groups[g].size(); ++i) {
      const Tensor& p = groups[g][i];
      const std::string where =
          who + ": parameter group " + std::to_string(g) + ", parameter " + std::to_string(i) + " ";
      check_parameter(p, where);
      auto [it, fresh] = seen.emplace(p.impl().get(), std::make_pair(g, i));
      if (!fresh)
        throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, where, p.describe(),
                                         " is already parameter ", it->second.second, " of parameter group ",
                                         it->second.first, ": a parameter belongs to one group, once"));
      params_.push_back(p);
    }
  }
}

size_t Optimizer::param_group_begin(size_t g) const {
  if (g >= group_begin_.size()) throw_no_group(g);
  return group_begin_[g];
}

size_t Optimizer::param_group_end(size_t g) const {
  if (g >= group_begin_.size()) throw_no_group(g);
  return g + 1 < group_begin_.size() ? group_begin_[g + 1] : params_.size();
}

double Optimizer::group_lr(size_t g) const {
  if (g >= group_begin_.size()) throw_no_group(g);
  return lr();
}

void Optimizer::set_group_lr(size_t g, double lr) {
  if (g >= group_begin_.size()) throw_no_group(g);
  set_lr(lr);
}

void Optimizer::throw_no_group(size_t g) const {
  throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, kind(), ": no parameter group ", g,
                                   " (it has ", group_begin_.size(), ")"));
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.zero_grad();
}

}  // namespace gbx::nn
