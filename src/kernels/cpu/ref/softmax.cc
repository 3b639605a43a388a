// Softmax, LogSoftmax and Hardmax (reference, opsets 1-17).
//
// Before opset 13 the input is coerced to 2-D at `axis` (default 1): every row of
// [prod(dims[:axis]), prod(dims[axis:])] is normalized. From opset 13 the op works along the
// single dim `axis` (default -1). Both are expressed as (outer, len, inner) groups: element j
// of a group sits at outer * len * inner + j * inner + inner_index.
// Softmax subtracts the group max before exponentiating, so large inputs do not overflow;
// sums accumulate in double. Hardmax is one-hot at the first maximum.
// float32/float64, float16/bfloat16 computed in f32.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/ref/nn_util.h"
#include "kernels/cpu/ref/ref_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

enum class Kind { Softmax, LogSoftmax, Hardmax };

template <typename T, Kind kKind>
void softmax_typed(const T* x, T* y, int64_t outer, int64_t len, int64_t inner) {
#pragma omp parallel for schedule(static) if (outer * len * inner > 32768)
  for (int64_t g = 0; g < outer * inner; ++g) {
    const int64_t o = g / inner, in = g % inner;
    const T* xg = x + o * len * inner + in;
    T* yg = y + o * len * inner + in;
    if constexpr (kKind == Kind::Hardmax) {
      int64_t best = 0;
      for (int64_t j = 1; j < len; ++j)
        if (xg[j * inner] > xg[best * inner]) best = j;
      for (int64_t j = 0; j < len; ++j) yg[j * inner] = T(j == best ? 1 : 0);
    } else {
      T mx = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < len; ++j) mx = std::max(mx, xg[j * inner]);
      double sum = 0;
      if constexpr (kKind == Kind::Softmax) {
        for (int64_t j = 0; j < len; ++j) {
          const T e = std::exp(xg[j * inner] - mx);
          yg[j * inner] = e;
          sum += static_cast<double>(e);
        }
        const T inv = static_cast<T>(1.0 / sum);
        for (int64_t j = 0; j < len; ++j) yg[j * inner] *= inv;
      } else {
        for (int64_t j = 0; j < len; ++j) sum += static_cast<double>(std::exp(xg[j * inner] - mx));
        const T lse = static_cast<T>(std::log(sum));
        for (int64_t j = 0; j < len; ++j) yg[j * inner] = xg[j * inner] - mx - lse;
      }
    }
  }
}

template <Kind kKind>
Status softmax(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const DType dt = x.dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, softmax<kKind>);
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const bool legacy = ctx.opset() < 13;
  GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.attr_int("axis", legacy ? 1 : -1), rank));
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, x.dims()));
  if (x.numel() > 0) {
    int64_t outer = 1, len = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i) {
      const int64_t d = x.dim(static_cast<size_t>(i));
      if (i < axis) outer *= d;
      else if (i == axis || legacy) len *= d;
      else inner *= d;
    }
    if (dt == DType::F32) softmax_typed<float, kKind>(x.data<float>(), y.data<float>(), outer, len, inner);
    else softmax_typed<double, kKind>(x.data<double>(), y.data<double>(), outer, len, inner);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

const std::vector<DType> kFloats{DType::F32, DType::F64, DType::F16, DType::BF16};
GBX_REGISTER_KERNEL({"", "Softmax", 1, 18, kEngineRef, kFloats, softmax<Kind::Softmax>});
GBX_REGISTER_KERNEL({"", "LogSoftmax", 1, 18, kEngineRef, kFloats, softmax<Kind::LogSoftmax>});
GBX_REGISTER_KERNEL({"", "Hardmax", 1, 18, kEngineRef, kFloats, softmax<Kind::Hardmax>});

}  // namespace
}  // namespace gearbox::ref
