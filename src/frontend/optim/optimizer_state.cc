// OptimizerStateWriter / OptimizerStateReader (optimizer_state.h) and the base Optimizer's
// refusal to checkpoint what it does not know.
#include "frontend/optim/optimizer_state.h"

#include <cstring>

namespace gbx::nn {
namespace {

std::string state_key(size_t k, const char* name) { return "state." + std::to_string(k) + "." + name; }

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

void OptimizerStateWriter::hyperparameter(const char* name, double value) {
  out_[std::string("param_groups.0.") + name] = Tensor::scalar(value, DType::Float64);
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

double OptimizerStateReader::hyperparameter(const char* name) {
  const std::string key = std::string("param_groups.0.") + name;
  const Tensor* t = find(key);
  if (!t) state_mismatch(who_, key, "is missing");
  if (t->dtype() != DType::Float64 || t->numel() != 1)
    state_mismatch(who_, key, "is " + t->describe() + ", not a float64 scalar");
  return t->to_double_vector()[0];
}

void OptimizerStateReader::finish() const {
  for (const auto& [key, t] : state_)
    if (!used_.count(key))
      state_mismatch(who_, key, "is not state this optimizer has (" + std::to_string(params_.size()) + " parameters)");
}

}  // namespace gbx::nn
