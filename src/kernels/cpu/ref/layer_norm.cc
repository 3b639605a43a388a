// LayerNormalization (reference, opset 17): normalizes over the dims from `axis` on,
// Y = (X - mean) / sqrt(var + epsilon) * Scale + B, with Scale and optional B broadcast to
// X.shape[axis:]; optional outputs Mean and InvStdDev of shape X.shape[:axis] + [1, ...] in
// the stash_type dtype (float32 by default). Statistics accumulate in double (two passes).
// float32/float64, float16/bfloat16 computed in f32.
#include <cmath>
#include <vector>

#include "kernels/cpu/ref/nn_util.h"
#include "kernels/cpu/ref/ref_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

template <typename T>
void layer_norm_typed(const T* x, T* y, int64_t rows, int64_t cols, const T* scale, const std::vector<int64_t>& soff,
                      const T* bias, const std::vector<int64_t>& boff, double eps, double* mean_out, double* inv_out) {
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    const auto [mean, inv] = nn::mean_and_inv_std(xr, cols, eps);
    for (int64_t i = 0; i < cols; ++i) {
      const size_t k = static_cast<size_t>(i);
      double v = (static_cast<double>(xr[i]) - mean) * inv * static_cast<double>(scale[soff[k]]);
      if (bias) v += static_cast<double>(bias[boff[k]]);
      yr[i] = static_cast<T>(v);
    }
    mean_out[r] = mean;
    inv_out[r] = inv;
  }
}

// Offsets of a tensor broadcast (numpy-style, right-aligned) onto the normalized shape.
Result<std::vector<int64_t>> broadcast_offsets(const KernelContext& ctx, const char* name, const Tensor& t,
                                               const Dims& norm) {
  if (t.rank() > norm.size())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, name, " ", to_string(t.dims()),
                     " cannot be broadcast to the normalized shape ", to_string(norm));
  const size_t off = norm.size() - t.rank();
  for (size_t i = 0; i < t.rank(); ++i)
    if (t.dim(i) != 1 && t.dim(i) != norm[off + i])
      return ctx.error(ErrorCode::SHAPE_MISMATCH, name, " ", to_string(t.dims()),
                       " cannot be broadcast to the normalized shape ", to_string(norm));
  const std::vector<int64_t> st = broadcast_strides(t.dims(), norm);
  const int64_t total = numel(norm);
  std::vector<int64_t> offs(static_cast<size_t>(total));
  std::vector<int64_t> idx(norm.size(), 0);
  int64_t o = 0;
  for (int64_t i = 0; i < total; ++i) {
    offs[static_cast<size_t>(i)] = o;
    for (size_t d = norm.size(); d-- > 0;) {
      if (++idx[d] < norm[d]) {
        o += st[d];
        break;
      }
      o -= st[d] * (norm[d] - 1);
      idx[d] = 0;
    }
  }
  return offs;
}

Status layer_norm(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  const DType dt = x.dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, layer_norm);
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.error(ErrorCode::SHAPE_MISMATCH, "X must have rank >= 1, got a scalar");
  GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.attr_int("axis", -1), rank));
  const Dims norm(x.dims().begin() + axis, x.dims().end());
  const int64_t cols = numel(norm);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const Tensor& scale = ctx.input(1);
  const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (scale.dtype() != dt || (bias && bias->dtype() != dt))
    return ctx.error(ErrorCode::DTYPE_UNSUPPORTED, "Scale/B must have X's dtype ", dtype_name(dt));
  GBX_ASSIGN_OR_RETURN(std::vector<int64_t> soff, broadcast_offsets(ctx, "Scale", scale, norm));
  std::vector<int64_t> boff;
  if (bias) {
    GBX_ASSIGN_OR_RETURN(boff, broadcast_offsets(ctx, "B", *bias, norm));
  }
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  const int64_t stash = ctx.attr_int("stash_type", 1);
  const DType stat_dt = stash == static_cast<int64_t>(DType::F64) ? DType::F64 : DType::F32;

  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, x.dims()));
  std::vector<double> mean(static_cast<size_t>(rows)), inv(static_cast<size_t>(rows));
  if (dt == DType::F32)
    layer_norm_typed<float>(x.data<float>(), y.data<float>(), rows, cols, scale.data<float>(), soff,
                            bias ? bias->data<float>() : nullptr, boff, eps, mean.data(), inv.data());
  else
    layer_norm_typed<double>(x.data<double>(), y.data<double>(), rows, cols, scale.data<double>(), soff,
                             bias ? bias->data<double>() : nullptr, boff, eps, mean.data(), inv.data());
  ctx.set_output(0, std::move(y));
  Dims stat_dims(x.dims().begin(), x.dims().begin() + axis);
  stat_dims.resize(x.rank(), 1);
  for (size_t k = 1; k <= 2; ++k) {
    if (!ctx.wants_output(k)) continue;
    const std::vector<double>& src = k == 1 ? mean : inv;
    GBX_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(stat_dt, stat_dims));
    for (int64_t r = 0; r < rows; ++r) {
      if (stat_dt == DType::F32) t.data<float>()[r] = static_cast<float>(src[static_cast<size_t>(r)]);
      else t.data<double>()[r] = src[static_cast<size_t>(r)];
    }
    ctx.set_output(k, std::move(t));
  }
  return Status::OK();
}

GBX_REGISTER_KERNEL(
    {"", "LayerNormalization", 17, 18, kEngineRef, {DType::F32, DType::F64, DType::F16, DType::BF16}, layer_norm});

}  // namespace
}  // namespace gearbox::ref
