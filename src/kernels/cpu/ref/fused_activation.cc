// Activations absorbed by fusions (FusedConv, FusedMatMul, FusedGemm), com.gearbox.Gelu and its
// gradient com.gearbox.GeluGrad (what the framework's autodiff runs for Gelu's backward).
#include <cmath>
#include <type_traits>

#include "kernels/cpu/ref/fast_math.h"
#include "kernels/cpu/ref/fused_util.h"
#include "kernels/cpu/ref/nn_util.h"
#include "kernels/op_descriptor.h"

namespace gearbox::ref::fused {

namespace {

// float uses the same erf/tanh the unfused Erf and Tanh kernels use (fast_math.h), so the
// fused op is as fast as they are and agrees with the graph it replaces.
template <typename T>
T erf_of(T v) {
  if constexpr (std::is_same_v<T, float>) return fast_erf(v);
  else return std::erf(v);
}
template <typename T>
T tanh_of(T v) {
  if constexpr (std::is_same_v<T, float>) return fast_tanh(v);
  else return std::tanh(v);
}

template <typename T>
void gelu_typed(const T* x, T* y, int64_t n, bool tanh_form) {
  if (tanh_form) {
    const T k = static_cast<T>(0.7978845608028654);  // sqrt(2 / pi)
    for (int64_t i = 0; i < n; ++i) {
      const T v = x[i];
      y[i] = T(0.5) * v * (T(1) + tanh_of(k * (v + T(0.044715) * v * v * v)));
    }
  } else {
    const T r = static_cast<T>(0.7071067811865476);  // 1 / sqrt(2)
    for (int64_t i = 0; i < n; ++i) y[i] = T(0.5) * x[i] * (T(1) + erf_of(x[i] * r));
  }
}

// dx = dy * gelu'(x). Erf form: Phi(x) + x phi(x). Tanh form, u = k (x + c x^3), t = tanh(u):
// (1 + t) / 2 + x sech^2(u) k (1 + 3 c x^2) / 2, with sech^2(u) = 4 e / (1 + e)^2, e = exp(-2|u|):
// 1 - t^2 would cancel to a few ulps for |u| > 3 and x k (1 + 3 c x^2) multiplies it by up to 60.
template <typename T>
void gelu_grad_typed(const T* dy, const T* x, T* dx, int64_t n, bool tanh_form) {
  if (tanh_form) {
    const T k = static_cast<T>(0.7978845608028654), c = static_cast<T>(0.044715);
    for (int64_t i = 0; i < n; ++i) {
      const T v = x[i], u = k * (v + c * v * v * v), e = std::exp(T(-2) * std::fabs(u));
      const T sech2 = T(4) * e / ((T(1) + e) * (T(1) + e));
      // sech2 == 0 far out, where (1 + 3 c x^2) may be inf: the term is 0, not NaN.
      const T curve = sech2 == 0 ? T(0) : T(0.5) * v * sech2 * k * (T(1) + T(3) * c * v * v);
      dx[i] = dy[i] * (T(0.5) * (T(1) + tanh_of(u)) + curve);
    }
  } else {
    const T r = static_cast<T>(0.7071067811865476), p = static_cast<T>(0.3989422804014327);  // 1/sqrt(2 pi)
    for (int64_t i = 0; i < n; ++i) {
      const T v = x[i];
      dx[i] = dy[i] * (T(0.5) * (T(1) + erf_of(v * r)) + v * p * std::exp(T(-0.5) * v * v));
    }
  }
}

}  // namespace

Result<Tensor> gelu(const KernelContext& ctx, const Tensor& x, bool tanh_form) {
  const DType dt = x.dtype();
  if (nn::is_half_like(dt)) {
    GBX_ASSIGN_OR_RETURN(Tensor y, gelu(ctx, nn::widen_to_f32(x), tanh_form));
    return nn::narrow_from_f32(y, dt);
  }
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(dt, x.dims()));
  if (dt == DType::F32) gelu_typed(x.data<float>(), y.data<float>(), x.numel(), tanh_form);
  else gelu_typed(x.data<double>(), y.data<double>(), x.numel(), tanh_form);
  return y;
}

