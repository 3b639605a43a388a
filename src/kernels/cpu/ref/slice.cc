// Slice (reference): starts/ends/axes as attributes before opset 10, as inputs
// (plus steps) from 10. Out-of-range starts/ends are clamped as the spec says
// (never an error); the result is one strided copy, so negative steps need no
// special path.
#include <algorithm>

#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

Status slice(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const int64_t rank = int64_t(x.rank());
  const bool inputs = ctx.opset() >= 10;
  GBX_ASSIGN_OR_RETURN(auto starts, ints_from_input_or_attr(ctx, 1, inputs, "starts"));
  GBX_ASSIGN_OR_RETURN(auto ends, ints_from_input_or_attr(ctx, 2, inputs, "ends"));
  GBX_ASSIGN_OR_RETURN(auto axes_in, ints_from_input_or_attr(ctx, 3, inputs, "axes"));
  std::optional<std::vector<int64_t>> steps_in;
  if (inputs) {
    GBX_ASSIGN_OR_RETURN(steps_in, ints_from_input_or_attr(ctx, 4, true, ""));
  }
  if (!starts || !ends) return ctx.error(ErrorCode::INVALID_ARGUMENT, "Slice needs starts and ends");
  const size_t n = starts->size();
  if (ends->size() != n)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "starts has ", n, " entries but ends has ", ends->size());
  std::vector<int64_t> axes;
  if (axes_in) {
    axes = *axes_in;
  } else {
    for (size_t i = 0; i < n; ++i) axes.push_back(int64_t(i));
  }
  if (axes.size() != n)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "axes has ", axes.size(), " entries but starts has ", n);
  std::vector<int64_t> steps = steps_in ? *steps_in : std::vector<int64_t>(n, 1);
  if (steps.size() != n)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "steps has ", steps.size(), " entries but starts has ", n);
  GBX_ASSIGN_OR_RETURN(axes, normalize_axes(ctx, axes, rank));

  const auto in_strides = strides_of(x.dims());
  Dims out = x.dims();
  std::vector<int64_t> strides = in_strides;
  int64_t base = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t a = size_t(axes[i]);
    const int64_t dim = x.dim(a);
    int64_t step = steps[i];
    if (step == 0) return ctx.error(ErrorCode::INVALID_ARGUMENT, "step for axis ", a, " is 0");
    // A step longer than the dim selects at most one element; capping it keeps
    // the stride arithmetic below from overflowing on steps like INT64_MIN.
    step = std::clamp<int64_t>(step, -std::max<int64_t>(dim, 1), std::max<int64_t>(dim, 1));
    int64_t s = (*starts)[i], e = (*ends)[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t count;
    if (dim == 0) {
      count = 0;
    } else if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > s ? (e - s - 1) / step + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      count = s > e ? (s - e - 1) / (-step) + 1 : 0;
    }
    out[a] = count;
    if (count > 0) base += s * in_strides[a];
    strides[a] = in_strides[a] * step;
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), out));
  strided_copy(x, base, out, strides, y);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Slice", 1, 18, kEngineRef, {}, slice});

}  // namespace
}  // namespace gearbox::ref
