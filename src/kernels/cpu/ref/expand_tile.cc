// Expand and Tile (reference). Both are strided copies: Expand reads broadcast
// dims with stride 0; Tile views the output as [r0, d0, r1, d1, ...] with
// stride 0 on each repeat dim.
#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

Status expand(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  GBX_ASSIGN_OR_RETURN(auto shape, read_ints(ctx, ctx.input(1)));
  for (int64_t s : shape)
    if (s < 0) return ctx.error(ErrorCode::INVALID_ARGUMENT, "shape ", to_string(Dims(shape)), " has a negative dim");
  GBX_ASSIGN_OR_RETURN(Dims out, broadcast_shapes(ctx, {x.dims(), Dims(shape)}));
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), out));
  strided_copy(x, 0, out, broadcast_strides(x.dims(), out), y);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status tile(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  GBX_ASSIGN_OR_RETURN(auto reps, read_ints(ctx, ctx.input(1)));
  if (reps.size() != x.rank())
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "repeats has ", reps.size(), " entries but input ", describe(x),
                     " has rank ", x.rank());
  const auto xs = strides_of(x.dims());
  Dims view, out;
  std::vector<int64_t> strides;
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) return ctx.error(ErrorCode::INVALID_ARGUMENT, "repeats[", i, "] = ", reps[i], " is negative");
    view.push_back(reps[i]);
    strides.push_back(0);
    view.push_back(x.dim(i));
    strides.push_back(xs[i]);
    int64_t o = 0;
    if (__builtin_mul_overflow(reps[i], x.dim(i), &o))
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "repeats ", to_string(Dims(reps)), " overflow for ", describe(x));
    out.push_back(o);
  }
  GBX_RETURN_IF_ERROR(checked_numel(ctx, view).status());
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), out));
  strided_copy(x, 0, view, strides, y);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Expand", 8, 18, kEngineRef, {}, expand});
GBX_REGISTER_KERNEL({"", "Tile", 6, 18, kEngineRef, {}, tile});

}  // namespace
}  // namespace gearbox::ref
