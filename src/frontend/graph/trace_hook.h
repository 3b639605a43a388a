// What eager code tells an active tracer (frontend/graph/tracer.h). The dispatcher reports
// every op it ran; the tensor accessors that hand values to the host ask whether the value
// depends on the traced inputs (then the host would compute with this run's numbers, which a
// graph cannot record); the steps that cannot be recorded at all refuse. With no trace active
// (eager mode) each check is one thread-local load.
#pragma once

#include <string>
#include <vector>

#include "base/tensor.h"
#include "frontend/dispatch.h"
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
// The host-read check for an nn accessor (item(), to_float_vector(), data(), ...).
inline void check_host_read(const gearbox::Tensor& t, const char* what) {
  if (TraceHook* hook = active_trace_hook()) hook->check_host_read(t, what);
}

}  // namespace gbx::nn
