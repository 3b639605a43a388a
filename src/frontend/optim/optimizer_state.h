// The optimizers' state_dict() / load_state_dict() in one place: the key scheme
// ("state.<i>.<buffer>", "param_groups.<g>.<hyperparameter>" and "param_groups.<g>.params", as
// torch names them) and the checks a load makes before it changes anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "frontend/tensor_impl.h"

namespace gbx::nn {

// Builds a state dict.
class OptimizerStateWriter {
 public:
  explicit OptimizerStateWriter(const std::vector<Tensor>& params) : params_(params) {}
  // Parameter k's buffer, skipped while empty (state is created at a parameter's first step).
  void buffer(size_t k, const char* name, const std::vector<float>& values);
  void step(size_t k, int64_t step);
  void hyperparameter(size_t g, const char* name, double value);
  // Group g's parameters, params[begin, end), as their indices (torch's param_groups[g]['params']).
  void group_params(size_t g, size_t begin, size_t end);
  std::map<std::string, Tensor> take() { return std::move(out_); }

 private:
  const std::vector<Tensor>& params_;
  std::map<std::string, Tensor> out_;
};

// Reads one; every getter marks its key used, and finish() rejects keys nobody asked for.
// Errors are CHECKPOINT_MISMATCH naming the key (`who` is the optimizer's kind).
class OptimizerStateReader {
 public:
  OptimizerStateReader(std::string who, const std::vector<Tensor>& params, const std::map<std::string, Tensor>& state)
      : who_(std::move(who)), params_(params), state_(state) {}
  // Parameter k's buffer: false if absent; a float32 tensor of the parameter's shape otherwise.
  bool buffer(size_t k, const char* name, std::vector<float>* out);
  // Parameter k's step count, if present (an int64 scalar >= 0).
  bool step(size_t k, int64_t* out);
  // Group g's hyperparameter, a float64 scalar: required, or `fallback` when absent.
  double hyperparameter(size_t g, const char* name);
  double hyperparameter(size_t g, const char* name, double fallback);
  // The state's parameter groups against the optimizer's: as many, each with the same parameters
  // ("param_groups.<g>.params"; a state of one group from before groups has none).
  void check_groups(const Optimizer& opt);
  void finish() const;

 private:
  const Tensor* find(const std::string& key);
  std::string who_;
  const std::vector<Tensor>& params_;
  const std::map<std::string, Tensor>& state_;
  std::set<std::string> used_;
};

// Runs `validate` (which constructs the optimizer from the loaded options: its constructor's
// checks) and turns its INVALID_ARGUMENT into CHECKPOINT_INVALID.
template <typename F>
void check_loaded_options(const std::string& who, F&& validate) {
  try {
    validate();
  } catch (const Error& e) {
    throw_status(gearbox::make_error(gearbox::ErrorCode::CHECKPOINT_INVALID, who,
                                     ": the checkpoint's hyperparameters are invalid: ", e.what()));
  }
}

}  // namespace gbx::nn
