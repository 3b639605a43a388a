// BatchNormalization (reference, opsets 7-17): inference mode, and from opset 14 training
// mode (batch statistics; running_mean/running_var outputs). float32/float64, float16/bfloat16
// computed in f32; scale/B/mean/var may have their own float dtype (opset 15).
//
// Per channel the op is y = x * a + b with a = scale / sqrt(var + eps), b = B - mean * a;
// a and b are computed in double once per channel.
//
// Also com.gearbox.BatchNormalizationGrad, training mode's backward (what the framework's
// autodiff runs: docs/framework.md), where the chain of ~12 broadcast ops it replaces took
// most of a small CNN's training step.
#include <cmath>
#include <vector>

#include "kernels/cpu/ref/nn_util.h"
#include "kernels/cpu/ref/ref_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

template <typename T>
void apply_affine(const T* x, T* y, int64_t n, int64_t c, int64_t plane, const std::vector<double>& a,
                  const std::vector<double>& b) {
#pragma omp parallel for schedule(static) if (n * c * plane > 65536)
  for (int64_t pl = 0; pl < n * c; ++pl) {
    const T av = static_cast<T>(a[static_cast<size_t>(pl % c)]), bv = static_cast<T>(b[static_cast<size_t>(pl % c)]);
    const T* xc = x + pl * plane;
    T* yc = y + pl * plane;
    for (int64_t i = 0; i < plane; ++i) yc[i] = xc[i] * av + bv;
  }
}

// Per-channel population mean and variance over N and the spatial dims.
template <typename T>
void channel_stats(const T* x, int64_t n, int64_t c, int64_t plane, std::vector<double>& mean,
                   std::vector<double>& var) {
  mean.assign(static_cast<size_t>(c), 0.0);
  var.assign(static_cast<size_t>(c), 0.0);
  const double count = static_cast<double>(n * plane);
#pragma omp parallel for schedule(static) if (n * c * plane > 65536)
  for (int64_t ch = 0; ch < c; ++ch) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T* xc = x + (i * c + ch) * plane;
      for (int64_t j = 0; j < plane; ++j) s += static_cast<double>(xc[j]);
    }
    const double m = count > 0 ? s / count : 0.0;
    double q = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T* xc = x + (i * c + ch) * plane;
      for (int64_t j = 0; j < plane; ++j) {
        const double d = static_cast<double>(xc[j]) - m;
        q += d * d;
      }
    }
    mean[static_cast<size_t>(ch)] = m;
    var[static_cast<size_t>(ch)] = count > 0 ? q / count : 0.0;
  }
}

Status batch_norm(KernelContext& ctx) {
  for (size_t i = 0; i < 5; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& x = ctx.input(0);
  const DType dt = x.dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, batch_norm);
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  if (x.rank() < 2)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "X ", to_string(x.dims()), " must have rank >= 2 (N x C x ...)");
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t plane = c == 0 || n == 0 ? 0 : x.numel() / (n * c);
  const char* names[5] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) {
    const Tensor& t = ctx.input(i);
    if (!is_float(t.dtype()) || t.numel() != c || t.rank() > 1)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, names[i], " ", describe(t), " must be a float tensor of shape [", c,
                       "] (C of X ", to_string(x.dims()), ")");
  }
  const std::vector<double> scale = read_doubles(ctx.input(1)), bias = read_doubles(ctx.input(2));
  std::vector<double> mean = read_doubles(ctx.input(3)), var = read_doubles(ctx.input(4));
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  const double momentum = ctx.attr_float("momentum", 0.9f);
  const bool training = ctx.opset() >= 14 && ctx.attr_int("training_mode", 0) != 0;
  if (!training && ctx.opset() < 14 && (ctx.wants_output(1) || ctx.wants_output(2)))
    return ctx.error(ErrorCode::OP_UNSUPPORTED,
                     "training-mode outputs (mean, var, saved_mean, saved_var) before opset 14 are not supported");
  if (!training && (ctx.wants_output(1) || ctx.wants_output(2)))
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "running_mean/running_var outputs need training_mode=1");

  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, x.dims()));
  std::vector<double> batch_mean, batch_var;
  if (training) {
    if (dt == DType::F32) channel_stats<float>(x.data<float>(), n, c, plane, batch_mean, batch_var);
    else channel_stats<double>(x.data<double>(), n, c, plane, batch_mean, batch_var);
  }
  const std::vector<double>& use_mean = training ? batch_mean : mean;
  const std::vector<double>& use_var = training ? batch_var : var;
  std::vector<double> a(static_cast<size_t>(c)), b(static_cast<size_t>(c));
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = scale[i] / std::sqrt(use_var[i] + eps);
    b[i] = bias[i] - use_mean[i] * a[i];
  }
  if (dt == DType::F32) apply_affine<float>(x.data<float>(), y.data<float>(), n, c, plane, a, b);
  else apply_affine<double>(x.data<double>(), y.data<double>(), n, c, plane, a, b);
  ctx.set_output(0, std::move(y));
  if (training) {
    // running = input * momentum + batch * (1 - momentum), in the dtype of input_mean/var.
    for (size_t k = 0; k < 2; ++k) {
      if (!ctx.wants_output(k + 1)) continue;
      const Tensor& in = ctx.input(3 + k);
      const std::vector<double>& cur = k == 0 ? mean : var;
      const std::vector<double>& bat = k == 0 ? batch_mean : batch_var;
      GBX_ASSIGN_OR_RETURN(Tensor r, Tensor::allocate(in.dtype(), in.dims()));
      visit_numeric(in.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        for (int64_t i = 0; i < c; ++i)
          r.data<T>()[i] = static_cast<T>(static_cast<compute_t<T>>(cur[static_cast<size_t>(i)] * momentum +
                                                                    bat[static_cast<size_t>(i)] * (1 - momentum)));
      });
      ctx.set_output(k + 1, std::move(r));
    }
  }
  return Status::OK();
}

