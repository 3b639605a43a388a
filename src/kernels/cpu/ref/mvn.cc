// MeanVarianceNormalization (reference, opsets 9-17): y = (x - mean) / (sqrt(var) + 1e-9)
// over `axes` (default [0, 2, 3]), as the ONNX function body defines it (epsilon added to the
// standard deviation). Mean and variance are computed per slice of the non-reduced dims,
// in double and in two passes. float32/float64, float16/bfloat16 computed in f32.
#include <cmath>
#include <vector>

#include "kernels/cpu/ref/nn_util.h"
#include "kernels/cpu/ref/ref_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

template <typename T>
void mvn_typed(const T* x, T* y, const Dims& dims, const std::vector<bool>& reduced) {
  // Group elements by their kept-dims index: key = offset over kept dims only.
  const size_t rank = dims.size();
  Dims kept;
  for (size_t i = 0; i < rank; ++i)
    if (!reduced[i]) kept.push_back(dims[i]);
  const int64_t groups = numel(kept);
  const int64_t total = numel(dims);
  std::vector<int64_t> key(static_cast<size_t>(total));
  {
    std::vector<int64_t> idx(rank, 0);
    for (int64_t e = 0; e < total; ++e) {
      int64_t k = 0;
      for (size_t i = 0; i < rank; ++i)
        if (!reduced[i]) k = k * dims[i] + idx[i];
      key[static_cast<size_t>(e)] = k;
      for (size_t d = rank; d-- > 0;) {
        if (++idx[d] < dims[d]) break;
        idx[d] = 0;
      }
    }
  }
  std::vector<double> sum(static_cast<size_t>(groups), 0.0), sq(static_cast<size_t>(groups), 0.0);
  std::vector<int64_t> cnt(static_cast<size_t>(groups), 0);
  for (int64_t e = 0; e < total; ++e) {
    const size_t k = static_cast<size_t>(key[static_cast<size_t>(e)]);
    sum[k] += static_cast<double>(x[e]);
    ++cnt[k];
  }
  for (size_t k = 0; k < sum.size(); ++k) sum[k] /= static_cast<double>(std::max<int64_t>(cnt[k], 1));
  for (int64_t e = 0; e < total; ++e) {
    const size_t k = static_cast<size_t>(key[static_cast<size_t>(e)]);
    const double d = static_cast<double>(x[e]) - sum[k];
    sq[k] += d * d;
  }
  for (size_t k = 0; k < sq.size(); ++k)
    sq[k] = std::sqrt(sq[k] / static_cast<double>(std::max<int64_t>(cnt[k], 1))) + 1e-9;
  for (int64_t e = 0; e < total; ++e) {
    const size_t k = static_cast<size_t>(key[static_cast<size_t>(e)]);
    y[e] = static_cast<T>((static_cast<double>(x[e]) - sum[k]) / sq[k]);
  }
}

Status mvn(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const DType dt = x.dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, mvn);
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  const int64_t rank = static_cast<int64_t>(x.rank());
  std::vector<bool> reduced(x.rank(), false);
  for (int64_t a : ctx.attr_ints("axes", {0, 2, 3})) {
    GBX_ASSIGN_OR_RETURN(int64_t ax, normalize_axis(ctx, a, rank));
    reduced[static_cast<size_t>(ax)] = true;
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, x.dims()));
  if (dt == DType::F32) mvn_typed<float>(x.data<float>(), y.data<float>(), x.dims(), reduced);
  else mvn_typed<double>(x.data<double>(), y.data<double>(), x.dims(), reduced);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL(
    {"", "MeanVarianceNormalization", 9, 18, kEngineRef, {DType::F32, DType::F64, DType::F16, DType::BF16}, mvn});

}  // namespace
}  // namespace gearbox::ref
