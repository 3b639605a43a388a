// Conv (reference, opsets 1-17): 1-D, 2-D and 3-D, groups, strides, dilations, pads,
// auto_pad, optional bias; float32/float64 (float16/bfloat16 computed in f32).
//
// Strategy: every conv is a GEMM per (image, group): Y_g[M/g, P] = W_g[M/g, K] * col[K, P],
// K = C/g * prod(kernel), P = prod(output spatial). A 1x1 stride-1 unpadded conv needs no
// col buffer (X itself is the K x P matrix); others build it with im2col. Depthwise convs
// (one input and one output channel per group) run a direct loop instead, since a GEMM with
// M = 1 and K = 9 wastes the micro-kernel. 1-D and 2-D are handled as 3-D with unit dims.
#include <algorithm>
#include <vector>

#include "base/run_options.h"
#include "kernels/cpu/ref/gemm_core.h"
#include "kernels/cpu/ref/nn_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

// col[(c, kd, kh, kw), (od, oh, ow)] = x[c, od*s - p + kd*d, ...] or 0 in the padding.
template <typename T>
void im2col(const T* x, int64_t channels, const nn::Geom3& g, T* col) {
  const int64_t kprod = g.k[0] * g.k[1] * g.k[2];
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
  const int64_t rows = channels * kprod;
#pragma omp parallel for schedule(static) if (rows * out_plane > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t c = r / kprod;
    int64_t kr = r % kprod;
    const int64_t kw = kr % g.k[2];
    kr /= g.k[2];
    const int64_t kh = kr % g.k[1];
    const int64_t kd = kr / g.k[1];
    const T* xc = x + c * in_plane;
    T* dst = col + r * out_plane;
    const int64_t off_w = kw * g.d[2] - g.p[2];
    // Output columns whose input column lies inside [0, in_w).
    int64_t ow_lo = off_w >= 0 ? 0 : (-off_w + g.s[2] - 1) / g.s[2];
    int64_t ow_hi = g.in[2] - 1 - off_w < 0 ? 0 : (g.in[2] - 1 - off_w) / g.s[2] + 1;
    ow_lo = std::min(ow_lo, g.out[2]);
    ow_hi = std::clamp(ow_hi, ow_lo, g.out[2]);
    for (int64_t od = 0; od < g.out[0]; ++od) {
      const int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0];
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        T* drow = dst + (od * g.out[1] + oh) * g.out[2];
        const int64_t ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
        if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
          std::fill(drow, drow + g.out[2], T(0));
          continue;
        }
        const T* srow = xc + (id * g.in[1] + ih) * g.in[2] + off_w;
        std::fill(drow, drow + ow_lo, T(0));
        if (g.s[2] == 1) {
          std::copy(srow + ow_lo, srow + ow_hi, drow + ow_lo);
        } else {
          for (int64_t ow = ow_lo; ow < ow_hi; ++ow) drow[ow] = srow[ow * g.s[2]];
        }
        std::fill(drow + ow_hi, drow + g.out[2], T(0));
      }
    }
  }
}

// Depthwise: y[n, c] = b[c] + sum_k x[n, c, window] * w[c, k], one channel per group.
template <typename T>
void depthwise(const T* x, const T* w, const T* bias, T* y, int64_t planes, int64_t channels, const nn::Geom3& g) {
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
  const int64_t kprod = g.k[0] * g.k[1] * g.k[2];
#pragma omp parallel for schedule(static)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const int64_t c = pl % channels;
    const T* xc = x + pl * in_plane;
    const T* wc = w + c * kprod;
    T* yc = y + pl * out_plane;
    const T b = bias ? bias[c] : T(0);
    std::fill(yc, yc + out_plane, b);
    for (int64_t kd = 0; kd < g.k[0]; ++kd)
      for (int64_t kh = 0; kh < g.k[1]; ++kh)
        for (int64_t kw = 0; kw < g.k[2]; ++kw) {
          const T wv = wc[(kd * g.k[1] + kh) * g.k[2] + kw];
          const int64_t off_w = kw * g.d[2] - g.p[2];
          int64_t ow_lo = off_w >= 0 ? 0 : (-off_w + g.s[2] - 1) / g.s[2];
          int64_t ow_hi = g.in[2] - 1 - off_w < 0 ? 0 : (g.in[2] - 1 - off_w) / g.s[2] + 1;
          ow_lo = std::min(ow_lo, g.out[2]);
          ow_hi = std::clamp(ow_hi, ow_lo, g.out[2]);
          for (int64_t od = 0; od < g.out[0]; ++od) {
            const int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0];
            if (id < 0 || id >= g.in[0]) continue;
            for (int64_t oh = 0; oh < g.out[1]; ++oh) {
              const int64_t ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
              if (ih < 0 || ih >= g.in[1]) continue;
              const T* srow = xc + (id * g.in[1] + ih) * g.in[2] + off_w;
              T* drow = yc + (od * g.out[1] + oh) * g.out[2];
              if (g.s[2] == 1) {
                for (int64_t ow = ow_lo; ow < ow_hi; ++ow) drow[ow] += wv * srow[ow];
              } else {
                for (int64_t ow = ow_lo; ow < ow_hi; ++ow) drow[ow] += wv * srow[ow * g.s[2]];
              }
            }
          }
        }
  }
}

