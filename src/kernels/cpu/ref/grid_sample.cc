// GridSample (opset 16, 4-D), reference. Follows ONNX Runtime's CPU kernel, which the ONNX
// test data matches: grid values in [-1, 1] are denormalized (align_corners picks pixel
// centres or edges), nearest rounds half to even, bilinear uses 2x2 and bicubic 4x4 taps
// (A = -0.75); padding "zeros" reads 0 outside, "border" clamps, "reflection" reflects
// coordinates about the borders. AffineGrid (opset 20) makes the grid of an affine transform.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

enum class Pad { Zeros, Border, Reflection };

double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    double dx = lo - x;
    int64_t n = static_cast<int64_t>(dx / range);
    double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    int64_t n = static_cast<int64_t>(dx / range);
    double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

void cubic_coeffs(double x, double c[4]) {
  const double A = -0.75;
  x = std::fabs(x);
  c[0] = ((A * (x + 1) - 5 * A) * (x + 1) + 8 * A) * (x + 1) - 4 * A;
  c[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
  c[2] = ((A + 2) * (1 - x) - (A + 3)) * (1 - x) * (1 - x) + 1;
  c[3] = ((A * (2 - x) - 5 * A) * (2 - x) + 8 * A) * (2 - x) - 4 * A;
}

Status grid_sample(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  if (x.rank() != 4 || grid.rank() != 4 || grid.dim(0) != x.dim(0) || grid.dim(3) != 2)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "expected X [N, C, H, W] and grid [N, Ho, Wo, 2]; got X ", describe(x),
                     ", grid ", describe(grid));
  if (!is_float(grid.dtype())) return ctx.unsupported_dtype(grid.dtype());
  const bool align = ctx.attr_int("align_corners", 0) != 0;
  const std::string mode = ctx.attr_string("mode", "bilinear");
  const std::string pad_s = ctx.attr_string("padding_mode", "zeros");
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "mode '", mode, "' is not one of bilinear, nearest, bicubic");
  Pad pad = Pad::Zeros;
  if (pad_s == "border") pad = Pad::Border;
  else if (pad_s == "reflection") pad = Pad::Reflection;
  else if (pad_s != "zeros") return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "padding_mode '", pad_s, "' is unknown");

  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), Ho = grid.dim(1), Wo = grid.dim(2);
  const double x_min = align ? 0 : -0.5, x_max = align ? double(W) - 1 : double(W) - 0.5;
  const double y_min = align ? 0 : -0.5, y_max = align ? double(H) - 1 : double(H) - 0.5;
  std::vector<double> xv = read_doubles(x), gv = read_doubles(grid);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(x.dtype(), {N, C, Ho, Wo}));
  std::vector<double> out(static_cast<size_t>(y.numel()));

  auto denorm = [&](double n, int64_t len) {
    return align ? (n + 1) / 2 * double(len - 1) : ((n + 1) * double(len) - 1) / 2;
  };
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      const double* img = &xv[static_cast<size_t>((n * C + c) * H * W)];
      auto pixel = [&](int64_t r, int64_t col) -> double {
        if (pad == Pad::Zeros) return (col >= 0 && col < W && r >= 0 && r < H) ? img[r * W + col] : 0.0;
        if (pad == Pad::Border) {
          col = std::clamp<int64_t>(col, 0, W - 1);
          r = std::clamp<int64_t>(r, 0, H - 1);
        } else {
          col = static_cast<int64_t>(reflect(double(col), x_min, x_max));
          r = static_cast<int64_t>(reflect(double(r), y_min, y_max));
          col = std::clamp<int64_t>(col, 0, W - 1);  // guards degenerate 1-pixel ranges
          r = std::clamp<int64_t>(r, 0, H - 1);
        }
        return img[r * W + col];
      };
      for (int64_t i = 0; i < Ho; ++i) {
        for (int64_t j = 0; j < Wo; ++j) {
          const double* g = &gv[static_cast<size_t>(((n * Ho + i) * Wo + j) * 2)];
          double px = denorm(g[0], W), py = denorm(g[1], H);
          if (!std::isfinite(px) || !std::isfinite(py)) {  // samples nothing: reads as padding 0
            out[static_cast<size_t>(((n * C + c) * Ho + i) * Wo + j)] = 0;
            continue;
          }
          px = std::clamp(px, -1e9, 1e9);
          py = std::clamp(py, -1e9, 1e9);
          if (mode == "nearest") {
            px = std::nearbyint(px);
            py = std::nearbyint(py);
          }
          if (px < x_min || px > x_max || py < y_min || py > y_max) {
            if (pad == Pad::Border) {
              px = std::clamp(px, 0.0, double(W - 1));
              py = std::clamp(py, 0.0, double(H - 1));
            } else if (pad == Pad::Reflection) {
              px = reflect(px, x_min, x_max);
              py = reflect(py, y_min, y_max);
            }
          }
          double v = 0;
          if (mode == "nearest") {
            v = pixel(static_cast<int64_t>(py), static_cast<int64_t>(px));
          } else if (mode == "bilinear") {
            int64_t x1 = static_cast<int64_t>(std::floor(px)), y1 = static_cast<int64_t>(std::floor(py));
            double dx1 = px - double(x1), dx2 = double(x1 + 1) - px;
            double dy1 = py - double(y1), dy2 = double(y1 + 1) - py;
            v = dy2 * (dx2 * pixel(y1, x1) + dx1 * pixel(y1, x1 + 1)) +
                dy1 * (dx2 * pixel(y1 + 1, x1) + dx1 * pixel(y1 + 1, x1 + 1));
          } else {
            int64_t x0 = static_cast<int64_t>(std::floor(px)) - 1, y0 = static_cast<int64_t>(std::floor(py)) - 1;
            double cx[4], cy[4];
            cubic_coeffs(px - double(x0) - 1, cx);
            cubic_coeffs(py - double(y0) - 1, cy);
            for (int64_t h = 0; h < 4; ++h) {
              double row = 0;
              for (int64_t w = 0; w < 4; ++w) row += cx[w] * pixel(y0 + h, x0 + w);
              v += cy[h] * row;
            }
          }
          out[static_cast<size_t>(((n * C + c) * Ho + i) * Wo + j)] = v;
        }
      }
    }
  }
  store_doubles(y, out);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// AffineGrid-20 (theta, size; align_corners): the sampling grid GridSample reads for an affine
