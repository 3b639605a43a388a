// Compress (reference): keeps the slices along axis (or elements of the
// flattened input) whose condition is true. A condition shorter than the axis
// counts as false past its end.
#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

Status compress(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x0 = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  if (cond.dtype() != DType::Bool || cond.rank() != 1)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "condition must be a 1-d bool tensor, got ", describe(cond));
  Tensor x = x0;
  int64_t axis = 0;
  if (ctx.has_attr("axis")) {
    GBX_ASSIGN_OR_RETURN(axis, normalize_axis(ctx, ctx.attr_int("axis", 0), int64_t(x0.rank())));
  } else {
    x = x0.reshaped({x0.numel()});
  }
  const int64_t dim = x.dim(size_t(axis));
  const bool* c = cond.data<bool>();
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (!c[i]) continue;
    if (i >= dim)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "condition ", describe(cond), " selects index ", i, " beyond axis ",
                       axis, " of size ", dim);
    keep.push_back(i);
  }
  Dims out = x.dims();
  out[size_t(axis)] = int64_t(keep.size());
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), out));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(size_t(d));
  for (size_t d = size_t(axis) + 1; d < x.rank(); ++d) inner *= x.dim(d);
  if (y.numel() > 0) {
    const ElemCopier cp(x, y);
    const int64_t n = int64_t(keep.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < n; ++j) cp.run((o * dim + keep[size_t(j)]) * inner, (o * n + j) * inner, inner);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Compress", 9, 18, kEngineRef, {}, compress});

}  // namespace
}  // namespace gearbox::ref