template <typename T>
Status conv_typed(KernelContext& ctx, const Tensor& x, const Tensor& w, const Tensor* b, int64_t group,
                  const nn::Window& win) {
  const int64_t n = x.dim(0), c = x.dim(1), m = w.dim(0);
  const int64_t cg = c / group, mg = m / group;
  Dims ydims{n, m};
  for (int64_t o : win.out) ydims.push_back(o);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(x.dtype(), ydims));
  const nn::Geom3 g = nn::to_geom3(win);
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
  const int64_t kprod = g.k[0] * g.k[1] * g.k[2];
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  const T* bp = b ? b->data<T>() : nullptr;
  T* yp = y.data<T>();

  if (cg == 1 && mg == 1) {
    depthwise<T>(xp, wp, bp, yp, n * c, c, g);
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }

  const int64_t kdim = cg * kprod;
  GemmShape s;
  s.m = mg;
  s.n = out_plane;
  s.k = kdim;
  s.lda = kdim;
  s.ldb = out_plane;
  s.ldc = out_plane;
  const bool pointwise = kprod == 1 && g.s[0] == 1 && g.s[1] == 1 && g.s[2] == 1 && g.p[0] == 0 && g.p[1] == 0 &&
                         g.p[2] == 0 && out_plane == in_plane;
  std::vector<GemmPtrs<T>> batch;
  if (pointwise) {
    // X[n, group g] is already the K x P matrix: one batched GEMM over images and groups.
    for (int64_t i = 0; i < n; ++i)
      for (int64_t gi = 0; gi < group; ++gi)
        batch.push_back({wp + gi * mg * kdim, xp + (i * c + gi * cg) * in_plane, yp + (i * m + gi * mg) * out_plane});
    gemm_batched(s, T(1), batch.data(), static_cast<int64_t>(batch.size()), T(0));
  } else {
    const int64_t col_elems = group * kdim * out_plane;
    if (col_elems / std::max<int64_t>(1, out_plane) != group * kdim)
      return ctx.error(ErrorCode::KERNEL_FAILED, "im2col buffer too large");
    nn::Scratch<T> col(static_cast<size_t>(col_elems));
    for (int64_t i = 0; i < n; ++i) {
      // Per image, outside the parallel GEMM: a large batch stops at its run's deadline.
      GBX_RETURN_IF_ERROR(check_run_stop());
      im2col<T>(xp + i * c * in_plane, c, g, col.data());
      batch.clear();
      for (int64_t gi = 0; gi < group; ++gi)
        batch.push_back({wp + gi * mg * kdim, col.data() + gi * kdim * out_plane, yp + (i * m + gi * mg) * out_plane});
      gemm_batched(s, T(1), batch.data(), static_cast<int64_t>(batch.size()), T(0));
    }
  }
  if (bp) nn::add_channel_bias(yp, bp, n, m, out_plane);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status conv(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x0 = ctx.input(0);
  const DType dt = x0.dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, conv);
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  const Tensor& x = x0;
  const Tensor& w = ctx.input(1);
  if (w.dtype() != dt)
    return ctx.error(ErrorCode::DTYPE_UNSUPPORTED, "W has dtype ", dtype_name(w.dtype()), " but X has ",
                     dtype_name(dt));
  if (x.rank() < 3 || x.rank() > 5 || w.rank() != x.rank())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "X ", to_string(x.dims()), " and W ", to_string(w.dims()),
                     " must both have rank 3, 4 or 5 (1-D to 3-D conv)");
  const int64_t group = ctx.attr_int("group", 1);
  const int64_t c = x.dim(1), m = w.dim(0);
  if (group < 1 || c % group != 0 || m % group != 0 || w.dim(1) != c / group)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "X ", to_string(x.dims()), " and W ", to_string(w.dims()),
                     " do not match group=", group, " (need C = W[1] * group and M divisible by group)");
  std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
  if (ctx.has_attr("kernel_shape") && ctx.attr_ints("kernel_shape") != kernel)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "kernel_shape ", to_string(ctx.attr_ints("kernel_shape")),
                     " does not match W ", to_string(w.dims()));
  const Tensor* b = nullptr;
  if (ctx.has_input(2)) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(2));
    b = &ctx.input(2);
    if (b->dtype() != dt || b->rank() != 1 || b->dim(0) != m)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "bias B ", describe(*b), " must be ", dtype_name(dt), "[", m, "]");
  }
  std::vector<int64_t> in_spatial(x.dims().begin() + 2, x.dims().end());
  GBX_ASSIGN_OR_RETURN(nn::Window win, nn::make_window(ctx, in_spatial, kernel));
  if (x.numel() == 0) {
    Dims ydims{x.dim(0), m};
    for (int64_t o : win.out) ydims.push_back(o);
    ctx.set_output(0, Tensor(dt, ydims));
    return Status::OK();
  }
  if (dt == DType::F32) return conv_typed<float>(ctx, x, w, b, group, win);
  return conv_typed<double>(ctx, x, w, b, group, win);
}

GBX_REGISTER_KERNEL({"", "Conv", 1, 18, kEngineRef, {DType::F32, DType::F64, DType::F16, DType::BF16}, conv});

}  // namespace
}  // namespace gearbox::ref
