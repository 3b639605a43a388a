// Pooling (reference): MaxPool (opsets 1-12: Indices output, storage_order, dilations,
// ceil_mode; int8/uint8 from opset 12), AveragePool (count_include_pad, ceil_mode), LpPool,
// and GlobalAveragePool / GlobalMaxPool / GlobalLpPool. 1-D to 3-D windows; float32/float64,
// float16/bfloat16 computed in f32. Each (image, channel) plane is independent, so planes are
// split over OpenMP threads.
//
// Also com.gearbox.MaxPoolGrad, MaxPool's backward by its Indices output (what the framework's
// autodiff runs).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/ref/nn_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

enum class PoolKind { Max, Average, Lp };

// Validates X and the kernel, and computes the window (rank <= 3 spatial dims).
Result<nn::Window> pool_window(const KernelContext& ctx, const Tensor& x, PoolKind kind) {
  if (x.rank() < 3 || x.rank() > 5)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "X ", to_string(x.dims()),
                     " must have rank 3, 4 or 5 (N x C x 1 to 3 spatial dims)");
  std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape");
  if (kernel.empty()) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "attribute kernel_shape is required");
  std::vector<int64_t> in_spatial(x.dims().begin() + 2, x.dims().end());
  const bool ceil_mode = ctx.attr_int("ceil_mode", 0) != 0;
  // Dilations: MaxPool's since opset 10, LpPool's since 18, AveragePool's since 19.
  return nn::make_window(ctx, in_spatial, kernel, ceil_mode,
                         kind == PoolKind::Max || (kind == PoolKind::Lp && ctx.opset() >= 18) ||
                             (kind == PoolKind::Average && ctx.opset() >= 19));
}

// LpPool's p: a float attribute in opset 1, an int from opset 2.
double lp_exponent(const KernelContext& ctx) {
  const Attribute* a = ctx.attr("p");
  if (!a) return 2.0;
  return a->type == AttrType::Float ? static_cast<double>(a->f) : static_cast<double>(a->i);
}

template <typename T>
void max_pool(const T* x, T* y, int64_t* indices, int64_t planes, const nn::Geom3& g, bool col_major) {
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
  // Indices count in the original (un-padded-to-3-D) layout; the leading unit dims add nothing.
#pragma omp parallel for schedule(static) if (planes * out_plane > 16384)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* xc = x + pl * in_plane;
    T* yc = y + pl * out_plane;
    int64_t* ic = indices ? indices + pl * out_plane : nullptr;
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          using C = compute_t<T>;
          C best = std::numeric_limits<C>::lowest();
          if constexpr (std::numeric_limits<C>::has_infinity) best = -std::numeric_limits<C>::infinity();
          int64_t best_d = -1, best_h = -1, best_w = -1;
          for (int64_t kd = 0; kd < g.k[0]; ++kd) {
            const int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0];
            if (id < 0 || id >= g.in[0]) continue;
            for (int64_t kh = 0; kh < g.k[1]; ++kh) {
              const int64_t ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
              if (ih < 0 || ih >= g.in[1]) continue;
              const T* row = xc + (id * g.in[1] + ih) * g.in[2];
              for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                const int64_t iw = ow * g.s[2] - g.p[2] + kw * g.d[2];
                if (iw < 0 || iw >= g.in[2]) continue;
                const C v = static_cast<C>(row[iw]);
                // NaN propagates as in numpy's max; the first maximum wins the index.
                if (v > best || best_d < 0 || (v != v && best == best)) {
                  best = v;
                  best_d = id;
                  best_h = ih;
                  best_w = iw;
                }
              }
            }
          }
          const int64_t o = (od * g.out[1] + oh) * g.out[2] + ow;
          yc[o] = static_cast<T>(best);
          if (ic) {
            const int64_t local = col_major ? (best_w * g.in[1] + best_h) * g.in[0] + best_d
                                            : (best_d * g.in[1] + best_h) * g.in[2] + best_w;
            ic[o] = best_d < 0 ? -1 : pl * in_plane + local;
          }
        }
  }
}

