// LogSoftmax (ai.onnx 1-18) on the cpu.simd engine, written with the kernel API
// (include/gearbox/kernel_api.hpp): per row, the max (kapi Max), log of the sum of
// exp(x - max) (kapi Exp, Log), then y = (x - max) - lse (kapi Map). Rows are threaded with
// kapi::parallel_for.
//
// Handled: float32 rows that are contiguous (the last axis from opset 13; before it the input
// is coerced to 2-D at the axis, so rows are contiguous anyway), as cpu.simd's Softmax.
// Another axis is refused by log_softmax_supports() (the reference takes it).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/tile_log_softmax.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

// The kernel API is a public header (include/), outside this target's include path.
#include "../../../../include/gearbox/kernel_api.hpp"

GBX_KAPI_BEGIN(gearbox::simd)

void LogSoftmaxRows(const float* x, float* y, int64_t r0, int64_t r1, int64_t len) {
  const DF d;
  const int64_t l = Lanes();
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * len;
    const float mx = Max(xr, len);
    const VF vmx = hn::Set(d, mx);
    VF s = hn::Zero(d);
    for (int64_t i = 0; i < len; i += l) {
      const auto valid = hn::FirstN(d, static_cast<size_t>(std::min(l, len - i)));
      s = hn::Add(s, hn::IfThenElseZero(valid, Exp(hn::Sub(LoadN(xr + i, len - i), vmx))));
    }
    // (x - max) - lse, not x - (max + lse): max + lse rounds to max's precision (1e4 + 0.5
    // keeps 3 decimals in float32), x - max is exact near the max.
    const VF lse = Log(hn::SumOfLanes(d, s));
    Map(xr, y + r * len, len, [&](VF v) HWY_ATTR { return hn::Sub(hn::Sub(v, vmx), lse); });
  }
}

GBX_KAPI_END(gearbox::simd)

#if HWY_ONCE
#include <string>

#include "kernels/cpu/simd/simd_util.h"
#include "kernels/cpu/simd/tile_kernels.h"
#include "kernels/supports_util.h"

namespace gearbox::simd {
HWY_EXPORT(LogSoftmaxRows);

void tile_log_softmax(const float* x, float* y, int64_t rows, int64_t len) {
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(len, 1));
  gbx::kapi::parallel_for(rows, grain, [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(LogSoftmaxRows)(x, y, b, e, len);
  });
}

namespace {

// LogSoftmax's axis, normalized, when rows are contiguous (see the file comment).
bool row_axis(int64_t rank, int opset, int64_t axis, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  if (opset >= 13 && axis != rank - 1) return false;
  *out = axis;
  return true;
}

Verdict log_softmax_supports(const KernelQuery& q) {
  if (Verdict v = need_tensors(q, {0}); !v.accepted()) return v;
  if (q.rank(0) < 0) return later();
  const int64_t axis = q.attr_int("axis", q.opset() < 13 ? 1 : -1);
  int64_t a = 0;
  if (!row_axis(q.rank(0), q.opset(), axis, &a))
    return refuse("axis " + std::to_string(axis) + " of a rank-" + std::to_string(q.rank(0)) +
                  " input is not its last (or out of range)");
  return accept();
}

Status log_softmax(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  int64_t axis = 0;
  if (x.dtype() != DType::F32 || !row_axis(rank, ctx.opset(), ctx.attr_int("axis", ctx.opset() < 13 ? 1 : -1), &axis))
    return outside_supports(ctx, "this dtype or axis");
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, x.dims()));
  if (x.numel() > 0) {
    int64_t len = 1;
    for (int64_t i = axis; i < rank; ++i) len *= x.dim(static_cast<size_t>(i));
    tile_log_softmax(x.data<float>(), y.data<float>(), x.numel() / len, len);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

GBX_REGISTER_KERNEL({"", "LogSoftmax", 1, 18, kEngineSimd, {DType::F32}, log_softmax});
GBX_KERNEL_SUPPORT(log_softmax, {.supports = log_softmax_supports});

}  // namespace gearbox::simd
#endif
