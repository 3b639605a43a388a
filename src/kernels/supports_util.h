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

// The predicate the GEMM-family kernels of cpu.dnnl and cpu.simd share, with each engine's
// activation check (`kActivationOk`, FusedMatMul/FusedGemm only) and its refusal on concrete
// dims (`kRefusal`: "" when handled); later() while a dim is known only at run time.
// MatMul/FusedMatMul: A, B and FusedMatMul's bias (input 2). The dtypes are the kernels'
// declared input sets (KernelSupport::inputs): a predicate refusing a dtype that is unknown
// before run time would send the node to another engine for good.
template <bool kFused, bool (*kActivationOk)(const KernelQuery&),
          std::string (*kRefusal)(const Dims& a, const Dims& b, const Dims* bias)>
Verdict matmul_family_supports(const KernelQuery& q) {
  if (Verdict v = need_tensors(q, {0, 1}); !v.accepted()) return v;
  const bool with_bias = kFused && q.has_input(2);
  if (with_bias) {
    if (Verdict v = need_tensors(q, {2}); !v.accepted()) return v;
  }
  if (kFused && !kActivationOk(q)) return refuse("activation '" + q.attr_string("activation", "") + "'");
  const Dims* a = q.dims(0);
  const Dims* b = q.dims(1);
  const Dims* bias = with_bias ? q.dims(2) : nullptr;
  if (!a || !b || (with_bias && !bias)) return later();
  const std::string why = kRefusal(*a, *b, bias);
  return why.empty() ? accept() : refuse(why);
}

// Gemm/FusedGemm: A, B and C when beta != 0 (dtypes: the declared input sets, as above).
template <bool kFused, bool (*kActivationOk)(const KernelQuery&),
          std::string (*kRefusal)(const Dims& a, const Dims& b, const Dims* c, bool trans_a, bool trans_b)>
Verdict gemm_family_supports(const KernelQuery& q) {
  if (Verdict v = need_tensors(q, {0, 1}); !v.accepted()) return v;
  const bool with_c = q.has_input(2) && q.attr_float("beta", 1.f) != 0.f;
  if (with_c) {
    if (Verdict v = need_tensors(q, {2}); !v.accepted()) return v;
  }
  if (kFused && !kActivationOk(q)) return refuse("activation '" + q.attr_string("activation", "") + "'");
  const Dims* a = q.dims(0);
  const Dims* b = q.dims(1);
  const Dims* c = with_c ? q.dims(2) : nullptr;
  if (!a || !b || (with_c && !c)) return later();
  const std::string why = kRefusal(*a, *b, c, q.attr_int("transA", 0) != 0, q.attr_int("transB", 0) != 0);
  return why.empty() ? accept() : refuse(why);
}

}  // namespace gearbox