// com.gearbox.BatchNormalizationGrad(dY, X, scale, mean, var) -> (dX, dscale, dbias), attr
// epsilon: the gradient of training-mode BatchNormalization through its batch statistics
// (mean and population variance over N and the spatial dims, the forward's outputs 1 and 2
// with momentum 0). With invstd = (var + eps)^-1/2, x^ = (x - mean) invstd and M values per
// channel:
//   dbias = sum(dY), dscale = sum(dY x^) = invstd sum(dY (x - mean)),
//   dX = (dY - dbias / M - (x - mean) invstd dscale / M) invstd scale.
// Two passes; sums in double.
Status batch_norm_grad(KernelContext& ctx) {
  for (size_t i = 0; i < 5; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const DType dt = x.dtype();
  if (x.rank() < 2 || dy.dims() != x.dims() || dy.dtype() != dt)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "BatchNormalizationGrad: dY ", describe(dy), " and X ", describe(x),
                     " must have one dtype and shape of rank >= 2 (N x C x ...)");
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, batch_norm_grad);
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t plane = c == 0 || n == 0 ? 0 : x.numel() / (n * c);
  const char* names[5] = {"dY", "X", "scale", "mean", "var"};
  for (size_t i = 2; i < 5; ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != dt || t.numel() != c || t.rank() != 1)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "BatchNormalizationGrad: ", names[i], " ", describe(t), " must be ",
                       dtype_name(dt), "[", c, "] (C of X ", to_string(x.dims()), ")");
  }
  const double m = static_cast<double>(n * plane);
  if (m < 1) return ctx.error(ErrorCode::SHAPE_MISMATCH, "BatchNormalizationGrad: X ", describe(x), " is empty");
  const std::vector<double> scale = read_doubles(ctx.input(2)), mean = read_doubles(ctx.input(3)),
                            var = read_doubles(ctx.input(4));
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  GBX_ASSIGN_OR_RETURN(Tensor dx, Tensor::allocate_uninitialized(dt, x.dims()));
  GBX_ASSIGN_OR_RETURN(Tensor dscale, Tensor::allocate_uninitialized(dt, {c}));
  GBX_ASSIGN_OR_RETURN(Tensor dbias, Tensor::allocate_uninitialized(dt, {c}));
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *g = dy.data<T>(), *xv = x.data<T>();
    T* out = dx.data<T>();
#pragma omp parallel for schedule(static) if (n * c * plane > 65536)
    for (int64_t ch = 0; ch < c; ++ch) {
      const size_t k = static_cast<size_t>(ch);
      double sum = 0, dot = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = (i * c + ch) * plane, e = j + plane; j < e; ++j) {
          sum += static_cast<double>(g[j]);
          dot += static_cast<double>(g[j]) * (static_cast<double>(xv[j]) - mean[k]);
        }
      const double invstd = 1.0 / std::sqrt(var[k] + eps);
      const double ds = dot * invstd;
      // In T, in torch's order (its CPU kernel's), so that a float32 training run follows
      // torch's rounding rather than parting from it over many steps.
      const T t_invstd = static_cast<T>(invstd), t_mean = static_cast<T>(mean[k]), t_scale = static_cast<T>(scale[k]);
      const T t_k = static_cast<T>(dot * invstd * invstd / m), t_grad_mean = static_cast<T>(sum / m);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = (i * c + ch) * plane, e = j + plane; j < e; ++j)
          out[j] = (g[j] - t_grad_mean - (xv[j] - t_mean) * t_k) * t_invstd * t_scale;
      dscale.data<T>()[ch] = static_cast<T>(ds);
      dbias.data<T>()[ch] = static_cast<T>(sum);
    }
  };
  if (dt == DType::F32) run(TypeTag<float>{});
  else run(TypeTag<double>{});
  ctx.set_output(0, std::move(dx));
  ctx.set_output(1, std::move(dscale));
  ctx.set_output(2, std::move(dbias));
  return Status::OK();
}

GBX_REGISTER_KERNEL(
    {"", "BatchNormalization", 7, 18, kEngineRef, {DType::F32, DType::F64, DType::F16, DType::BF16}, batch_norm});
GBX_REGISTER_KERNEL({kGearboxDomain,
                     "BatchNormalizationGrad",
                     1,
                     1,
                     kEngineRef,
                     {DType::F32, DType::F64, DType::F16, DType::BF16},
                     batch_norm_grad});

}  // namespace
}  // namespace gearbox::ref
