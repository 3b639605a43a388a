// Autocast inside the frontend (gearbox/nn_amp.hpp): the dtype the active level gives an op's
// float inputs, which autodiff/tape.cc's apply() casts them to before it dispatches the op.
#pragma once

#include <optional>
#include <vector>

#include "frontend/dispatch.h"
#include "gearbox/nn_amp.hpp"

namespace gbx::nn::amp {

// The dtype `op` takes its float32/bfloat16/float16 inputs in under the active Autocast, or
// nullopt when it runs on them as they are (no Autocast, O0, no such inputs, all already in it).
std::optional<DType> autocast_target(const OpSpec& op, const std::vector<Tensor>& inputs);
// `inputs` with every float32/bfloat16/float16 tensor converted to `dtype` (recorded casts).
std::vector<Tensor> cast_float_inputs(const std::vector<Tensor>& inputs, DType dtype);
// Remembers that `op` has no kernel for the reduced `dtype` (it ran in float32 instead), so
// autocast_target stops choosing it; logs a warning the first time.
void note_no_reduced_kernel(const OpSpec& op, DType dtype);

// No autocast while it lives (backward(): gradients run in their forward ops' dtypes).
class AutocastSuspended {
 public:
  AutocastSuspended();
  ~AutocastSuspended();
  AutocastSuspended(const AutocastSuspended&) = delete;
  AutocastSuspended& operator=(const AutocastSuspended&) = delete;

 private:
  AmpLevel previous_;
};

// Where a composite op computes in float32 whatever autocast says (the losses: O1 and O2 keep
// them float32, as the black list does a single op): while it lives, autocast is off at O1 and
// O2, and input() converts a reduced-precision tensor to float32. At O0 and O3 it does nothing.
class Float32Region {
 public:
  Float32Region();
  ~Float32Region();
  Float32Region(const Float32Region&) = delete;
  Float32Region& operator=(const Float32Region&) = delete;
  Tensor input(const Tensor& t) const;

 private:
  AmpLevel previous_;
  bool active_;
};

}  // namespace gbx::nn::amp
