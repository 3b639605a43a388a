// Resize (opsets 10, 11-12, 13-17, 18, 19-21) and Upsample (7-9), reference.
//
// Resizing is separable: each axis whose size or scale changes is resized on its own, in
// turn, with 1-D weights (nearest: one tap; linear: two; cubic: four) computed exactly as the
// ONNX reference implementation does (onnx/backend/test/case/node/resize.py):
//   - output size = floor(in * scale) when scales are given; scale = out / in for sizes;
//   - the coordinate transform uses the *given* scale, and "output_width" in align_corners,
//     pytorch_half_pixel and tf_crop_and_resize is scale * in (not the floored size);
//   - a source coordinate that is an integer takes ratio 1 against the pixel on its left,
//     neighbours beyond the edge are clamped (edge padding);
//   - tf_crop_and_resize returns extrapolation_value where the source lies outside.
// Opset 18 adds antialiased downsampling (antialias_taps), 19 the half_pixel_symmetric
// transform (21 only int4 types).
// Opset 10 and Upsample have no transform attribute: they are asymmetric, and their nearest
// rounds down when upsampling and up when downsampling (what ONNX Runtime does).
#include <cmath>
#include <limits>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"
#include "kernels/cpu/ref/resize_geometry.h"
#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

// The linear (triangle) and cubic (Keys, coefficient A) interpolation kernels at distance t.
double linear_weight(double t) {
  t = std::abs(t);
  return t < 1 ? 1 - t : 0.0;
}
double cubic_weight(double A, double t) {
  t = std::abs(t);
  if (t < 1) return ((A + 2) * t - (A + 3)) * t * t + 1;
  if (t < 2) return (((t - 5) * t + 8) * t - 4) * A;
  return 0.0;
}

// The taps of an antialiased linear or cubic downsampling by `scale` < 1 at source coordinate xo
// (Resize-18's antialias): the filter is stretched by 1 / scale, so every input pixel under the
// output pixel's footprint contributes, and the weights are normalized to sum to 1. This is
// Pillow's resampling, which ONNX Runtime implements: the window is [floor(c - support + 0.5),
// floor(c + support + 0.5)) around c = xo + 0.5; taps past an edge count at the edge pixel, or
// not at all with exclude_outside. (The window holds about 4 / scale taps and the output about
// in * scale pixels, so an axis costs about 4 * in whatever the scale.)
std::vector<Tap> antialias_taps(const ResizeParams& p, double xo, int64_t in_len, double scale) {
  auto filter = [&](double t) { return p.mode == ResizeMode::Linear ? linear_weight(t) : cubic_weight(p.cubic_a, t); };
  const double support = (p.mode == ResizeMode::Linear ? 1.0 : 2.0) / scale;
  const double center = xo + 0.5;
  const int64_t lo = static_cast<int64_t>(std::floor(center - support + 0.5));
  const int64_t hi = static_cast<int64_t>(std::floor(center + support + 0.5));
  std::vector<Tap> taps;
  double total = 0;
  for (int64_t j = lo; j < hi; ++j) {
    if (p.exclude_outside && (j < 0 || j >= in_len)) continue;
    const double w = filter((static_cast<double>(j) - center + 0.5) * scale);
    taps.push_back({std::min<int64_t>(std::max<int64_t>(j, 0), in_len - 1), w});
    total += w;
  }
  if (total != 0)
    for (auto& tp : taps) tp.w /= total;
  return taps;
}

}  // namespace

