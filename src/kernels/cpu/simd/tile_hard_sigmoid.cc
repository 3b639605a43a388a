// HardSigmoid and HardSwish (ai.onnx 6 / 14) on the cpu.simd engine, written with the kernel API
// (include/gearbox/kernel_api.hpp), float32. MobileNetV3-style networks run them on every block
// (HardSwish as the activation, HardSigmoid as the squeeze-excite gate).
//
//   HardSigmoid: y = max(0, min(1, alpha x + beta))
//   HardSwish:   y = x max(0, min(1, x / 6 + 0.5))
//
// The same operations in the same order as cpu.ref (alpha x + beta as one fused multiply-add on
// both engines, since a compiler may or may not fuse a multiply and an add; a division by 6,
// not a multiply by 1/6), so the two engines agree bit for bit.
// NaN stays NaN (the x86 min/max instructions would turn it into 0 or 1).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/tile_hard_sigmoid.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

// The kernel API is a public header (include/), outside this target's include path.
#include "../../../../include/gearbox/kernel_api.hpp"

GBX_KAPI_BEGIN(gearbox::simd)

void HardSigmoidSpan(const float* x, float* y, int64_t n, float alpha, float beta) {
  const DF d;
  const VF va = hn::Set(d, alpha), vb = hn::Set(d, beta), zero = hn::Zero(d), one = hn::Set(d, 1.f);
  Map(x, y, n, [&](VF v) HWY_ATTR {
    const VF r = hn::Max(hn::Min(hn::MulAdd(va, v, vb), one), zero);
    return hn::IfThenElse(hn::IsNaN(v), v, r);
  });
}

void HardSwishSpan(const float* x, float* y, int64_t n) {
  const DF d;
  const VF six = hn::Set(d, 6.f), half = hn::Set(d, 0.5f), zero = hn::Zero(d), one = hn::Set(d, 1.f);
  Map(x, y, n, [&](VF v) HWY_ATTR {
    // NaN: the clamp gives 0 or 1, and v times it is NaN again.
    return hn::Mul(v, hn::Max(hn::Min(hn::Add(hn::Div(v, six), half), one), zero));
  });
}

GBX_KAPI_END(gearbox::simd)

#if HWY_ONCE
#include "kernels/cpu/simd/simd_util.h"
#include "kernels/cpu/simd/tile_kernels.h"
#include "kernels/supports_util.h"

namespace gearbox::simd {
HWY_EXPORT(HardSigmoidSpan);
HWY_EXPORT(HardSwishSpan);

// 16K floats (64 KiB in, 64 KiB out) per chunk, as Mish: the work per element is smaller, but a
// chunk is still well over a fork's cost.
constexpr int64_t kChunk = 16384;

void tile_hard_sigmoid(const float* x, float* y, int64_t n, float alpha, float beta) {
  gbx::kapi::parallel_for(
      n, kChunk, [&](int64_t b, int64_t e) { HWY_DYNAMIC_DISPATCH(HardSigmoidSpan)(x + b, y + b, e - b, alpha, beta); });
}

void tile_hard_swish(const float* x, float* y, int64_t n) {
  gbx::kapi::parallel_for(n, kChunk,
                          [&](int64_t b, int64_t e) { HWY_DYNAMIC_DISPATCH(HardSwishSpan)(x + b, y + b, e - b); });
}

namespace {
template <bool kSwish>
Status hard_activation(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::F32) return outside_supports(ctx, "this dtype");
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, x.dims()));
  if constexpr (kSwish) {
    tile_hard_swish(x.data<float>(), y.data<float>(), x.numel());
  } else {
    tile_hard_sigmoid(x.data<float>(), y.data<float>(), x.numel(), ctx.attr_float("alpha", 0.2f),
                      ctx.attr_float("beta", 0.5f));
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}
Verdict hard_activation_supports(const KernelQuery& q) { return need_tensors(q, {0}); }
}  // namespace

GBX_REGISTER_KERNEL({"", "HardSigmoid", 6, 18, kEngineSimd, {DType::F32}, hard_activation<false>});
GBX_KERNEL_SUPPORT(hard_activation<false>, {.supports = hard_activation_supports});
GBX_REGISTER_KERNEL({"", "HardSwish", 14, 18, kEngineSimd, {DType::F32}, hard_activation<true>});
GBX_KERNEL_SUPPORT(hard_activation<true>, {.supports = hard_activation_supports});

}  // namespace gearbox::simd
#endif
