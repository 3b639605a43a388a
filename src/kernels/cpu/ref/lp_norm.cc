// LpNormalization (reference, opsets 1-17): y = x / ||x||_p along `axis` (default -1),
// p in {1, 2}. Norms accumulate in double; a zero norm gives 0/0 = NaN as numpy does.
// float32/float64, float16/bfloat16 computed in f32.
#include <cmath>

#include "kernels/cpu/ref/nn_util.h"
#include "kernels/cpu/ref/ref_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

template <typename T>
void lp_norm_typed(const T* x, T* y, int64_t outer, int64_t len, int64_t inner, int64_t p) {
#pragma omp parallel for schedule(static) if (outer * len * inner > 32768)
  for (int64_t g = 0; g < outer * inner; ++g) {
    const int64_t o = g / inner, in = g % inner;
    const T* xg = x + o * len * inner + in;
    T* yg = y + o * len * inner + in;
    double acc = 0;
    for (int64_t j = 0; j < len; ++j) {
      const double v = static_cast<double>(xg[j * inner]);
      acc += p == 1 ? std::fabs(v) : v * v;
    }
    const double norm = p == 1 ? acc : std::sqrt(acc);
    for (int64_t j = 0; j < len; ++j) yg[j * inner] = static_cast<T>(static_cast<double>(xg[j * inner]) / norm);
  }
}

Status lp_norm(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const DType dt = x.dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, lp_norm);
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  const int64_t p = ctx.attr_int("p", 2);
  if (p != 1 && p != 2) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "p ", p, " must be 1 or 2");
  const int64_t rank = static_cast<int64_t>(x.rank());
  GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.attr_int("axis", -1), rank));
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = x.dim(static_cast<size_t>(i));
    if (i < axis) outer *= d;
    else if (i == axis) len = d;
    else inner *= d;
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, x.dims()));
  if (x.numel() > 0) {
    if (dt == DType::F32) lp_norm_typed<float>(x.data<float>(), y.data<float>(), outer, len, inner, p);
    else lp_norm_typed<double>(x.data<double>(), y.data<double>(), outer, len, inner, p);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL(
    {"", "LpNormalization", 1, 18, kEngineRef, {DType::F32, DType::F64, DType::F16, DType::BF16}, lp_norm});

}  // namespace
}  // namespace gearbox::ref
