// Reshape, Flatten, Squeeze, Unsqueeze and Identity (reference). All are
// zero-copy: the output shares the input's buffer via Tensor::reshaped(), which
// is safe because kernels never write into their inputs. Identity forwards any
// value (tensor, sequence, optional).
#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

Status reshape(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  GBX_ASSIGN_OR_RETURN(auto shape, read_ints(ctx, ctx.input(1)));
  const bool allowzero = ctx.opset() >= 14 && ctx.attr_int("allowzero", 0) != 0;
  Dims out(shape.size());
  int infer = -1;
  int64_t known = 1;
  bool has_zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t s = shape[i];
    if (s == -1) {
      if (infer >= 0)
        return ctx.error(ErrorCode::INVALID_ARGUMENT, "shape ", to_string(Dims(shape)), " has more than one -1");
      infer = int(i);
      out[i] = 1;
      continue;
    }
    if (s < -1) return ctx.error(ErrorCode::INVALID_ARGUMENT, "shape ", to_string(Dims(shape)), " has dim ", s);
    if (s == 0 && !allowzero) {
      if (i >= x.rank())
        return ctx.error(ErrorCode::SHAPE_MISMATCH, "shape ", to_string(Dims(shape)), " copies dim ", i,
                         " (0) but input ", describe(x), " has rank ", x.rank());
      s = x.dim(i);
    }
    if (s == 0) has_zero = true;
    out[i] = s;
    if (s != 0 && known > (int64_t(1) << 62) / s)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "shape ", to_string(Dims(shape)), " overflows");
    known *= s;
  }
  if (allowzero && has_zero && infer >= 0)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "shape ", to_string(Dims(shape)),
                     " has both 0 and -1 with allowzero=1");
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "cannot reshape ", describe(x), " to ", to_string(Dims(shape)));
    out[size_t(infer)] = x.numel() / known;
  } else if (known != x.numel()) {
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "cannot reshape ", describe(x), " (", x.numel(), " elements) to ",
                     to_string(out));
  }
  ctx.set_output(0, x.reshaped(std::move(out)));
  return Status::OK();
}

Status flatten(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const int64_t rank = int64_t(x.rank());
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "axis ", ctx.attr_int("axis", 1), " is out of range for ",
                     describe(x));
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(size_t(i));
  int64_t inner = 1;
  for (int64_t i = axis; i < rank; ++i) inner *= x.dim(size_t(i));
  ctx.set_output(0, x.reshaped({outer, inner}));
  return Status::OK();
}

Status squeeze(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const int64_t rank = int64_t(x.rank());
  GBX_ASSIGN_OR_RETURN(auto axes, ints_from_input_or_attr(ctx, 1, ctx.opset() >= 13, "axes"));
  std::vector<bool> drop(size_t(rank), false);
  // An empty axes list means "all unit dims", as when axes is omitted
  // (onnxruntime agrees).
  if (axes && !axes->empty()) {
    GBX_ASSIGN_OR_RETURN(auto norm, normalize_axes(ctx, *axes, rank));
    for (int64_t a : norm) {
      if (x.dim(size_t(a)) != 1)
        return ctx.error(ErrorCode::SHAPE_MISMATCH, "cannot squeeze axis ", a, " of ", describe(x),
                         ": its size is not 1");
      drop[size_t(a)] = true;
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) drop[size_t(i)] = x.dim(size_t(i)) == 1;
  }
  Dims out;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[size_t(i)]) out.push_back(x.dim(size_t(i)));
  ctx.set_output(0, x.reshaped(std::move(out)));
  return Status::OK();
}

Status unsqueeze(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  GBX_ASSIGN_OR_RETURN(auto axes, ints_from_input_or_attr(ctx, 1, ctx.opset() >= 13, "axes"));
  if (!axes) return ctx.error(ErrorCode::INVALID_ARGUMENT, "Unsqueeze needs axes");
  const int64_t out_rank = int64_t(x.rank() + axes->size());
  GBX_ASSIGN_OR_RETURN(auto norm, normalize_axes(ctx, *axes, out_rank));
  std::vector<bool> inserted(size_t(out_rank), false);
  for (int64_t a : norm) inserted[size_t(a)] = true;
  Dims out;
  size_t j = 0;
  for (int64_t i = 0; i < out_rank; ++i) out.push_back(inserted[size_t(i)] ? 1 : x.dim(j++));
  ctx.set_output(0, x.reshaped(std::move(out)));
  return Status::OK();
}

Status identity(KernelContext& ctx) {
  ctx.set_output_value(0, ctx.input_value(0));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Reshape", 5, 18, kEngineRef, {}, reshape});
GBX_REGISTER_KERNEL({"", "Flatten", 1, 18, kEngineRef, {}, flatten});
GBX_REGISTER_KERNEL({"", "Squeeze", 1, 18, kEngineRef, {}, squeeze});
GBX_REGISTER_KERNEL({"", "Unsqueeze", 1, 18, kEngineRef, {}, unsqueeze});
GBX_REGISTER_KERNEL({"", "Identity", 1, 18, kEngineRef, {}, identity});

}  // namespace
}  // namespace gearbox::ref
