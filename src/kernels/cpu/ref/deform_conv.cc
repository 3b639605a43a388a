// DeformConv (reference, opset 19; 2-D): a convolution whose every kernel tap samples the input
// at its usual place moved by a learned offset, optionally weighted by a mask:
//   Y[n, o, y, x] = B[o] + sum_{c in o's group, i, j} W[o, c, i, j] * m * X[n, c](py, px)
//   py = y * stride_h - pad_top + i * dilation_h + dy,  px = x * stride_w - pad_left + j * dilation_w + dx
// where (dy, dx) = offset[n, g, i, j, :, y, x] and m = mask[n, g, i, j, y, x] for the offset
// group g of channel c. X(py, px) is bilinear, each of the four neighbours outside the image
// reading 0, and the whole sample 0 when it lies a pixel or more outside (torchvision's
// deform_conv2d, which ONNX's reference follows). Accumulated in double.
#include <cmath>
#include <vector>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

double sample(const double* img, int64_t h, int64_t w, double y, double x) {
  if (y <= -1 || y >= double(h) || x <= -1 || x >= double(w)) return 0.0;
  const double fy = std::floor(y), fx = std::floor(x);
  const int64_t y0 = int64_t(fy), x0 = int64_t(fx);
  const double ly = y - fy, lx = x - fx;
  auto at = [&](int64_t yy, int64_t xx) { return yy < 0 || yy >= h || xx < 0 || xx >= w ? 0.0 : img[yy * w + xx]; };
  return (1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x0 + 1)) +
         ly * ((1 - lx) * at(y0 + 1, x0) + lx * at(y0 + 1, x0 + 1));
}

Status deform_conv(KernelContext& ctx) {
  for (size_t i = 0; i < 3; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& off = ctx.input(2);
  if (x.rank() != 4)
    return ctx.error(ErrorCode::OP_UNSUPPORTED, "DeformConv on ", describe(x),
                     ": gearbox implements the 2-D form (X of rank 4) only");
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t group = ctx.attr_int("group", 1), offset_group = ctx.attr_int("offset_group", 1);
  if (w.rank() != 4 || w.dtype() != x.dtype() || off.dtype() != x.dtype())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "W ", describe(w), " must be [M, C / group, kH, kW] of X's dtype");
  const int64_t m = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  if (group <= 0 || offset_group <= 0 || c % group != 0 || m % group != 0 || c % offset_group != 0 ||
      w.dim(1) != c / group)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "group ", group, " and offset_group ", offset_group,
                     " must divide the ", c, " input channels (and group the ", m, " output channels) of W ",
                     describe(w));
  const std::vector<int64_t> ks = ctx.attr_ints("kernel_shape", {kh, kw});
  const std::vector<int64_t> strides = ctx.attr_ints("strides", {1, 1}), dil = ctx.attr_ints("dilations", {1, 1});
  const std::vector<int64_t> pads = ctx.attr_ints("pads", {0, 0, 0, 0});
  if (ks != std::vector<int64_t>{kh, kw} || strides.size() != 2 || dil.size() != 2 || pads.size() != 4 ||
      strides[0] <= 0 || strides[1] <= 0 || dil[0] <= 0 || dil[1] <= 0 || pads[0] < 0 || pads[1] < 0 || pads[2] < 0 ||
      pads[3] < 0)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "kernel_shape (W's ", kh, "x", kw, "), strides, dilations (2 ",
                     "positive values) and pads (4 non-negative values) do not fit");
  const int64_t oh = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) / strides[0] + 1;
  const int64_t ow = (wd + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) / strides[1] + 1;
  if (oh <= 0 || ow <= 0)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "a ", kh, "x", kw, " kernel does not fit X ", describe(x));
  const int64_t taps = kh * kw;
  if (off.dims() != Dims{n, offset_group * 2 * taps, oh, ow})
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "offset ", describe(off), " must be [", n, ", ",
                     offset_group * 2 * taps, ", ", oh, ", ", ow, "]");
  std::vector<double> bias(static_cast<size_t>(m), 0.0), mask;
  if (ctx.has_input(3)) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(3));
    if (ctx.input(3).dims() != Dims{m})
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "B ", describe(ctx.input(3)), " must be [", m, "]");
    bias = read_doubles(ctx.input(3));
  }
  if (ctx.has_input(4)) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(4));
    if (ctx.input(4).dims() != Dims{n, offset_group * taps, oh, ow})
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "mask ", describe(ctx.input(4)), " must be [", n, ", ",
                       offset_group * taps, ", ", oh, ", ", ow, "]");
    mask = read_doubles(ctx.input(4));
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(x.dtype(), {n, m, oh, ow}));
  const std::vector<double> xv = read_doubles(x), wv = read_doubles(w), ov = read_doubles(off);
  std::vector<double> out(static_cast<size_t>(y.numel()));
  const int64_t cg = c / group, mg = m / group, c_per_offset = c / offset_group, plane = oh * ow;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < m; ++o) {
      const int64_t first_c = (o / mg) * cg;
      for (int64_t yy = 0; yy < oh; ++yy)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double acc = bias[size_t(o)];
          for (int64_t ci = 0; ci < cg; ++ci) {
            const int64_t ch = first_c + ci, g = ch / c_per_offset;
            const double* img = &xv[size_t((b * c + ch) * h * wd)];
            for (int64_t t = 0; t < taps; ++t) {
              const int64_t i = t / kw, j = t % kw;
              const size_t at = size_t(yy * ow + xx);
              const double dy = ov[size_t(((b * offset_group + g) * 2 * taps + 2 * t) * plane) + at];
              const double dx = ov[size_t(((b * offset_group + g) * 2 * taps + 2 * t + 1) * plane) + at];
              double v = sample(img, h, wd, double(yy * strides[0] - pads[0] + i * dil[0]) + dy,
                                double(xx * strides[1] - pads[1] + j * dil[1]) + dx);
              if (!mask.empty()) v *= mask[size_t(((b * offset_group + g) * taps + t) * plane) + at];
              acc += wv[size_t(((o * cg + ci) * kh + i) * kw + j)] * v;
            }
          }
          out[size_t(((b * m + o) * oh + yy) * ow + xx)] = acc;
        }
    }
  store_doubles(y, out);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "DeformConv", 19, 21, kEngineRef, float_dtypes(), deform_conv});

}  // namespace
}  // namespace gearbox::ref