// Average (count_include_pad counts the explicit padding, clamped to the padded extent, as
// ONNX Runtime does) and Lp pooling (padding contributes zero).
template <typename T>
void avg_lp_pool(const T* x, T* y, int64_t planes, const nn::Geom3& g, PoolKind kind, bool include_pad, double p) {
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
#pragma omp parallel for schedule(static) if (planes * out_plane > 16384)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* xc = x + pl * in_plane;
    T* yc = y + pl * out_plane;
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          const int64_t o3[3] = {od, oh, ow};
          int64_t padded_count = 1;
          for (int i = 0; i < 3; ++i) {
            const int64_t start = o3[i] * g.s[i] - g.p[i];
            const int64_t end = std::min(start + (g.k[i] - 1) * g.d[i] + 1, g.in[i] + g.pe[i]);
            padded_count *= (end - start + g.d[i] - 1) / g.d[i];
          }
          double acc = 0;
          int64_t count = 0;
          for (int64_t kd = 0; kd < g.k[0]; ++kd) {
            const int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0];
            if (id < 0 || id >= g.in[0]) continue;
            for (int64_t kh = 0; kh < g.k[1]; ++kh) {
              const int64_t ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
              if (ih < 0 || ih >= g.in[1]) continue;
              const T* row = xc + (id * g.in[1] + ih) * g.in[2];
              for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                const int64_t iw = ow * g.s[2] - g.p[2] + kw * g.d[2];
                if (iw < 0 || iw >= g.in[2]) continue;
                const double v = static_cast<double>(row[iw]);
                if (kind == PoolKind::Lp) acc += p == 2 ? v * v : std::pow(std::fabs(v), p);
                else acc += v;
                ++count;
              }
            }
          }
          double r;
          if (kind == PoolKind::Lp) r = p == 2 ? std::sqrt(acc) : std::pow(acc, 1.0 / p);
          else r = acc / static_cast<double>(include_pad ? padded_count : std::max<int64_t>(count, 1));
          yc[(od * g.out[1] + oh) * g.out[2] + ow] = static_cast<T>(r);
        }
  }
}

template <PoolKind kKind>
Status pool(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const DType dt = x.dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, pool<kKind>);
  const bool int_ok = kKind == PoolKind::Max && (dt == DType::I8 || dt == DType::U8);
  if (dt != DType::F32 && dt != DType::F64 && !int_ok) return ctx.unsupported_dtype(dt);
  GBX_ASSIGN_OR_RETURN(nn::Window win, pool_window(ctx, x, kKind));
  Dims ydims{x.dim(0), x.dim(1)};
  for (int64_t o : win.out) ydims.push_back(o);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, ydims));
  const nn::Geom3 g = nn::to_geom3(win);
  const int64_t planes = x.dim(0) * x.dim(1);
  if constexpr (kKind == PoolKind::Max) {
    const int64_t storage_order = ctx.attr_int("storage_order", 0);
    if (storage_order != 0 && storage_order != 1)
      return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "storage_order ", storage_order, " must be 0 or 1");
    Tensor idx;
    if (ctx.wants_output(1)) {
      GBX_ASSIGN_OR_RETURN(idx, Tensor::allocate(DType::I64, ydims));
    }
    int64_t* ip = idx.defined() ? idx.data<int64_t>() : nullptr;
    visit_numeric(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int8_t> ||
                    std::is_same_v<T, uint8_t>)
        max_pool<T>(x.data<T>(), y.data<T>(), ip, planes, g, storage_order == 1);
    });
    if (idx.defined()) ctx.set_output(1, std::move(idx));
  } else {
    const bool include_pad = ctx.attr_int("count_include_pad", 0) != 0;
    const double p = lp_exponent(ctx);
    if (kKind == PoolKind::Lp && p <= 0) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "p ", p, " must be > 0");
    if (dt == DType::F32) avg_lp_pool<float>(x.data<float>(), y.data<float>(), planes, g, kKind, include_pad, p);
    else avg_lp_pool<double>(x.data<double>(), y.data<double>(), planes, g, kKind, include_pad, p);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// Global pools reduce every spatial position of a plane to one value.
