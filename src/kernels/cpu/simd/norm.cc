// LayerNormalization (ai.onnx 17 and com.gearbox.LayerNormalization) and
// com.gearbox.SkipLayerNormalization (LayerNorm(X + Skip)) on the cpu.simd engine: one
// vectorized row at a time (simd_util.h layer_norm_row), rows threaded with OpenMP.
//
// Handled: float32, Scale and B of the normalized shape itself (leading 1s allowed), Skip of
// X's shape, only output Y wanted. Anything else (Scale/B that broadcast within the row, a
// Skip that broadcasts, the Mean/InvStdDev outputs, other dtypes, empty tensors) runs the
// reference kernel, which also produces the errors.
#include <vector>

#include "kernels/cpu/simd/simd_util.h"

namespace gearbox::simd {
namespace {

// True when t holds exactly one value per normalized element, in row-major order.
bool matches_row(const Tensor& t, const Tensor& x, int64_t axis, int64_t cols) {
  if (t.dtype() != DType::F32 || t.numel() != cols || t.rank() > x.rank() - static_cast<size_t>(axis)) return false;
  const size_t off = x.rank() - t.rank();
  for (size_t i = 0; i < t.rank(); ++i)
    if (t.dim(i) != x.dim(off + i)) return false;
  return true;
}

// Y = LayerNorm(X (+ Skip)) with Scale at input `scale_in` and B at scale_in + 1.
Status norm_impl(KernelContext& ctx, bool with_skip) {
  const size_t scale_in = with_skip ? 2 : 1;
  for (size_t i = 0; i <= scale_in; ++i)
    if (!ctx.has_input(i) || !ctx.input_value(i).is_tensor()) return run_ref(ctx);
  if (ctx.wants_output(1) || ctx.wants_output(2)) return run_ref(ctx);
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::F32 || x.rank() == 0 || x.numel() == 0) return run_ref(ctx);
  const int64_t rank = static_cast<int64_t>(x.rank());
  int64_t axis = ctx.attr_int("axis", -1);
  if (axis < -rank || axis >= rank) return run_ref(ctx);
  if (axis < 0) axis += rank;
  int64_t cols = 1;
  for (int64_t i = axis; i < rank; ++i) cols *= x.dim(static_cast<size_t>(i));
  const int64_t rows = x.numel() / cols;
  const Tensor* skip = with_skip ? &ctx.input(1) : nullptr;
  if (skip && (skip->dtype() != DType::F32 || skip->dims() != x.dims())) return run_ref(ctx);
  const Tensor& scale = ctx.input(scale_in);
  if (!matches_row(scale, x, axis, cols)) return run_ref(ctx);
  const Tensor* bias = nullptr;
  if (ctx.has_input(scale_in + 1)) {
    if (!ctx.input_value(scale_in + 1).is_tensor()) return run_ref(ctx);
    bias = &ctx.input(scale_in + 1);
    if (!matches_row(*bias, x, axis, cols)) return run_ref(ctx);
  }
  const float eps = ctx.attr_float("epsilon", 1e-5f);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, x.dims()));
  const float* xd = x.data<float>();
  const float* sd = skip ? skip->data<float>() : nullptr;
  const float* g = scale.data<float>();
  const float* b = bias ? bias->data<float>() : nullptr;
  float* yd = y.data<float>();
  for_each_index(rows, rows * cols > 32768, [&](int64_t r) {
    layer_norm_row(xd + r * cols, sd ? sd + r * cols : nullptr, g, b, yd + r * cols, cols, eps);
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status layer_norm(KernelContext& ctx) { return norm_impl(ctx, false); }
Status skip_layer_norm(KernelContext& ctx) { return norm_impl(ctx, true); }

}  // namespace

GBX_REGISTER_KERNEL({"", "LayerNormalization", 17, 17, kEngineSimd, {DType::F32}, layer_norm});
GBX_REGISTER_KERNEL({kGearboxDomain, "LayerNormalization", 1, 1, kEngineSimd, {}, layer_norm});
GBX_REGISTER_KERNEL({kGearboxDomain, "SkipLayerNormalization", 1, 1, kEngineSimd, {}, skip_layer_norm});

}  // namespace gearbox::simd
