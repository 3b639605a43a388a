// Mish (ai.onnx 18) on the cpu.simd engine, written with the kernel API
// (include/gearbox/kernel_api.hpp): y = x tanh(softplus(x)), float32.
//
// tanh(log(1 + e^x)) = n / (n + 2) with n = e^x (e^x + 2): one exponential and one division per
// element instead of exp, log1p and tanh, and no cancellation (n >= 0). Above x = 20, n would
// overflow and tanh(softplus(x)) is 1 in float32, so y = x there. NaN stays NaN.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/tile_mish.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

// The kernel API is a public header (include/), outside this target's include path.
#include "../../../../include/gearbox/kernel_api.hpp"

GBX_KAPI_BEGIN(gearbox::simd)

void MishSpan(const float* x, float* y, int64_t n) {
  const DF d;
  const VF two = hn::Set(d, 2.f), big = hn::Set(d, 20.f), lo = hn::Set(d, -104.f);
  Map(x, y, n, [&](VF v) HWY_ATTR {
    // The argument is clamped to [-104, 20] here, inside Highway's Exp range: kapi Exp's
    // overflow and NaN guards would be wasted (~10% of this loop), so Highway's own.
    const VF e = hn::Exp(d, hn::Max(hn::Min(v, big), lo));
    const VF num = hn::Mul(e, hn::Add(e, two));
    const VF r = hn::Mul(v, hn::Div(num, hn::Add(num, two)));
    return hn::IfThenElse(hn::Gt(v, big), v, r);
  });
}

GBX_KAPI_END(gearbox::simd)

#if HWY_ONCE
#include "kernels/cpu/simd/simd_util.h"
#include "kernels/cpu/simd/tile_kernels.h"
#include "kernels/supports_util.h"

namespace gearbox::simd {
HWY_EXPORT(MishSpan);

void tile_mish(const float* x, float* y, int64_t n) {
  // 16K floats (64 KiB in, 64 KiB out) per chunk: ~10 us of work, well over a fork's cost.
  gbx::kapi::parallel_for(n, 16384, [&](int64_t b, int64_t e) { HWY_DYNAMIC_DISPATCH(MishSpan)(x + b, y + b, e - b); });
}

namespace {
Status mish(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::F32) return outside_supports(ctx, "this dtype");
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, x.dims()));
  tile_mish(x.data<float>(), y.data<float>(), x.numel());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}
Verdict mish_supports(const KernelQuery& q) { return need_tensors(q, {0}); }
}  // namespace

GBX_REGISTER_KERNEL({"", "Mish", 18, 18, kEngineSimd, {DType::F32}, mish});
GBX_KERNEL_SUPPORT(mish, {.supports = mish_supports});

}  // namespace gearbox::simd
#endif
