// LogSoftmax (ai.onnx 1-18) on the cpu.simd engine, written with the kernel API
// (include/gearbox/kernel_api.hpp): per row, the max (kapi Max), log of the sum of
// exp(x - max) (kapi Exp, Log), then y = (x - max) - lse (kapi Map). Rows are threaded with
// kapi::parallel_for.
//
// Not registered as a cpu.simd kernel: its last-ulp differences from cpu.ref's LogSoftmax moved
// the framework's torch parity tests past their bounds (RMSprop-centered's parameters 2.2e-4
// against 1e-4, a vocabulary-parallel loss 1.02e-5 against 1e-5), so LogSoftmax stays on the
// reference; tile_log_softmax is the kernel API's worked example, tested and benchmarked.
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
#include "kernels/cpu/simd/tile_kernels.h"

namespace gearbox::simd {
HWY_EXPORT(LogSoftmaxRows);

void tile_log_softmax(const float* x, float* y, int64_t rows, int64_t len) {
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(len, 1));
  gbx::kapi::parallel_for(rows, grain, [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(LogSoftmaxRows)(x, y, b, e, len);
  });
}

}  // namespace gearbox::simd
#endif
