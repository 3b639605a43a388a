// LayerNormalization (ai.onnx 17 and com.gearbox.LayerNormalization) and
// com.gearbox.SkipLayerNormalization (LayerNorm(X + Skip)) on the cpu.simd engine: one
// vectorized row at a time (simd_util.h layer_norm_row), rows threaded with OpenMP.
//
// Handled: float32, Scale and B of the normalized shape itself (leading 1s allowed), Skip of
// X's shape, only output Y wanted. Anything else (Scale/B that broadcast within the row, a
// Skip that broadcasts, the Mean/InvStdDev outputs, other dtypes) is refused by
// norm_supports(), so the node runs on the next engine (the reference, which also produces the
// errors).
#include <vector>

#include "kernels/cpu/simd/simd_util.h"
#include "kernels/supports_util.h"

namespace gearbox::simd {
namespace {

// True when dims t hold exactly one value per normalized element of x (from `axis`), in
// row-major order.
bool matches_row(const Dims& t, const Dims& x, int64_t axis, int64_t cols) {
  if (dims_numel(t) != cols || t.size() > x.size() - static_cast<size_t>(axis)) return false;
  const size_t off = x.size() - t.size();
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] != x[off + i]) return false;
  return true;
}

// The checks of norm_supports() on concrete dims; "" when handled, else why not.
std::string norm_refusal(const Dims& x, int64_t axis, const Dims* skip, const Dims& scale, const Dims* bias) {
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank == 0) return "X is a scalar";
  if (dims_numel(x) == 0) return "X is empty";
  if (axis < -rank || axis >= rank) return "axis " + std::to_string(axis) + " is out of range";
  if (axis < 0) axis += rank;
  int64_t cols = 1;
  for (int64_t i = axis; i < rank; ++i) cols *= x[static_cast<size_t>(i)];
  if (skip && *skip != x) return "Skip " + to_string(*skip) + " broadcasts to X " + to_string(x);
  if (!matches_row(scale, x, axis, cols)) return "Scale " + to_string(scale) + " is not the normalized shape";
  if (bias && !matches_row(*bias, x, axis, cols)) return "B " + to_string(*bias) + " is not the normalized shape";
  return "";
}

template <bool kSkip>
Verdict norm_supports(const KernelQuery& q) {
  const size_t scale_in = kSkip ? 2 : 1;
  if (Verdict v = kSkip ? need_tensors(q, {0, 1, 2}) : need_tensors(q, {0, 1}); !v.accepted()) return v;
  if (q.wants_output(1) || q.wants_output(2)) return refuse("the Mean/InvStdDev outputs are wanted");
  if (q.has_input(scale_in + 1)) {
    if (Verdict v = need_tensors(q, {scale_in + 1}); !v.accepted()) return v;
    if (q.dtype(scale_in + 1) != DType::F32) return refuse("B is not float32");
  }
  for (size_t i = 0; i <= scale_in; ++i)
    if (q.dtype(i) != DType::F32 && q.dtype(i) != DType::Undefined) return refuse("an input is not float32");
  const Dims* x = q.dims(0);
  const Dims* scale = q.dims(scale_in);
  const Dims* skip = kSkip ? q.dims(1) : nullptr;
  const Dims* bias = q.has_input(scale_in + 1) ? q.dims(scale_in + 1) : nullptr;
  if (!x || !scale || (kSkip && !skip) || (q.has_input(scale_in + 1) && !bias)) return later();
  const std::string why = norm_refusal(*x, q.attr_int("axis", -1), skip, *scale, bias);
  return why.empty() ? accept() : refuse(why);
}

// Y = LayerNorm(X (+ Skip)) with Scale at input `scale_in` and B at scale_in + 1.
Status norm_impl(KernelContext& ctx, bool with_skip) {
  const size_t scale_in = with_skip ? 2 : 1;
  const Tensor& x = ctx.input(0);
  const Tensor* skip = with_skip ? &ctx.input(1) : nullptr;
  const Tensor& scale = ctx.input(scale_in);
  const Tensor* bias = ctx.has_input(scale_in + 1) ? &ctx.input(scale_in + 1) : nullptr;
  const std::string why = norm_refusal(x.dims(), ctx.attr_int("axis", -1), skip ? &skip->dims() : nullptr, scale.dims(),
                                       bias ? &bias->dims() : nullptr);
  if (!why.empty()) return outside_supports(ctx, why);
  const int64_t rank = static_cast<int64_t>(x.rank());
  int64_t axis = ctx.attr_int("axis", -1);
  if (axis < 0) axis += rank;
  int64_t cols = 1;
  for (int64_t i = axis; i < rank; ++i) cols *= x.dim(static_cast<size_t>(i));
  const int64_t rows = x.numel() / cols;
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

GBX_REGISTER_KERNEL({"", "LayerNormalization", 17, 18, kEngineSimd, {DType::F32}, layer_norm});
GBX_REGISTER_KERNEL({kGearboxDomain, "LayerNormalization", 1, 1, kEngineSimd, {DType::F32}, layer_norm});
GBX_KERNEL_SUPPORT(layer_norm, {.supports = norm_supports<false>});
GBX_REGISTER_KERNEL({kGearboxDomain, "SkipLayerNormalization", 1, 1, kEngineSimd, {DType::F32}, skip_layer_norm});
GBX_KERNEL_SUPPORT(skip_layer_norm, {.supports = norm_supports<true>});

}  // namespace gearbox::simd
