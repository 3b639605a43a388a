// The thread's active tracer (see trace_hook.h).
#include "frontend/graph/trace_hook.h"

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

}  // namespace gbx::nn