// transform. theta [N, 2, 3] with size (N, C, H, W) gives [N, H, W, 2]; theta [N, 3, 4] with
// size (N, C, D, H, W) gives [N, D, H, W, 3]. Each output point is theta[n] applied to the
// normalized coordinates (x along W, y along H, z along D, 1) of its pixel: pixel centres
// -1 + (2i + 1) / L, or with align_corners the corners -1 + 2i / (L - 1) (-1 when L is 1).
Status affine_grid(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& theta = ctx.input(0);
  GBX_ASSIGN_OR_RETURN(std::vector<int64_t> size, read_ints(ctx, ctx.input(1)));
  if (size.size() != 4 && size.size() != 5)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "size must be (N, C, H, W) or (N, C, D, H, W), got ",
                     describe(ctx.input(1)));
  const int64_t k = static_cast<int64_t>(size.size()) - 2;  // spatial axes
  if (theta.rank() != 3 || theta.dim(0) != size[0] || theta.dim(1) != k || theta.dim(2) != k + 1)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "theta ", describe(theta), " must be [", size[0], ", ", k, ", ", k + 1,
                     "] for size ", to_string(Dims(size)));
  for (int64_t v : size)
    if (v < 0) return ctx.error(ErrorCode::INVALID_ARGUMENT, "size ", to_string(Dims(size)), " has a negative value");
  const bool align = ctx.attr_int("align_corners", 0) != 0;
  // Output [N, spatial..., k]; spatial in (D,) H, W order, the coordinates in x, y (, z) order.
  Dims out_dims{size[0]};
  for (int64_t d = 0; d < k; ++d) out_dims.push_back(size[size_t(2 + d)]);
  out_dims.push_back(k);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(theta.dtype(), out_dims));
  auto coord = [&](int64_t i, int64_t len) {
    if (align) return len <= 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(len - 1);
    return -1.0 + (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(len);
  };
  const std::vector<double> th = read_doubles(theta);
  std::vector<double> out(static_cast<size_t>(y.numel()));
  const int64_t points = k == 0 || size[0] == 0 ? 0 : y.numel() / (size[0] * k);
  std::vector<int64_t> at(static_cast<size_t>(k));
  std::vector<double> base(static_cast<size_t>(k + 1));
  for (int64_t n = 0; n < size[0]; ++n) {
    const double* t = &th[size_t(n * k * (k + 1))];
    for (int64_t p = 0; p < points; ++p) {
      // p's spatial index, the last axis (W) fastest; base = (x, y[, z], 1).
      int64_t rest = p;
      for (int64_t d = k; d-- > 0;) {
        const int64_t len = size[size_t(2 + d)];
        at[size_t(d)] = rest % len;
        rest /= len;
      }
      for (int64_t d = 0; d < k; ++d) base[size_t(d)] = coord(at[size_t(k - 1 - d)], size[size_t(1 + k - d)]);
      base[size_t(k)] = 1.0;
      for (int64_t r = 0; r < k; ++r) {
        double v = 0;
        for (int64_t j = 0; j <= k; ++j) v += t[r * (k + 1) + j] * base[size_t(j)];
        out[size_t((n * points + p) * k + r)] = v;
      }
    }
  }
  store_doubles(y, out);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "GridSample", 16, 18, kEngineRef, float_dtypes(), grid_sample});
GBX_REGISTER_KERNEL({"", "AffineGrid", 20, 21, kEngineRef, float_dtypes(), affine_grid});

}  // namespace
}  // namespace gearbox::ref