std::vector<Tap> resize_taps(const ResizeParams& p, int64_t x, int64_t in_len, int64_t out_len, double scale,
                             double roi_start, double roi_end) {
  const double out_w = scale * static_cast<double>(in_len);
  const double xd = static_cast<double>(x);
  const double in_d = static_cast<double>(in_len);
  double xo = 0;
  const std::string& t = p.transform;
  if (p.legacy || t == "asymmetric") {
    xo = xd / scale;
  } else if (t == "half_pixel") {
    xo = (xd + 0.5) / scale - 0.5;
  } else if (t == "half_pixel_symmetric") {
    // half_pixel with the input's centre kept at the output's centre when floor(scale * in)
    // falls short of scale * in.
    const double offset = in_d / 2 * (1 - static_cast<double>(out_len) / out_w);
    xo = offset + (xd + 0.5) / scale - 0.5;
  } else if (t == "pytorch_half_pixel") {
    xo = out_w == 1 ? -0.5 : (xd + 0.5) / scale - 0.5;
  } else if (t == "align_corners") {
    xo = out_w == 1 ? 0.0 : xd * (in_d - 1) / (out_w - 1);
  } else if (t == "tf_half_pixel_for_nn") {
    xo = (xd + 0.5) / scale;
  } else {  // tf_crop_and_resize (validated by the caller)
    xo = out_w == 1 ? (roi_end - roi_start) * (in_d - 1) / 2 : xd * (roi_end - roi_start) * (in_d - 1) / (out_w - 1);
    xo += roi_start * (in_d - 1);
    if (xo < 0 || xo > in_d - 1) return {};
  }
  if (!std::isfinite(xo)) return {};  // NaN/inf roi or scale: nothing sensible to sample
  xo = std::min(std::max(xo, -1e15), 1e15);
  if (p.antialias && p.mode != ResizeMode::Nearest && scale < 1) return antialias_taps(p, xo, in_len, scale);
  auto clampi = [&](int64_t i) { return std::min<int64_t>(std::max<int64_t>(i, 0), in_len - 1); };

  if (p.mode == ResizeMode::Nearest) {
    double fl = std::floor(xo);
    int64_t i = static_cast<int64_t>(fl);
    if (xo != fl) {
      double r = xo - fl;
      const std::string& nm = p.nearest_mode;
      if (p.legacy) i = scale < 1 ? i + 1 : i;
      else if (nm == "round_prefer_ceil") i = r >= 0.5 ? i + 1 : i;
      else if (nm == "ceil") i = i + 1;
      else if (nm != "floor") i = r > 0.5 ? i + 1 : i;  // round_prefer_floor; floor: i already is
    }
    return {{clampi(i), 1.0}};
  }
  // The left neighbour and ratio in (0, 1]: an integer coordinate sits at ratio 1.
  double fl = std::floor(xo);
  int64_t base = static_cast<int64_t>(fl);
  double ratio = xo - fl;
  if (ratio == 0) {
    base -= 1;
    ratio = 1;
  }
  std::vector<Tap> taps;
  if (p.mode == ResizeMode::Linear) {
    taps = {{base, 1 - ratio}, {base + 1, ratio}};
  } else {
    const double A = p.cubic_a;
    taps = {{base - 1, cubic_weight(A, ratio + 1)},
            {base, cubic_weight(A, ratio)},
            {base + 1, cubic_weight(A, 1 - ratio)},
            {base + 2, cubic_weight(A, 2 - ratio)}};
  }
  if (p.exclude_outside) {
    double sum = 0;
    for (auto& tp : taps) {
      if (tp.idx < 0 || tp.idx >= in_len) tp.w = 0;
      sum += tp.w;
    }
    if (sum != 0)
      for (auto& tp : taps) tp.w /= sum;
  }
  for (auto& tp : taps) tp.idx = clampi(tp.idx);
  return taps;
}