Result<RuntimeValue> apply_activation(const KernelContext& ctx, RuntimeValue x) {
  // The one parser of the attributes (kernels/op_descriptor.h); each kind runs the unfused
  // op's kernel, so the fused op agrees with the graph it replaced.
  const std::optional<FusedActivation> act = fused_activation_of(ctx);
  if (!act)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "unknown fused activation '", ctx.attr_string("activation", ""),
                     "'");
  switch (act->kind) {
    case ActivationKind::None:
      return x;
    case ActivationKind::Relu:
      return call1(ctx, "Relu", 14, {&x});
    case ActivationKind::Sigmoid:
      return call1(ctx, "Sigmoid", 13, {&x});
    case ActivationKind::Tanh:
      return call1(ctx, "Tanh", 13, {&x});
    case ActivationKind::HardSwish:
      return call1(ctx, "HardSwish", 14, {&x});
    case ActivationKind::HardSigmoid:
      return call1(ctx, "HardSigmoid", 6, {&x}, {{"alpha", attr_float(act->p0)}, {"beta", attr_float(act->p1)}});
    case ActivationKind::LeakyRelu:
      return call1(ctx, "LeakyRelu", 16, {&x}, {{"alpha", attr_float(act->p0)}});
    case ActivationKind::Clip:
      // Clip-6 takes its bounds as attributes, which the fusion stored as parameters.
      return call1(ctx, "Clip", 6, {&x}, {{"min", attr_float(act->p0)}, {"max", attr_float(act->p1)}});
    case ActivationKind::Silu: {
      GBX_ASSIGN_OR_RETURN(RuntimeValue s, call1(ctx, "Sigmoid", 13, {&x}));
      return call1(ctx, "Mul", 14, {&x, &s});
    }
    case ActivationKind::Gelu:
    case ActivationKind::GeluTanh: {
      if (!x.is_tensor()) return ctx.error(ErrorCode::INVALID_ARGUMENT, "Gelu needs a tensor");
      GBX_ASSIGN_OR_RETURN(Tensor y, gelu(ctx, x.tensor(), act->kind == ActivationKind::GeluTanh));
      return RuntimeValue(std::move(y));
    }
  }
  return x;
}

namespace {

// com.gearbox.Gelu(X) attr approximate = "none" | "tanh".
Status gelu_op(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_ASSIGN_OR_RETURN(Tensor y, gelu(ctx, ctx.input(0), ctx.attr_string("approximate", "none") == "tanh"));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// com.gearbox.GeluGrad(dY, X) -> dX, attr approximate as Gelu's: one pass where the chain of
// element-wise ops it replaces (erf, exp, five multiplies and adds) made Gelu's backward 10-40
// times its forward in the framework.
Status gelu_grad_op(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  if (dy.dtype() != x.dtype() || dy.dims() != x.dims())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "GeluGrad: dY ", dtype_name(dy.dtype()), " ", to_string(dy.dims()),
                     " and X ", dtype_name(x.dtype()), " ", to_string(x.dims()), " must have one dtype and shape");
  const DType dt = x.dtype();
  if (dt != DType::F32 && dt != DType::F64) return ctx.unsupported_dtype(dt);
  const bool tanh_form = ctx.attr_string("approximate", "none") == "tanh";
  GBX_ASSIGN_OR_RETURN(Tensor dx, Tensor::allocate_uninitialized(dt, x.dims()));
  if (dt == DType::F32) gelu_grad_typed(dy.data<float>(), x.data<float>(), dx.data<float>(), x.numel(), tanh_form);
  else gelu_grad_typed(dy.data<double>(), x.data<double>(), dx.data<double>(), x.numel(), tanh_form);
  ctx.set_output(0, std::move(dx));
  return Status::OK();
}

}  // namespace

GBX_REGISTER_KERNEL({kGearboxDomain, "Gelu", 1, 1, kEngineRef, {}, gelu_op});
GBX_REGISTER_KERNEL({kGearboxDomain, "GeluGrad", 1, 1, kEngineRef, {}, gelu_grad_op});

}  // namespace gearbox::ref::fused
