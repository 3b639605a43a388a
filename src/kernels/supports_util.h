// Helpers for the supports() predicates of kernels that handle only some cases of their op
// (kernels/kernel.h: KernelQuery, Verdict), and the error such a kernel returns when it is
// called on a case its predicate refuses -- which only a direct call can do: the executor and
// the fused kernels pick kernels with kernel_accepts, so the refused case runs on another engine.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "kernels/kernel_support.h"

namespace gearbox {

// Accept when each of inputs `idx` is present and a tensor; refuse when one is missing or is
// not a tensor; later() when one may be none at run time (an Optional).
inline Verdict need_tensors(const KernelQuery& q, std::initializer_list<size_t> idx) {
  bool maybe = false;
  for (size_t i : idx) {
    if (!q.has_input(i)) return refuse("input " + std::to_string(i) + " is missing");
    if (q.input(i).maybe_none) maybe = true;
    else if (!q.is_tensor(i)) return refuse("input " + std::to_string(i) + " is not a tensor");
  }
  return maybe && !q.at_run_time() ? later() : accept();
}

// The product of dims (1 for a scalar).
inline int64_t dims_numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

// INTERNAL: this kernel was called on a case its supports() refuses (`what`).
inline Status outside_supports(const KernelContext& ctx, std::string_view what) {
  return ctx.error(ErrorCode::INTERNAL, "this ", ctx.op().op_type, " kernel does not handle ", what,
                   " (its supports() predicate refuses it; run the node through a Session or pick the kernel with "
                   "kernel_accepts)");
}

}  // namespace gearbox
