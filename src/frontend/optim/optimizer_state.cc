// OptimizerStateWriter / OptimizerStateReader (optimizer_state.h) and the base Optimizer's
// refusal to checkpoint what it does not know.
#include "frontend/optim/optimizer_state.h"

#include <algorithm>
#include <cstring>

namespace gbx::nn {
namespace {

std::string state_key(size_t k, const char* name) { return "state." + std::to_string(k) + "." + name; }
std::string group_key(size_t g, const char* name) { return "param_groups." + std::to_string(g) + "." + name; }

[[noreturn]] void state_mismatch(const std::string& who, const std::string& key, const std::string& why) {
  throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, who, " state '", key, "': ", why));
}

}  // namespace

std::map<std::string, Tensor> Optimizer::state_dict() const {
  throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "optimizer ", kind(),
                                   " has no state_dict(): it cannot be checkpointed"));
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>&) {
  throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "optimizer ", kind(),
                                   " has no load_state_dict(): it cannot be restored from a checkpoint"));
}

void OptimizerStateWriter::buffer(size_t k, const char* name, const std::vector<float>& values) {
  if (values.empty()) return;
  out_[state_key(k, name)] = Tensor::from_vector(values, params_[k].shape());
}

void OptimizerStateWriter::step(size_t k, int64_t step) {
  Tensor t = Tensor::zeros({}, DType::Int64);
  *static_cast<int64_t*>(t.mutable_data()) = step;
  out_[state_key(k, "step")] = t;
}

void OptimizerStateWriter::hyperparameter(size_t g, const char* name, double value) {
  out_[group_key(g, name)] = Tensor::scalar(value, DType::Float64);
}

void OptimizerStateWriter::group_params(size_t g, size_t begin, size_t end) {
  std::vector<int64_t> indices;
  for (size_t k = begin; k < end; ++k) indices.push_back(static_cast<int64_t>(k));
  out_[group_key(g, "params")] = Tensor::from_vector(indices, {static_cast<int64_t>(indices.size())});
}

const Tensor* OptimizerStateReader::find(const std::string& key) {
  auto it = state_.find(key);
  if (it == state_.end()) return nullptr;
  used_.insert(key);
  return &it->second;
}

bool OptimizerStateReader::buffer(size_t k, const char* name, std::vector<float>* out) {
  const std::string key = state_key(k, name);
  const Tensor* t = find(key);
  if (!t) return false;
  const Tensor& p = params_[k];
  if (t->dtype() != DType::Float32 || t->shape() != p.shape())
    state_mismatch(who_, key, "is " + t->describe() + " but parameter " + std::to_string(k) + " is " + p.describe());
  *out = t->to_float_vector();
  return true;
}

bool OptimizerStateReader::step(size_t k, int64_t* out) {
  const std::string key = state_key(k, "step");
  const Tensor* t = find(key);
  if (!t) return false;
  if (t->dtype() != DType::Int64 || t->numel() != 1)
    state_mismatch(who_, key, "is " + t->describe() + ", not an int64 scalar");
  *out = t->to_int64_vector()[0];
  if (*out < 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_INVALID, who_, " state '", key, "' is ", *out,
                                     ": a step count cannot be negative"));
  return true;
}

double OptimizerStateReader::hyperparameter(size_t g, const char* name) {
  const std::string key = group_key(g, name);
  if (!state_.count(key)) state_mismatch(who_, key, "is missing");
  return hyperparameter(g, name, 0);
}

double OptimizerStateReader::hyperparameter(size_t g, const char* name, double fallback) {
  const std::string key = group_key(g, name);
  const Tensor* t = find(key);
  if (!t) return fallback;
  if (t->dtype() != DType::Float64 || t->numel() != 1)
    state_mismatch(who_, key, "is " + t->describe() + ", not a float64 scalar");
  return t->to_double_vector()[0];
}

void OptimizerStateReader::check_groups(const Optimizer& opt) {
  // The groups the state has: one past the largest g of a "param_groups.<g>." key (a key whose g
  // is not a number is left to finish(), which rejects it).
  const std::string prefix = "param_groups.";
  size_t count = 0;
  for (const auto& [key, t] : state_) {
    if (key.rfind(prefix, 0) != 0) continue;
    const size_t dot = key.find('.', prefix.size());
    const std::string digits = key.substr(prefix.size(), dot == std::string::npos ? 0 : dot - prefix.size());
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    count = std::max(count, static_cast<size_t>(std::stoul(digits)) + 1);
  }
  if (count != opt.param_group_count())
    throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_MISMATCH, who_, " state has ", count,
                                     " parameter group(s), this optimizer ", opt.param_group_count()));
  for (size_t g = 0; g < count; ++g) {
    const std::string key = group_key(g, "params");
    const Tensor* t = find(key);
    const size_t begin = opt.param_group_begin(g), end = opt.param_group_end(g);
    if (!t) {
      if (count == 1) continue;  // written before parameter groups: the one group has them all
      state_mismatch(who_, key, "is missing");
    }
    std::vector<int64_t> want;
    for (size_t k = begin; k < end; ++k) want.push_back(static_cast<int64_t>(k));
    if (t->dtype() != DType::Int64 || t->rank() != 1 || t->to_int64_vector() != want)
      state_mismatch(who_, key,
                     "is " + t->describe() + " but this optimizer's group " + std::to_string(g) +
                         " holds parameters [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
  }
}

void OptimizerStateReader::finish() const {
  for (const auto& [key, t] : state_)
    if (!used_.count(key))
      state_mismatch(who_, key, "is not state this optimizer has (" + std::to_string(params_.size()) + " parameters)");
}

}  // namespace gbx::nn
