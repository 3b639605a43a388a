// GroupNormalization (reference, opsets 18-21): the C channels of each image split into
// num_groups groups of C / num_groups; each group is normalized by its own population mean and
// variance (over its channels and all spatial positions, accumulated in double), then scaled and
// shifted. Opset 18 has one scale and bias per group, opset 21 one per channel (its stash_type,
// the precision of the statistics, asks for at least float32: double is that). float32/float64,
// float16/bfloat16 in f32.
#include <cmath>
#include <vector>

#include "kernels/cpu/ref/nn_util.h"
#include "kernels/cpu/ref/ref_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

Status group_norm(KernelContext& ctx) {
  for (size_t i = 0; i < 3; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& x = ctx.input(0);
  const DType dt = x.dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, group_norm);
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  if (x.rank() < 2)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "X ", to_string(x.dims()), " must have rank >= 2 (N x C x D1 ...)");
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t groups = ctx.attr_int("num_groups", 0);
  if (groups <= 0 || c % groups != 0)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "num_groups ", groups, " must be positive and divide the ", c,
                     " channels of X ", to_string(x.dims()));
  const int64_t plane = n * c == 0 ? 0 : x.numel() / (n * c);
  // Opset 18: scale and bias per group; 21: per channel.
  const bool per_channel = ctx.opset() >= 21;
  const int64_t expected = per_channel ? c : groups;
  for (size_t i = 1; i < 3; ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != dt || t.rank() != 1 || t.dim(0) != expected)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, i == 1 ? "scale " : "bias ", describe(t), " must be ", dtype_name(dt),
                       "[", expected, "] (one per ", per_channel ? "channel" : "group", " at opset ", ctx.opset(), ")");
  }
  std::vector<double> scale = read_doubles(ctx.input(1)), bias = read_doubles(ctx.input(2));
  if (!per_channel) {
    std::vector<double> s(static_cast<size_t>(c)), b(static_cast<size_t>(c));
    for (int64_t ch = 0; ch < c; ++ch) {
      s[size_t(ch)] = scale[size_t(ch / (c / groups))];
      b[size_t(ch)] = bias[size_t(ch / (c / groups))];
    }
    scale = std::move(s);
    bias = std::move(b);
  }
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, x.dims()));
  if (dt == DType::F32)
    nn::normalize_channel_groups<float>(x.data<float>(), y.data<float>(), n, c, groups, plane, scale, bias, eps);
  else nn::normalize_channel_groups<double>(x.data<double>(), y.data<double>(), n, c, groups, plane, scale, bias, eps);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL(
    {"", "GroupNormalization", 18, 21, kEngineRef, {DType::F32, DType::F64, DType::F16, DType::BF16}, group_norm});

}  // namespace
}  // namespace gearbox::ref
