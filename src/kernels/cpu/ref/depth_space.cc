// DepthToSpace (DCR and CRD modes) and SpaceToDepth (reference): each is a
// reshape to 6-d, a fixed permutation and a reshape back, done as one strided
// copy.
#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

// Copies x viewed as `view` dims, permuted by perm, into a new tensor of dims
// `out`.
Status permuted_copy(KernelContext& ctx, const Tensor& x, const Dims& view, const std::vector<int64_t>& perm,
                     const Dims& out) {
  const auto vs = strides_of(view);
  Dims pd;
  std::vector<int64_t> ps;
  for (int64_t p : perm) {
    pd.push_back(view[size_t(p)]);
    ps.push_back(vs[size_t(p)]);
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), out));
  strided_copy(x, 0, pd, ps, y);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status depth_to_space(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const int64_t b = ctx.attr_int("blocksize", 0);
  if (x.rank() != 4) return ctx.error(ErrorCode::SHAPE_MISMATCH, "input must be 4-d, got ", describe(x));
  if (b <= 0) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "blocksize must be positive, got ", b);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (c % (b * b) != 0)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "channels of ", describe(x),
                     " are not divisible by blocksize^2 = ", b * b);
  const int64_t oc = c / (b * b);
  const std::string mode = ctx.opset() >= 11 ? ctx.attr_string("mode", "DCR") : "DCR";
  if (mode == "DCR") return permuted_copy(ctx, x, {n, b, b, oc, h, w}, {0, 3, 4, 1, 5, 2}, {n, oc, h * b, w * b});
  if (mode == "CRD") return permuted_copy(ctx, x, {n, oc, b, b, h, w}, {0, 1, 4, 2, 5, 3}, {n, oc, h * b, w * b});
  return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "mode must be DCR or CRD, got '", mode, "'");
}

Status space_to_depth(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const int64_t b = ctx.attr_int("blocksize", 0);
  if (x.rank() != 4) return ctx.error(ErrorCode::SHAPE_MISMATCH, "input must be 4-d, got ", describe(x));
  if (b <= 0) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "blocksize must be positive, got ", b);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (h % b != 0 || w % b != 0)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "spatial dims of ", describe(x), " are not divisible by blocksize ", b);
  return permuted_copy(ctx, x, {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4}, {n, c * b * b, h / b, w / b});
}

GBX_REGISTER_KERNEL({"", "DepthToSpace", 1, 18, kEngineRef, {}, depth_to_space});
GBX_REGISTER_KERNEL({"", "SpaceToDepth", 1, 18, kEngineRef, {}, space_to_depth});

}  // namespace
}  // namespace gearbox::ref
