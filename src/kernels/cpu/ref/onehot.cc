// OneHot (reference). Indices and depth may be any numeric type (floats are
// truncated); indices outside [-depth, depth) give an all-off row, as the spec
// says (not an error).
#include <cmath>

#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

Status one_hot(KernelContext& ctx) {
  for (size_t i = 0; i < 3; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& ind = ctx.input(0);
  const Tensor& dep = ctx.input(1);
  const Tensor& vals = ctx.input(2);
  if (!is_integer(ind.dtype()) && !is_float(ind.dtype()))
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "indices must be numeric, got ", describe(ind));
  if (dep.numel() != 1 || (!is_integer(dep.dtype()) && !is_float(dep.dtype())))
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "depth must be one number, got ", describe(dep));
  if (vals.numel() != 2)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "values must hold [off, on], got ", describe(vals));
  const double dd = dep.at_double(0);
  if (!(dd >= 1 && dd < 9.2e18)) return ctx.error(ErrorCode::INVALID_ARGUMENT, "depth ", dd, " must be >= 1");
  const int64_t depth = int64_t(dd);
  const int64_t out_rank = int64_t(ind.rank()) + 1;
  GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.attr_int("axis", -1), out_rank));
  Dims out = ind.dims();
  out.insert(out.begin() + axis, depth);
  GBX_RETURN_IF_ERROR(checked_numel(ctx, out).status());
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, vals.dtype(), out));
  int64_t inner = 1;
  for (size_t d = size_t(axis); d < ind.rank(); ++d) inner *= ind.dim(d);
  const ElemCopier cp(vals, y);
  for (int64_t i = 0; i < y.numel(); ++i) cp.one(0, i);
  for (int64_t i = 0; i < ind.numel(); ++i) {
    const double v = ind.at_double(i);
    // Range-check in double first: casting an out-of-range double to int64 is undefined.
    if (std::isnan(v) || v <= -double(depth) - 1 || v >= double(depth)) continue;
    int64_t k = int64_t(v);
    if (k < -depth || k >= depth) continue;
    if (k < 0) k += depth;
    const int64_t o = i / inner, in = i % inner;
    cp.one(1, (o * depth + k) * inner + in);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "OneHot", 9, 18, kEngineRef, {}, one_hot});

}  // namespace
}  // namespace gearbox::ref
