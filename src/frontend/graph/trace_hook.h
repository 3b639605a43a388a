// What eager code tells an active tracer (frontend/graph/tracer.h). The dispatcher reports
// every op it ran; the tensor accessors that hand values to the host ask whether the value
// depends on the traced inputs (then the host would compute with this run's numbers, which a
// graph cannot record); the steps that cannot be recorded at all refuse. With no trace active
// (eager mode) each check is one thread-local load.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/tensor.h"
#include "frontend/dispatch.h"
#include "gearbox/nn.hpp"
#include "kernels/attributes.h"

namespace gbx::nn {

class TraceHook {
 public:
  virtual ~TraceHook() = default;
  // `op` ran on `inputs` and gave `outputs`.
  virtual void record(const OpSpec& op, const std::vector<gearbox::Tensor>& inputs, const gearbox::AttributeMap& attrs,
                      const std::vector<gearbox::Tensor>& outputs) = 0;
  // Throws nn::Error (API_INVALID_ARGUMENT) when `t` was computed from the traced inputs.
  virtual void check_host_read(const gearbox::Tensor& t, const char* what) = 0;
  // `copy` holds what `source` holds (Tensor::clone()).
  virtual void copied(const gearbox::Tensor& source, const gearbox::Tensor& copy) = 0;
  // Module state the function reads (`state`: BatchNorm's running statistics) is to hold
  // `new_value` after the run. A training trace makes `new_value` an output that its runner
  // writes back; a trace that holds `state` as a constant refuses (API_INVALID_ARGUMENT, `what`).
  virtual void state_update(const gearbox::Tensor& state, const gearbox::Tensor& new_value, const char* what) = 0;
  // `drawn` holds random numbers drawn on the host (a dropout mask); `draw()` draws the next
  // one. A training trace makes it a graph input that its runner draws afresh for every run;
  // a trace that would keep this draw as a constant refuses (API_INVALID_ARGUMENT, `what`).
  virtual void random_input(const gearbox::Tensor& drawn, std::function<gearbox::Tensor()> draw, const char* what) = 0;
};

// The tracer active on this thread, or nullptr (eager mode).
TraceHook* active_trace_hook();
// Installs `hook` on this thread for its lifetime (nesting is refused by the tracer).
class ActiveTrace {
 public:
  explicit ActiveTrace(TraceHook* hook);
  ~ActiveTrace();
  ActiveTrace(const ActiveTrace&) = delete;
  ActiveTrace& operator=(const ActiveTrace&) = delete;
};

// While a trace is active, throws nn::Error (API_INVALID_ARGUMENT): `what` cannot be recorded
// in a graph, `why` says why and what to do instead. Does nothing in eager mode.
void refuse_while_tracing(const std::string& what, const std::string& why);
// Gives module state (a buffer) a new value computed by tensor ops: eagerly, copied into the
// buffer's storage at once; while tracing, reported to the tracer (TraceHook::state_update), so
// that a graph computes it on every run. `new_value` has the buffer's dtype and shape.
void assign_state(Tensor& state, const Tensor& new_value, const char* what);
// The host-read check for an nn accessor (item(), to_float_vector(), data(), ...).
inline void check_host_read(const gearbox::Tensor& t, const char* what) {
  if (TraceHook* hook = active_trace_hook()) hook->check_host_read(t, what);
}

}  // namespace gbx::nn