namespace {

// Resizes `data` (dims) along `axis` to out_len.
std::vector<double> resize_axis(const ResizeParams& p, const std::vector<double>& data, Dims& dims, size_t axis,
                                int64_t out_len, double scale, double roi_start, double roi_end) {
  const int64_t in_len = dims[axis];
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < axis; ++i) outer *= dims[i];
  for (size_t i = axis + 1; i < dims.size(); ++i) inner *= dims[i];
  std::vector<double> out(static_cast<size_t>(outer * out_len * inner));
  for (int64_t x = 0; x < out_len; ++x) {
    std::vector<Tap> taps = resize_taps(p, x, in_len, out_len, scale, roi_start, roi_end);
    for (int64_t o = 0; o < outer; ++o) {
      double* dst = &out[static_cast<size_t>((o * out_len + x) * inner)];
      if (taps.empty()) {
        for (int64_t k = 0; k < inner; ++k) dst[k] = p.extrapolation;
        continue;
      }
      for (int64_t k = 0; k < inner; ++k) dst[k] = 0;
      for (const Tap& tp : taps) {
        const double* src = &data[static_cast<size_t>((o * in_len + tp.idx) * inner)];
        for (int64_t k = 0; k < inner; ++k) dst[k] += tp.w * src[k];
      }
    }
  }
  dims[axis] = out_len;
  return out;
}

// The output dims and per-axis scales from scales or sizes (both: Resize-18's aspect-ratio
// policies), checked.
Result<ResizeGeometry> finish_geometry(const KernelContext& ctx, const ResizeParams& p,
                                       const std::vector<double>& scales_in, const std::vector<int64_t>& sizes,
                                       const std::vector<double>& roi) {
  const Tensor& x = ctx.input(0);
  const size_t rank = x.rank();
  if (x.numel() < 0 || rank == 0)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "input must have rank >= 1, got ", describe(x));
  ResizeGeometry geo;
  geo.params = p;
  std::vector<double>& scales = geo.scales;
  Dims& out_dims = geo.out_dims;
  scales.assign(rank, 1.0);
  out_dims.assign(rank, 0);
  if (!sizes.empty()) {
    if (sizes.size() != rank)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "sizes has ", sizes.size(), " values for input ", describe(x));
    for (size_t i = 0; i < rank; ++i) {
      if (sizes[i] < 0) return ctx.error(ErrorCode::INVALID_ARGUMENT, "sizes[", i, "] = ", sizes[i], " is negative");
      out_dims[i] = sizes[i];
      // Both given (Resize-18's aspect-ratio policies): sizes give the output dims and
      // scales the coordinate transformation.
      scales[i] = scales_in.size() == rank ? scales_in[i]
                  : x.dim(i) == 0          ? 1.0
                                           : static_cast<double>(sizes[i]) / static_cast<double>(x.dim(i));
    }
  } else {
    if (scales_in.size() != rank)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "scales has ", scales_in.size(), " values for input ", describe(x),
                       " (and no sizes were given)");
    for (size_t i = 0; i < rank; ++i) {
      if (!(scales_in[i] > 0))
        return ctx.error(ErrorCode::INVALID_ARGUMENT, "scales[", i, "] = ", scales_in[i], " must be positive");
      scales[i] = scales_in[i];
      double o = std::floor(scales[i] * static_cast<double>(x.dim(i)));
      if (o > 1e12) return ctx.error(ErrorCode::INVALID_ARGUMENT, "scale ", scales[i], " gives a huge output");
      out_dims[i] = static_cast<int64_t>(o);
    }
  }
  geo.crop = !p.legacy && p.transform == "tf_crop_and_resize";
  if (geo.crop && roi.size() != 2 * rank)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "tf_crop_and_resize needs roi with ", 2 * rank, " values, got ",
                     roi.size());
  if (geo.crop) geo.roi = roi;
  return geo;
}

