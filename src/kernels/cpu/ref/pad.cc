// Pad (reference): constant, reflect and edge modes, and wrap from opset 19; pads (and the
// constant value) are attributes before opset 11 and inputs from 11; from 18 an optional axes
// input names the axes pads apply to. Negative pads crop. Opset 21 only adds int4 types.
// CenterCropPad (18) is a constant pad whose per-axis pads centre the input.
// Each output row maps its outer coordinates once and memcpy's the part of the
// row that lies inside the input.
#include <algorithm>

#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

enum class PadMode { Constant, Reflect, Edge, Wrap };

// Input coordinate for output coordinate o along a dim of size d padded by b in
// front; -1 means "use the constant".
int64_t source_coord(int64_t o, int64_t d, int64_t b, PadMode mode) {
  int64_t c = o - b;
  if (c >= 0 && c < d) return c;
  switch (mode) {
    case PadMode::Constant:
      return -1;
    case PadMode::Edge:
      return std::clamp<int64_t>(c, 0, d - 1);
    case PadMode::Wrap:
      return ((c % d) + d) % d;
    case PadMode::Reflect: {
      if (d == 1) return 0;
      const int64_t p = 2 * (d - 1);
      c = ((c % p) + p) % p;
      return c >= d ? p - c : c;
    }
  }
  return -1;
}

Status pad_tensor(KernelContext& ctx, const Tensor& x, const std::vector<int64_t>& pads, PadMode mode,
                  const Tensor& cv);

Status pad(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const int64_t rank = int64_t(x.rank());
  const std::string mode_s = ctx.attr_string("mode", "constant");
  PadMode mode;
  if (mode_s == "constant") mode = PadMode::Constant;
  else if (mode_s == "reflect") mode = PadMode::Reflect;
  else if (mode_s == "edge") mode = PadMode::Edge;
  else if (mode_s == "wrap" && ctx.opset() >= 19) mode = PadMode::Wrap;
  else
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "mode must be constant, reflect, edge",
                     ctx.opset() >= 19 ? " or wrap" : " (wrap from opset 19)", ", got '", mode_s, "'");

  const bool inputs = ctx.opset() >= 11;
  GBX_ASSIGN_OR_RETURN(auto pads_opt, ints_from_input_or_attr(ctx, 1, inputs, "pads"));
  if (!pads_opt) return ctx.error(ErrorCode::INVALID_ARGUMENT, "Pad needs pads");
  std::vector<int64_t> pads = *pads_opt;
  // Pad-18's axes input: pads holds begins then ends for those axes only; the others get 0.
  if (ctx.opset() >= 18 && ctx.has_input(3)) {
    GBX_ASSIGN_OR_RETURN(auto axes_opt, ints_from_input_or_attr(ctx, 3, true, "axes"));
    const std::vector<int64_t> given_axes = axes_opt ? *axes_opt : std::vector<int64_t>{};
    if (pads.size() != 2 * given_axes.size())
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "pads has ", pads.size(), " entries but axes names ",
                       given_axes.size(), " axes (it needs ", 2 * given_axes.size(), ")");
    GBX_ASSIGN_OR_RETURN(auto axes, normalize_axes(ctx, given_axes, rank));
    std::vector<int64_t> full(size_t(2 * rank), 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      full[size_t(axes[i])] = pads[i];
      full[size_t(axes[i] + rank)] = pads[i + axes.size()];
    }
    pads = std::move(full);
  }
  if (int64_t(pads.size()) != 2 * rank)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "pads has ", pads.size(), " entries but input ", describe(x),
                     " needs ", 2 * rank);

  // The constant as a one-element tensor of x's dtype, so it is copied like any
  // element.
  Tensor cv(x.dtype(), {1});
  if (inputs) {
    if (ctx.has_input(2)) {
      GBX_RETURN_IF_ERROR(ctx.require_tensor(2));
      const Tensor& c = ctx.input(2);
      if (c.dtype() != x.dtype() || c.numel() != 1)
        return ctx.error(ErrorCode::INVALID_ARGUMENT, "constant_value ", describe(c),
                         " must be one value of the data's dtype ", dtype_name(x.dtype()));
      ElemCopier(c, cv).one(0, 0);
    }
  } else {
    const float v = ctx.attr_float("value", 0.0f);
    visit_numeric(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      cv.data<T>()[0] = static_cast<T>(static_cast<compute_t<T>>(v));
    });
  }

  return pad_tensor(ctx, x, pads, mode, cv);
}

