// What a Resize (opsets 10-21) or Upsample (7-9) node computes, apart from the arithmetic: the
// attributes read and checked, the output dims, the per-axis scales and region of interest, and
// the 1-D taps (source index, weight) of each output coordinate. The reference kernel
// (resize.cc) and cpu.simd's (kernels/cpu/simd/resize.cc) both run from these, so they agree
// on every mode, transform and error; they differ only in how they add the taps up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernel.h"

namespace gearbox::ref {

enum class ResizeMode { Nearest, Linear, Cubic };

struct ResizeParams {
  ResizeMode mode = ResizeMode::Nearest;
  std::string transform = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;  // Resize-18: linear and cubic widen their filter when downsampling
  double extrapolation = 0;
  bool legacy = false;  // opset 10 Resize / Upsample
};

struct ResizeGeometry {
  ResizeParams params;
  Dims out_dims;
  std::vector<double> scales;  // per axis
  std::vector<double> roi;     // tf_crop_and_resize: [starts..., ends...]; else empty
  bool crop = false;           // tf_crop_and_resize

  double roi_start(size_t axis) const { return crop ? roi[axis] : 0.0; }
  double roi_end(size_t axis) const { return crop ? roi[axis + out_dims.size()] : 1.0; }
  // Whether axis (of input size in_len) changes: every other axis is copied as it is.
  bool resizes(size_t axis, int64_t in_len) const { return crop || out_dims[axis] != in_len || scales[axis] != 1.0; }
};

// Reads and checks the node's attributes and inputs (the errors the reference reports).
Result<ResizeGeometry> resize_geometry(const KernelContext& ctx);

struct Tap {
  int64_t idx;
  double w;
};

// The taps of output coordinate x along one axis (in_len -> out_len at `scale`); empty means
// "extrapolate" (tf_crop_and_resize outside the image: extrapolation_value).
std::vector<Tap> resize_taps(const ResizeParams& p, int64_t x, int64_t in_len, int64_t out_len, double scale,
                             double roi_start, double roi_end);

}  // namespace gearbox::ref
