// InstanceNormalization (reference, opsets 6-17): per (image, channel) plane,
// y = scale[c] * (x - mean) / sqrt(var + epsilon) + B[c], with the population mean/variance
// of the plane accumulated in double (two passes). float32/float64, float16/bfloat16 in f32.
#include <cmath>
#include <vector>

#include "kernels/cpu/ref/nn_util.h"
#include "kernels/cpu/ref/ref_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

Status instance_norm(KernelContext& ctx) {
  for (size_t i = 0; i < 3; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& x = ctx.input(0);
  const DType dt = x.dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, instance_norm);
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  if (x.rank() < 3)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "X ", to_string(x.dims()), " must have rank >= 3 (N x C x D1 ...)");
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t plane = n * c == 0 ? 0 : x.numel() / (n * c);
  for (size_t i = 1; i < 3; ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != dt || t.rank() != 1 || t.dim(0) != c)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, i == 1 ? "scale " : "B ", describe(t), " must be ", dtype_name(dt),
                       "[", c, "]");
  }
  const std::vector<double> scale = read_doubles(ctx.input(1)), bias = read_doubles(ctx.input(2));
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, x.dims()));
  if (dt == DType::F32)
    nn::normalize_channel_groups<float>(x.data<float>(), y.data<float>(), n, c, c, plane, scale, bias, eps);
  else nn::normalize_channel_groups<double>(x.data<double>(), y.data<double>(), n, c, c, plane, scale, bias, eps);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL(
    {"", "InstanceNormalization", 6, 18, kEngineRef, {DType::F32, DType::F64, DType::F16, DType::BF16}, instance_norm});

}  // namespace
}  // namespace gearbox::ref
