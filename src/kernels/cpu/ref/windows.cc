// HannWindow, HammingWindow, BlackmanWindow (opset 17), reference: cosine-sum windows of
// length `size`, periodic (denominator N) or symmetric (N - 1), in output_datatype.
#include <cmath>
#include <numbers>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

// w[n] = a0 - a1 cos(2 pi n / D) + a2 cos(4 pi n / D)
Status cosine_window(KernelContext& ctx, double a0, double a1, double a2) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_ASSIGN_OR_RETURN(std::vector<int64_t> sz, read_ints(ctx, ctx.input(0)));
  if (sz.size() != 1 || sz[0] < 0 || sz[0] > (int64_t(1) << 28))
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "size must be a non-negative scalar, got ", describe(ctx.input(0)));
  const int64_t n = sz[0];
  const int64_t dt = ctx.attr_int("output_datatype", 1);
  const DType out = static_cast<DType>(dt);
  if (!dtype_is_known(static_cast<int32_t>(dt)) || out == DType::String || out == DType::Bool)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "output_datatype ", dt, " is not a numeric type");
  const bool periodic = ctx.attr_int("periodic", 1) != 0;
  const double denom = periodic ? double(n) : double(n - 1);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double x = denom > 0 ? 2 * std::numbers::pi * double(i) / denom : 0;
    v[static_cast<size_t>(i)] = a0 - a1 * std::cos(x) + a2 * std::cos(2 * x);
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(out, {n}));
  store_doubles(y, v);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status hann(KernelContext& ctx) { return cosine_window(ctx, 0.5, 0.5, 0); }
Status hamming(KernelContext& ctx) { return cosine_window(ctx, 25.0 / 46, 21.0 / 46, 0); }
Status blackman(KernelContext& ctx) { return cosine_window(ctx, 0.42, 0.5, 0.08); }

GBX_REGISTER_KERNEL({"", "HannWindow", 17, 18, kEngineRef, {DType::I32, DType::I64}, hann});
GBX_REGISTER_KERNEL({"", "HammingWindow", 17, 18, kEngineRef, {DType::I32, DType::I64}, hamming});
GBX_REGISTER_KERNEL({"", "BlackmanWindow", 17, 18, kEngineRef, {DType::I32, DType::I64}, blackman});

}  // namespace
}  // namespace gearbox::ref