Status run_resize(KernelContext& ctx, const ResizeGeometry& geo) {
  const Tensor& x = ctx.input(0);
  const size_t rank = x.rank();
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(x.dtype(), geo.out_dims));
  std::vector<double> data = read_doubles(x);
  Dims dims = x.dims();
  if (x.numel() > 0 && y.numel() > 0) {
    for (size_t a = 0; a < rank; ++a) {
      if (!geo.resizes(a, dims[a])) continue;
      data = resize_axis(geo.params, data, dims, a, geo.out_dims[a], geo.scales[a], geo.roi_start(a), geo.roi_end(a));
    }
    if (!is_float(x.dtype()))  // integer images: round to nearest like a float->int resize would
      for (double& v : data) v = std::nearbyint(v);
    store_doubles(y, data);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Result<ResizeParams> read_params(const KernelContext& ctx, bool legacy) {
  ResizeParams p;
  p.legacy = legacy;
  std::string mode = ctx.attr_string("mode", "nearest");
  if (mode == "nearest") p.mode = ResizeMode::Nearest;
  else if (mode == "linear" || mode == "bilinear") p.mode = ResizeMode::Linear;
  else if (mode == "cubic" && !legacy) p.mode = ResizeMode::Cubic;
  else return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "mode '", mode, "' is not supported");
  if (!legacy) {
    p.transform = ctx.attr_string("coordinate_transformation_mode", "half_pixel");
    static const char* kTransforms[] = {"half_pixel", "pytorch_half_pixel",   "align_corners",
                                        "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    bool known = p.transform == "half_pixel_symmetric" && ctx.opset() >= 19;
    for (const char* t : kTransforms) known |= p.transform == t;
    if (!known)
      return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "coordinate_transformation_mode '", p.transform, "' is unknown");
    p.nearest_mode = ctx.attr_string("nearest_mode", "round_prefer_floor");
    if (p.nearest_mode != "round_prefer_floor" && p.nearest_mode != "round_prefer_ceil" && p.nearest_mode != "floor" &&
        p.nearest_mode != "ceil")
      return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "nearest_mode '", p.nearest_mode, "' is unknown");
    p.cubic_a = ctx.attr_float("cubic_coeff_a", -0.75f);
    p.exclude_outside = ctx.attr_int("exclude_outside", 0) != 0;
    p.extrapolation = ctx.attr_float("extrapolation_value", 0.0f);
    p.antialias = ctx.opset() >= 18 && ctx.attr_int("antialias", 0) != 0;
  }
  return p;
}

// Resize-18's additions over 13: `axes` (roi, scales and sizes name only those axes; the
// others keep their size), `keep_aspect_ratio_policy` (with sizes: not_larger / not_smaller
// resize every named axis by one scale, the smallest / largest of sizes[i] / in[i], and the
// output is round(scale * in)) and `antialias` (read by read_params).
Result<ResizeGeometry> resize18(const KernelContext& ctx, const ResizeParams& p, std::vector<double> scales,
                                std::vector<int64_t> sizes, std::vector<double> roi) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const std::string policy = ctx.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "keep_aspect_ratio_policy must be stretch, not_larger or ",
                     "not_smaller, got '", policy, "'");
  std::vector<int64_t> axes;
  if (ctx.has_attr("axes")) {
    GBX_ASSIGN_OR_RETURN(axes, normalize_axes(ctx, ctx.attr_ints("axes"), rank));
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  const size_t n = axes.size();
  if (!scales.empty() && scales.size() != n)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "scales has ", scales.size(), " values for ", n, " axes");
  if (!sizes.empty() && sizes.size() != n)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "sizes has ", sizes.size(), " values for ", n, " axes");
  if (!roi.empty() && roi.size() != 2 * n)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "roi has ", roi.size(), " values for ", n, " axes (needs ", 2 * n,
                     ")");
  std::vector<double> full_scales;
  std::vector<int64_t> full_sizes;
  if (!sizes.empty() && policy != "stretch") {
    double scale = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double in = static_cast<double>(x.dim(size_t(axes[i])));
      const double r = in == 0 ? 1.0 : static_cast<double>(sizes[i]) / in;
      scale = policy == "not_larger" ? std::min(scale, r) : std::max(scale, r);
    }
    // The output is round(scale * in) (half to even, as ONNX's reference rounds) and the
    // coordinates use `scale` itself, so sizes and scales both go to run_resize.
    full_scales.assign(size_t(rank), 1.0);
    full_sizes = x.dims();
    for (size_t i = 0; i < n; ++i) {
      full_scales[size_t(axes[i])] = scale;
      full_sizes[size_t(axes[i])] =
          static_cast<int64_t>(std::nearbyint(scale * static_cast<double>(x.dim(size_t(axes[i])))));
    }
  } else if (!sizes.empty()) {
    full_sizes = x.dims();
    for (size_t i = 0; i < n; ++i) full_sizes[size_t(axes[i])] = sizes[i];
  } else {
    full_scales.assign(size_t(rank), 1.0);
    for (size_t i = 0; i < n; ++i) full_scales[size_t(axes[i])] = scales[i];
  }
  std::vector<double> full_roi;
  if (!roi.empty()) {
    full_roi.assign(size_t(2 * rank), 0.0);
    for (int64_t a = 0; a < rank; ++a) full_roi[size_t(a + rank)] = 1.0;
    for (size_t i = 0; i < n; ++i) {
      full_roi[size_t(axes[i])] = roi[i];
      full_roi[size_t(axes[i] + rank)] = roi[i + n];
    }
  }
  return finish_geometry(ctx, p, full_scales, full_sizes, full_roi);
}

}  // namespace

