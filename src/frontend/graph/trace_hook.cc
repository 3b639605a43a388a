// The thread's active tracer (see trace_hook.h).
#include "frontend/graph/trace_hook.h"

#include <cstring>

#include "frontend/tensor_impl.h"

namespace gbx::nn {

namespace {
thread_local TraceHook* g_active = nullptr;
}  // namespace

TraceHook* active_trace_hook() { return g_active; }

ActiveTrace::ActiveTrace(TraceHook* hook) {
  if (g_active)
    throw_status(gearbox::make_error(gearbox::ErrorCode::API_INVALID_ARGUMENT,
                                     "trace: a trace is already running on this thread (a traced function traces or "
                                     "calls a GraphFunction itself); trace the outer function only"));
  g_active = hook;
}

ActiveTrace::~ActiveTrace() { g_active = nullptr; }

void refuse_while_tracing(const std::string& what, const std::string& why) {
  if (!g_active) return;
  throw_status(gearbox::make_error(gearbox::ErrorCode::API_INVALID_ARGUMENT, what, " cannot be traced: ", why));
}

void assign_state(Tensor& state, const Tensor& new_value, const char* what) {
  const gearbox::Tensor& s = value_of(state, what);
  const gearbox::Tensor& v = value_of(new_value, what);
  if (s.dtype() != v.dtype() || s.dims() != v.dims())
    throw_status(gearbox::make_error(gearbox::ErrorCode::INTERNAL, what, ": the new value ", gearbox::describe(v),
                                     " does not fit the state ", gearbox::describe(s)));
  if (g_active) return g_active->state_update(s, v, what);
  std::memcpy(state.mutable_data(), v.raw(), v.nbytes());
}

}  // namespace gbx::nn
