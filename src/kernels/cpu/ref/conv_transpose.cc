// ConvTranspose (reference, opsets 1-17): 1-D to 3-D, groups, strides, dilations, pads,
// output_padding, output_shape, auto_pad, optional bias; float32/float64 (float16/bfloat16
// computed in f32).
//
// Per (image, group): col[M/g * prod(kernel), P_in] = W_g^T * X_g through gemm_core (W_g is
// [C/g, M/g * prod(kernel)], used transposed), then col2im scatters-adds every column entry
// into the output position in * stride - pad + k * dilation. col2im is split over output
// channels, so threads never write the same element.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cpu/ref/gemm_core.h"
#include "kernels/cpu/ref/nn_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

struct TGeom {
  int64_t in[3], k[3], s[3], d[3], p[3], out[3];
};

template <typename T>
void col2im(const T* col, int64_t channels, const TGeom& g, T* y) {
  const int64_t kprod = g.k[0] * g.k[1] * g.k[2];
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
#pragma omp parallel for schedule(static) if (channels * kprod * in_plane > 32768)
  for (int64_t c = 0; c < channels; ++c) {
    T* yc = y + c * out_plane;
    for (int64_t kr = 0; kr < kprod; ++kr) {
      const int64_t kw = kr % g.k[2], kh = (kr / g.k[2]) % g.k[1], kd = kr / (g.k[2] * g.k[1]);
      const T* src = col + (c * kprod + kr) * in_plane;
      for (int64_t id = 0; id < g.in[0]; ++id) {
        const int64_t od = id * g.s[0] - g.p[0] + kd * g.d[0];
        if (od < 0 || od >= g.out[0]) continue;
        for (int64_t ih = 0; ih < g.in[1]; ++ih) {
          const int64_t oh = ih * g.s[1] - g.p[1] + kh * g.d[1];
          if (oh < 0 || oh >= g.out[1]) continue;
          const T* srow = src + (id * g.in[1] + ih) * g.in[2];
          T* drow = yc + (od * g.out[1] + oh) * g.out[2];
          for (int64_t iw = 0; iw < g.in[2]; ++iw) {
            const int64_t ow = iw * g.s[2] - g.p[2] + kw * g.d[2];
            if (ow >= 0 && ow < g.out[2]) drow[ow] += srow[iw];
          }
        }
      }
    }
  }
}

template <typename T>
Status conv_transpose_typed(KernelContext& ctx, const Tensor& x, const Tensor& w, const Tensor* b, int64_t group,
                            const TGeom& g, const Dims& ydims) {
  const int64_t n = x.dim(0), c = x.dim(1), mg = w.dim(1), m = mg * group, cg = c / group;
  const int64_t kprod = g.k[0] * g.k[1] * g.k[2];
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(x.dtype(), ydims));
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  T* yp = y.data<T>();
  const int64_t rows = mg * kprod;
  nn::Scratch<T> col(static_cast<size_t>(group * rows * in_plane));
  GemmShape s;
  s.trans_a = true;
  s.m = rows;
  s.n = in_plane;
  s.k = cg;
  s.lda = rows;
  s.ldb = in_plane;
  s.ldc = in_plane;
  std::vector<GemmPtrs<T>> batch;
  for (int64_t i = 0; i < n; ++i) {
    batch.clear();
    for (int64_t gi = 0; gi < group; ++gi)
      batch.push_back({wp + gi * cg * rows, xp + (i * c + gi * cg) * in_plane, col.data() + gi * rows * in_plane});
    gemm_batched(s, T(1), batch.data(), group, T(0));
    // Output channels of all groups are contiguous in both col and y.
    col2im<T>(col.data(), m, g, yp + i * m * out_plane);
  }
  if (b) nn::add_channel_bias(yp, b->data<T>(), n, m, out_plane);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status conv_transpose(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const DType dt = ctx.input(0).dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, conv_transpose);
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (w.dtype() != dt)
    return ctx.error(ErrorCode::DTYPE_UNSUPPORTED, "W has dtype ", dtype_name(w.dtype()), " but X has ",
                     dtype_name(dt));
  if (x.rank() < 3 || x.rank() > 5 || w.rank() != x.rank())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "X ", to_string(x.dims()), " and W ", to_string(w.dims()),
                     " must both have rank 3, 4 or 5 (1-D to 3-D)");
  const int64_t group = ctx.attr_int("group", 1);
  const int64_t c = x.dim(1);
  if (group < 1 || c % group != 0 || w.dim(0) != c)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "X ", to_string(x.dims()), " and W ", to_string(w.dims()),
                     " do not match group=", group, " (need W[0] = C, divisible by group)");
  const int64_t m = w.dim(1) * group;
  const size_t k = x.rank() - 2;
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
  GBX_ASSIGN_OR_RETURN(nn::Window win, nn::make_transpose_window(ctx, in_spatial, kernel));
  TGeom g;
  Dims ydims{x.dim(0), m};
  const size_t lead = 3 - k;
  for (size_t i = 0; i < 3; ++i) {
    if (i < lead) {
      g.in[i] = g.k[i] = g.s[i] = g.d[i] = g.out[i] = 1;
      g.p[i] = 0;
      continue;
    }
    const size_t j = i - lead;
    g.in[i] = win.in[j];
    g.k[i] = kernel[j];
    g.s[i] = win.strides[j];
    g.d[i] = win.dilations[j];
    g.p[i] = win.pad_begin[j];
    g.out[i] = win.out[j];
    ydims.push_back(win.out[j]);
  }
  if (x.numel() == 0) {
    ctx.set_output(0, Tensor(dt, ydims));
    return Status::OK();
  }
  if (dt == DType::F32) return conv_transpose_typed<float>(ctx, x, w, b, group, g, ydims);
  return conv_transpose_typed<double>(ctx, x, w, b, group, g, ydims);
}

GBX_REGISTER_KERNEL(
    {"", "ConvTranspose", 1, 18, kEngineRef, {DType::F32, DType::F64, DType::F16, DType::BF16}, conv_transpose});

}  // namespace
}  // namespace gearbox::ref
