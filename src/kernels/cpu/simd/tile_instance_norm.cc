// InstanceNormalization (ai.onnx 6-18) on the cpu.simd engine, written with the kernel API
// (include/gearbox/kernel_api.hpp): per (image, channel) plane, the mean (kapi Sum, centred on the plane's first
// value), the variance from squared deviations (kapi SumSquares: two passes, no E[x^2] - mean^2 cancellation), then y =
// (x - mean) a + B[c] in one pass (kapi Map) with a = scale[c] / sqrt(var + eps). Planes are threaded with
// kapi::parallel_for.
//
// Handled: float32 X of rank >= 3 with scale and B of shape [C]. Anything else is refused by
// instance_norm_supports(), so the node runs on the reference (which produces the errors).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/tile_instance_norm.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

// The kernel API is a public header (include/), outside this target's include path.
#include "../../../../include/gearbox/kernel_api.hpp"

GBX_KAPI_BEGIN(gearbox::simd)

void InstanceNormPlanes(const float* x, float* y, int64_t p0, int64_t p1, int64_t channels, int64_t plane,
                        const float* scale, const float* bias, float eps) {
  const float inv_n = 1.f / static_cast<float>(plane);
  for (int64_t p = p0; p < p1; ++p) {
    const float* xp = x + p * plane;
    const float mean = xp[0] + Sum(xp, plane, xp[0]) * inv_n;  // centred on x[0]: offsets keep precision
    const float var = SumSquares(xp, plane, mean) * inv_n;
    const int64_t c = p % channels;
    // (x - mean) a + B[c], not a x + (B[c] - mean a): with a large common offset the latter
    // cancels two large terms in float32.
    const VF va = hn::Set(DF(), scale[c] / std::sqrt(var + eps)), vm = hn::Set(DF(), mean), vb = hn::Set(DF(), bias[c]);
    Map(xp, y + p * plane, plane, [&](VF v) HWY_ATTR { return hn::MulAdd(hn::Sub(v, vm), va, vb); });
  }
}

GBX_KAPI_END(gearbox::simd)

#if HWY_ONCE
#include <string>

#include "kernels/cpu/simd/simd_util.h"
#include "kernels/cpu/simd/tile_kernels.h"
#include "kernels/supports_util.h"

namespace gearbox::simd {
HWY_EXPORT(InstanceNormPlanes);

void tile_instance_norm(const float* x, float* y, int64_t planes, int64_t channels, int64_t plane, const float* scale,
                        const float* bias, float eps) {
  // About 32K floats per chunk (whole planes): below that a fork costs more than it saves.
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(plane, 1));
  gbx::kapi::parallel_for(planes, grain, [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(InstanceNormPlanes)(x, y, b, e, channels, plane, scale, bias, eps);
  });
}

namespace {

// "" when this kernel handles X/scale/B of these dims, else why not.
std::string instance_norm_refusal(const Dims& x, const Dims& scale, const Dims& bias) {
  if (x.size() < 3) return "X is not N x C x D1 ...";
  if (dims_numel(x) == 0) return "X is empty";
  if (scale != Dims{x[1]} || bias != Dims{x[1]}) return "scale or B is not [C]";
  return "";
}

Verdict instance_norm_supports(const KernelQuery& q) {
  if (Verdict v = need_tensors(q, {0, 1, 2}); !v.accepted()) return v;
  for (size_t i = 0; i < 3; ++i)
    if (q.dtype(i) != DType::F32 && q.dtype(i) != DType::Undefined) return refuse("an input is not float32");
  const Dims *x = q.dims(0), *s = q.dims(1), *b = q.dims(2);
  if (!x || !s || !b) return later();
  const std::string why = instance_norm_refusal(*x, *s, *b);
  return why.empty() ? accept() : refuse(why);
}

Status instance_norm(KernelContext& ctx) {
  const Tensor &x = ctx.input(0), &scale = ctx.input(1), &bias = ctx.input(2);
  if (x.dtype() != DType::F32 || scale.dtype() != DType::F32 || bias.dtype() != DType::F32)
    return outside_supports(ctx, "this dtype");
  const std::string why = instance_norm_refusal(x.dims(), scale.dims(), bias.dims());
  if (!why.empty()) return outside_supports(ctx, why);
  const int64_t channels = x.dim(1), planes = x.dim(0) * channels;
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, x.dims()));
  tile_instance_norm(x.data<float>(), y.data<float>(), planes, channels, x.numel() / planes, scale.data<float>(),
                     bias.data<float>(), ctx.attr_float("epsilon", 1e-5f));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

GBX_REGISTER_KERNEL({"", "InstanceNormalization", 6, 18, kEngineSimd, {DType::F32}, instance_norm});
GBX_KERNEL_SUPPORT(instance_norm, {.supports = instance_norm_supports});

}  // namespace gearbox::simd
#endif