// CenterCropPad-18 (X, shape; axes): each named axis cropped or zero-padded to shape[i] around
// its centre, the odd element going to the end (crop start (in - out) / 2, front padding
// (out - in) / 2, both rounded down): a constant Pad with per-axis begin and end.
Status center_crop_pad(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  const int64_t rank = int64_t(x.rank());
  GBX_ASSIGN_OR_RETURN(std::vector<int64_t> shape, read_ints(ctx, ctx.input(1)));
  std::vector<int64_t> axes;
  if (ctx.has_attr("axes")) {
    GBX_ASSIGN_OR_RETURN(axes, normalize_axes(ctx, ctx.attr_ints("axes"), rank));
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  if (shape.size() != axes.size())
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "shape has ", shape.size(), " values for ", axes.size(), " axes of ",
                     describe(x));
  std::vector<int64_t> pads(size_t(2 * rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t in = x.dim(size_t(axes[i])), out = shape[i];
    if (out < 0) return ctx.error(ErrorCode::INVALID_ARGUMENT, "shape[", i, "] = ", out, " is negative");
    if (out > (int64_t(1) << 40))
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "shape[", i, "] = ", out, " is too large");
    const int64_t begin = out >= in ? (out - in) / 2 : -((in - out) / 2);
    pads[size_t(axes[i])] = begin;
    pads[size_t(axes[i] + rank)] = out - in - begin;
  }
  return pad_tensor(ctx, x, pads, PadMode::Constant, Tensor(x.dtype(), {1}));
}

// x padded by pads (begins then ends; negative ones crop), `cv` a one-element tensor of x's
// dtype for constant padding.
Status pad_tensor(KernelContext& ctx, const Tensor& x, const std::vector<int64_t>& pads, PadMode mode,
                  const Tensor& cv) {
  const int64_t rank = int64_t(x.rank());
  // Pads past 2^40 cannot be allocated anyway; bounding them keeps d + b + e from overflowing.
  constexpr int64_t kMaxPad = int64_t(1) << 40;
  Dims out(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t b = pads[size_t(i)], e = pads[size_t(i + rank)], d = x.dim(size_t(i));
    if (b < -d || e < -d || b > kMaxPad || e > kMaxPad || d + b + e < 0)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "pads ", to_string(Dims(pads)), " are out of range for axis ", i,
                       " of ", describe(x));
    out[size_t(i)] = d + b + e;
    if (mode != PadMode::Constant && d == 0 && out[size_t(i)] > 0)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, ctx.attr_string("mode", "constant"), " padding of empty axis ", i,
                       " of ", describe(x));
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), out));
  if (y.numel() == 0) {
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  if (rank == 0) {
    ctx.set_output(0, x);
    return Status::OK();
  }
  const ElemCopier cp(x, y), cc(cv, y);
  const auto xs = strides_of(x.dims());
  const int64_t last = out.back(), d_last = x.dims().back(), b_last = pads[size_t(rank - 1)];
  const int64_t rows = y.numel() / last;
  std::vector<int64_t> pos(size_t(rank - 1), 0);
  // The part of each row that is a contiguous run of the input row.
  const int64_t mid_lo = std::clamp<int64_t>(b_last, 0, last), mid_hi = std::clamp<int64_t>(b_last + d_last, 0, last);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t dof = r * last;
    int64_t src = 0;
    bool inside = true;
    for (int64_t d = 0; d < rank - 1; ++d) {
      const int64_t c = source_coord(pos[size_t(d)], x.dim(size_t(d)), pads[size_t(d)], mode);
      if (c < 0) {
        inside = false;
        break;
      }
      src += c * xs[size_t(d)];
    }
    if (!inside) {
      for (int64_t j = 0; j < last; ++j) cc.one(0, dof + j);
    } else {
      for (int64_t j = 0; j < mid_lo; ++j) {
        const int64_t c = source_coord(j, d_last, b_last, mode);
        c < 0 ? cc.one(0, dof + j) : cp.one(src + c, dof + j);
      }
      if (mid_hi > mid_lo) cp.run(src + (mid_lo - b_last), dof + mid_lo, mid_hi - mid_lo);
      for (int64_t j = std::max(mid_hi, mid_lo); j < last; ++j) {
        const int64_t c = source_coord(j, d_last, b_last, mode);
        c < 0 ? cc.one(0, dof + j) : cp.one(src + c, dof + j);
      }
    }
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++pos[size_t(d)] < out[size_t(d)]) break;
      pos[size_t(d)] = 0;
    }
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Pad", 2, 21, kEngineRef, {}, pad});
GBX_REGISTER_KERNEL({"", "CenterCropPad", 18, 21, kEngineRef, {}, center_crop_pad});

}  // namespace
}  // namespace gearbox::ref
