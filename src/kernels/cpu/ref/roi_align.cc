// RoiAlign (opsets 10, 16), reference, following the ONNX reference / ONNX Runtime: each
// output bin averages (or maxes) a grid of bilinear samples; samples outside [-1, size]
// contribute 0. Opset 10 behaves as coordinate_transformation_mode "output_half_pixel"
// (no half-pixel offset, ROI sizes at least 1). In "max" mode each sample contributes the
// largest of its four weighted corner values, as ONNX Runtime does.
#include <cmath>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

Status roi_align(KernelContext& ctx) {
  for (size_t i = 0; i < 3; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const Tensor& bidx = ctx.input(2);
  if (x.rank() != 4 || rois.rank() != 2 || rois.dim(1) != 4 || bidx.rank() != 1 || bidx.dim(0) != rois.dim(0))
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "expected X [N, C, H, W], rois [R, 4], batch_indices [R]; got ",
                     describe(x), ", ", describe(rois), ", ", describe(bidx));
  const std::string mode = ctx.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "mode '", mode, "' is unknown");
  const int64_t oh = ctx.attr_int("output_height", 1), ow = ctx.attr_int("output_width", 1);
  const int64_t sr = ctx.attr_int("sampling_ratio", 0);
  const double scale = ctx.attr_float("spatial_scale", 1.0f);
  const std::string ctm =
      ctx.opset() >= 16 ? ctx.attr_string("coordinate_transformation_mode", "half_pixel") : "output_half_pixel";
  if (oh <= 0 || ow <= 0 || sr < 0)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "output_height/width must be positive and sampling_ratio >= 0");
  const bool half = ctm == "half_pixel";
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), R = rois.dim(0);
  GBX_ASSIGN_OR_RETURN(std::vector<int64_t> bi, read_ints(ctx, bidx));
  const std::vector<double> xv = read_doubles(x), rv = read_doubles(rois);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(x.dtype(), {R, C, oh, ow}));
  std::vector<double> out(static_cast<size_t>(y.numel()));
  for (int64_t r = 0; r < R; ++r) {
    const int64_t b = bi[size_t(r)];
    if (b < 0 || b >= N) return ctx.error(ErrorCode::INVALID_ARGUMENT, "batch index ", b, " is outside [0, ", N, ")");
    const double off = half ? 0.5 : 0.0;
    const double* roi = &rv[size_t(r * 4)];
    const double sw = roi[0] * scale - off, sh = roi[1] * scale - off;
    double rw = roi[2] * scale - off - sw, rh = roi[3] * scale - off - sh;
    if (!half) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    const double bh = rh / double(oh), bw = rw / double(ow);
    const int64_t gh = sr > 0 ? sr : static_cast<int64_t>(std::ceil(rh / double(oh)));
    const int64_t gw = sr > 0 ? sr : static_cast<int64_t>(std::ceil(rw / double(ow)));
    const double count = double(std::max<int64_t>(gh * gw, 1));
    for (int64_t c = 0; c < C; ++c) {
      const double* img = &xv[size_t((b * C + c) * H * W)];
      for (int64_t ph = 0; ph < oh; ++ph)
        for (int64_t pw = 0; pw < ow; ++pw) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy) {
            double y = sh + double(ph) * bh + (double(iy) + 0.5) * bh / double(gh);
            for (int64_t ix = 0; ix < gw; ++ix) {
              double xx = sw + double(pw) * bw + (double(ix) + 0.5) * bw / double(gw);
              double v = 0;
              if (!(y < -1.0 || y > double(H) || xx < -1.0 || xx > double(W))) {
                double yy = std::max(y, 0.0), xc = std::max(xx, 0.0);
                int64_t yl = static_cast<int64_t>(yy), xl = static_cast<int64_t>(xc), yh, xh;
                if (yl >= H - 1) {
                  yh = yl = H - 1;
                  yy = double(yl);
                } else {
                  yh = yl + 1;
                }
                if (xl >= W - 1) {
                  xh = xl = W - 1;
                  xc = double(xl);
                } else {
                  xh = xl + 1;
                }
                double ly = yy - double(yl), lx = xc - double(xl), hy = 1 - ly, hx = 1 - lx;
                double p1 = hy * hx * img[yl * W + xl], p2 = hy * lx * img[yl * W + xh];
                double p3 = ly * hx * img[yh * W + xl], p4 = ly * lx * img[yh * W + xh];
                v = mode == "avg" ? p1 + p2 + p3 + p4 : std::max(std::max(p1, p2), std::max(p3, p4));
              }
              if (mode == "avg") acc += v;
              else acc = first ? v : std::max(acc, v);
              first = false;
            }
          }
          out[size_t(((r * C + c) * oh + ph) * ow + pw)] = mode == "avg" ? acc / count : acc;
        }
    }
  }
  store_doubles(y, out);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "RoiAlign", 10, 18, kEngineRef, float_dtypes(), roi_align});

}  // namespace
}  // namespace gearbox::ref
