// LRN (reference, opsets 1-17): local response normalization across channels,
// y = x / (bias + alpha / size * sum_{c' in window(c)} x[c']^2) ^ beta, with the window
// [c - floor((size-1)/2), c + ceil((size-1)/2)] clipped to the channels. Sums in double.
// float32/float64, float16/bfloat16 computed in f32.
#include <cmath>

#include "kernels/cpu/ref/nn_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

template <typename T>
void lrn_typed(const T* x, T* y, int64_t n, int64_t c, int64_t plane, int64_t size, double alpha, double beta,
               double bias) {
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
#pragma omp parallel for schedule(static) if (n * c * plane > 32768)
  for (int64_t pl = 0; pl < n * c; ++pl) {
    const int64_t img = pl / c, ch = pl % c;
    const int64_t c0 = std::max<int64_t>(0, ch - lo), c1 = std::min<int64_t>(c - 1, ch + hi);
    for (int64_t i = 0; i < plane; ++i) {
      double sq = 0;
      for (int64_t k = c0; k <= c1; ++k) {
        const double v = static_cast<double>(x[(img * c + k) * plane + i]);
        sq += v * v;
      }
      const double v = static_cast<double>(x[pl * plane + i]);
      y[pl * plane + i] = static_cast<T>(v / std::pow(bias + alpha / static_cast<double>(size) * sq, beta));
    }
  }
}

Status lrn(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const DType dt = x.dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, lrn);
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  if (x.rank() < 3)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "X ", to_string(x.dims()), " must have rank >= 3 (N x C x D1 ...)");
  const int64_t size = ctx.attr_int("size", 0);
  if (size < 1) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "attribute size ", size, " must be >= 1");
  const double alpha = ctx.attr_float("alpha", 1e-4f), beta = ctx.attr_float("beta", 0.75f),
               bias = ctx.attr_float("bias", 1.0f);
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t plane = n * c == 0 ? 0 : x.numel() / (n * c);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, x.dims()));
  if (dt == DType::F32) lrn_typed<float>(x.data<float>(), y.data<float>(), n, c, plane, size, alpha, beta, bias);
  else lrn_typed<double>(x.data<double>(), y.data<double>(), n, c, plane, size, alpha, beta, bias);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "LRN", 1, 18, kEngineRef, {DType::F32, DType::F64, DType::F16, DType::BF16}, lrn});

}  // namespace
}  // namespace gearbox::ref