template <PoolKind kKind>
Status global_pool(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const DType dt = x.dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, global_pool<kKind>);
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  if (x.rank() < 2)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "X ", to_string(x.dims()), " must have rank >= 2 (N x C x ...)");
  Dims ydims{x.dim(0), x.dim(1)};
  int64_t plane = 1;
  for (size_t i = 2; i < x.rank(); ++i) {
    ydims.push_back(1);
    plane *= x.dim(i);
  }
  if (plane == 0 && kKind == PoolKind::Max)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "X ", to_string(x.dims()), " has an empty spatial extent");
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, ydims));
  const int64_t planes = x.dim(0) * x.dim(1);
  const double p = lp_exponent(ctx);
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
#pragma omp parallel for schedule(static) if (planes * plane > 65536)
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* xc = xp + pl * plane;
      if constexpr (kKind == PoolKind::Max) {
        T best = xc[0];
        for (int64_t i = 1; i < plane; ++i)
          if (xc[i] > best || xc[i] != xc[i]) best = xc[i];
        yp[pl] = best;
      } else if constexpr (kKind == PoolKind::Average) {
        double acc = 0;
        for (int64_t i = 0; i < plane; ++i) acc += static_cast<double>(xc[i]);
        yp[pl] = static_cast<T>(acc / static_cast<double>(plane));
      } else {
        double acc = 0;
        for (int64_t i = 0; i < plane; ++i) acc += std::pow(std::fabs(static_cast<double>(xc[i])), p);
        yp[pl] = static_cast<T>(std::pow(acc, 1.0 / p));
      }
    }
  };
  if (dt == DType::F32) run(TypeTag<float>{});
  else run(TypeTag<double>{});
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// com.gearbox.MaxPoolGrad(dY, Indices, shape) -> dX of `shape` (MaxPool's X): zeros, plus each
// dY element added at the flat position (storage_order 0) its index names. An index of -1 (a
// window wholly in the padding, as MaxPool writes it) passes nothing; any other index outside
// dX is INVALID_ARGUMENT, checked before anything is written. One pass where ScatterElements
// over a zeros constant of X's size took twice the time and the model's memory.
Status max_pool_grad(KernelContext& ctx) {
  for (size_t i = 0; i < 3; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& dy = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const Tensor& shape = ctx.input(2);
  const DType dt = dy.dtype();
  if (ind.dtype() != DType::I64 || ind.dims() != dy.dims())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "MaxPoolGrad: Indices ", describe(ind), " must be int64 of dY's shape ",
                     to_string(dy.dims()));
  if (shape.dtype() != DType::I64 || shape.rank() != 1)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "MaxPoolGrad: shape ", describe(shape), " must be a 1-D int64 tensor");
  Dims dims(shape.data<int64_t>(), shape.data<int64_t>() + shape.numel());
  if (dims.size() != dy.rank())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "MaxPoolGrad: shape ", to_string(dims), " and dY ",
                     to_string(dy.dims()), " must have one rank");
  for (int64_t d : dims)
    if (d < 0) return ctx.error(ErrorCode::SHAPE_MISMATCH, "MaxPoolGrad: shape ", to_string(dims), " is negative");
  if (dt != DType::F32 && dt != DType::F64 && !nn::is_half_like(dt)) return ctx.unsupported_dtype(dt);
  GBX_ASSIGN_OR_RETURN(Tensor dx, Tensor::allocate(dt, dims));
  const int64_t size = dx.numel();
  const int64_t* ip = ind.data<int64_t>();
  for (int64_t i = 0; i < ind.numel(); ++i)
    if (ip[i] < -1 || ip[i] >= size)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "MaxPoolGrad: index ", ip[i], " is outside dX ", to_string(dims));
  visit_numeric(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<compute_t<T>>) {
      const T* g = dy.data<T>();
      T* out = dx.data<T>();
      for (int64_t i = 0; i < ind.numel(); ++i)
        if (ip[i] >= 0)
          out[ip[i]] = static_cast<T>(static_cast<compute_t<T>>(out[ip[i]]) + static_cast<compute_t<T>>(g[i]));
    }
  });
  ctx.set_output(0, std::move(dx));
  return Status::OK();
}

const std::vector<DType> kFloats{DType::F32, DType::F64, DType::F16, DType::BF16};

GBX_REGISTER_KERNEL({"",
                     "MaxPool",
                     1,
                     17,
                     kEngineRef,
                     {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8, DType::U8},
                     pool<PoolKind::Max>});
GBX_REGISTER_KERNEL({kGearboxDomain, "MaxPoolGrad", 1, 1, kEngineRef, kFloats, max_pool_grad});
GBX_REGISTER_KERNEL({"", "AveragePool", 1, 21, kEngineRef, kFloats, pool<PoolKind::Average>});
GBX_REGISTER_KERNEL({"", "LpPool", 1, 18, kEngineRef, kFloats, pool<PoolKind::Lp>});
GBX_REGISTER_KERNEL({"", "GlobalMaxPool", 1, 18, kEngineRef, kFloats, global_pool<PoolKind::Max>});
GBX_REGISTER_KERNEL({"", "GlobalAveragePool", 1, 18, kEngineRef, kFloats, global_pool<PoolKind::Average>});
GBX_REGISTER_KERNEL({"", "GlobalLpPool", 1, 18, kEngineRef, kFloats, global_pool<PoolKind::Lp>});

}  // namespace
}  // namespace gearbox::ref