// Resize-10+: X, scales (10); X, roi, scales, sizes (11+; roi and scales optional from 13; an
// empty tensor counts as absent, as exporters pass "" or an empty initializer). Upsample-7..9:
// X and scales (an attribute before 9).
Result<ResizeGeometry> resize_geometry(const KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  if (ctx.op().op_type == "Upsample") {
    GBX_ASSIGN_OR_RETURN(ResizeParams p, read_params(ctx, true));
    std::vector<double> scales;
    if (ctx.opset() >= 9) {
      GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
      scales = read_doubles(ctx.input(1));
    } else {
      for (float f : ctx.attr_floats("scales")) scales.push_back(f);
    }
    return finish_geometry(ctx, p, scales, {}, {});
  }
  const bool legacy = ctx.opset() < 11;
  GBX_ASSIGN_OR_RETURN(ResizeParams p, read_params(ctx, legacy));
  auto present = [&](size_t i) {
    return ctx.has_input(i) && ctx.input_value(i).is_tensor() && ctx.input(i).numel() > 0;
  };
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  if (legacy) {
    if (!present(1)) return ctx.error(ErrorCode::INVALID_ARGUMENT, "scales input is required");
    scales = read_doubles(ctx.input(1));
  } else {
    if (present(1)) roi = read_doubles(ctx.input(1));
    if (present(2)) scales = read_doubles(ctx.input(2));
    if (present(3)) {
      GBX_ASSIGN_OR_RETURN(sizes, read_ints(ctx, ctx.input(3)));
    }
    if (!scales.empty() && !sizes.empty())
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "only one of scales and sizes may be given");
    if (scales.empty() && sizes.empty())
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "one of scales and sizes must be given");
  }
  if (ctx.opset() >= 18) return resize18(ctx, p, std::move(scales), std::move(sizes), std::move(roi));
  return finish_geometry(ctx, p, scales, sizes, roi);
}

namespace {

Status resize(KernelContext& ctx) {
  GBX_ASSIGN_OR_RETURN(ResizeGeometry geo, resize_geometry(ctx));
  return run_resize(ctx, geo);
}

const std::vector<DType> kResizeTypes = {DType::F32, DType::F64, DType::F16, DType::BF16,
                                         DType::U8,  DType::I8,  DType::I32, DType::I64};
GBX_REGISTER_KERNEL({"", "Resize", 10, 21, kEngineRef, kResizeTypes, resize});
GBX_REGISTER_KERNEL({"", "Upsample", 7, 9, kEngineRef, kResizeTypes, resize});

}  // namespace
}  // namespace gearbox::ref
