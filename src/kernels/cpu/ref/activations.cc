// Activation functions (reference): Sigmoid, HardSigmoid, HardSwish, Softplus, Softsign,
// Tanh, Elu, Selu, Celu, LeakyRelu, ThresholdedRelu, Shrink, Mish and PRelu (the one
// binary activation: its slope broadcasts unidirectionally to X). Relu lives in relu.cc.
// Attribute defaults are the ONNX spec's.
#include <cmath>

#include "kernels/cpu/ref/elementwise.h"
#include "kernels/cpu/ref/fast_math.h"

namespace gearbox::ref {
namespace {

Status sigmoid_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) {
    using C = decltype(x);
    return C(1) / (C(1) + std::exp(-x));  // exp(-x) = inf gives 0, never NaN
  });
}

// float32 uses the vectorizable approximation (GELU-tanh exports call it per activation;
// glibc's tanhf is scalar and slow).
Status tanh_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) {
    if constexpr (std::is_same_v<decltype(x), float>) return fast_tanh(x);
    else return std::tanh(x);
  });
}

Status hard_sigmoid_op(KernelContext& ctx) {
  const float alpha = ctx.attr_float("alpha", 0.2f), beta = ctx.attr_float("beta", 0.5f);
  return unary_op<Dom::Float>(ctx, [alpha, beta](auto x) {
    using C = decltype(x);
    if (x != x) return x;  // NaN: std::min(C(1), NaN) would give 1; torch and cpu.simd give NaN
    // One rounding (a fused multiply-add) for float and double, as cpu.simd: a compiler may or
    // may not fuse `alpha * x + beta`, so the two engines would differ in the last bit.
    C t;
    if constexpr (std::is_floating_point_v<C>) t = std::fma(C(alpha), x, C(beta));
    else t = C(alpha) * x + C(beta);
    return std::max(C(0), std::min(C(1), t));
  });
}

Status hard_swish_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) {
    using C = decltype(x);
    return x * std::max(C(0), std::min(C(1), x / C(6) + C(0.5)));
  });
}

// log(1 + exp(x)) written so that large x gives x instead of inf.
template <typename C>
C softplus(C x) {
  return std::max(x, C(0)) + std::log1p(std::exp(-std::fabs(x)));
}

Status softplus_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return softplus(x); });
}

Status softsign_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return x / (decltype(x)(1) + std::fabs(x)); });
}

Status mish_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return x * std::tanh(softplus(x)); });
}

Status elu_op(KernelContext& ctx) {
  const float alpha = ctx.attr_float("alpha", 1.0f);
  return unary_op<Dom::Float>(ctx, [alpha](auto x) {
    using C = decltype(x);
    return x >= C(0) ? x : C(alpha) * std::expm1(x);
  });
}

Status selu_op(KernelContext& ctx) {
  const float alpha = ctx.attr_float("alpha", 1.67326319217681884765625f);
  const float gamma = ctx.attr_float("gamma", 1.05070102214813232421875f);
  return unary_op<Dom::Float>(ctx, [alpha, gamma](auto x) {
    using C = decltype(x);
    return x > C(0) ? C(gamma) * x : C(gamma) * (C(alpha) * std::exp(x) - C(alpha));
  });
}

Status celu_op(KernelContext& ctx) {
  const float alpha = ctx.attr_float("alpha", 1.0f);
  if (alpha == 0.0f) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "alpha must not be 0 (it divides x)");
  return unary_op<Dom::Float>(ctx, [alpha](auto x) {
    using C = decltype(x);
    return std::max(C(0), x) + std::min(C(0), C(alpha) * std::expm1(x / C(alpha)));
  });
}

// x < 0 ? a * x : x, written as two selects of x and 0 plus one multiply-add: with GCC's
// default -ftrapping-math a select between computed values (or between a and 1) is not
// if-converted and the loop stays scalar and branchy, ~50x slower on mixed-sign data.
// NaN stays NaN (it lands in `pos`).
template <typename C>
C leaky(C x, C a) {
  const C neg = x < C(0) ? x : C(0);
  const C pos = x < C(0) ? C(0) : x;
  return pos + a * neg;
}

Status leaky_relu_op(KernelContext& ctx) {
  const float alpha = ctx.attr_float("alpha", 0.01f);
  return unary_op<Dom::Float>(ctx, [alpha](auto x) {
    using C = decltype(x);
    return leaky(x, C(alpha));
  });
}

Status thresholded_relu_op(KernelContext& ctx) {
  const float alpha = ctx.attr_float("alpha", 1.0f);
  return unary_op<Dom::Float>(ctx, [alpha](auto x) {
    using C = decltype(x);
    return x > C(alpha) ? x : C(0);
  });
}

// Shrink accepts every numeric type; integers are compared and shifted in double and
// converted back like Cast does.
Status shrink_op(KernelContext& ctx) {
  const double lambd = ctx.attr_float("lambd", 0.5f), bias = ctx.attr_float("bias", 0.0f);
  return unary_op<Dom::NumericNoBool>(ctx, [lambd, bias](auto x) {
    using C = decltype(x);
    if constexpr (is_int_v<C>) {
      const double v = static_cast<double>(x);
      return float_to_int<C>(v < -lambd ? v + bias : v > lambd ? v - bias : 0.0);
    } else {
      return x < C(-lambd) ? x + C(bias) : x > C(lambd) ? x - C(bias) : C(0);
    }
  });
}

// PRelu: y = x < 0 ? slope * x : x, slope broadcast to X's shape (unidirectional: the
// output keeps X's shape).
Status prelu_op(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  const Tensor& slope = ctx.input(1);
  if (x.dtype() != slope.dtype()) return dtype_mismatch(ctx, "X and slope", x.dtype(), slope.dtype());
  GBX_ASSIGN_OR_RETURN(Dims dims, broadcast_shapes(ctx, {x.dims(), slope.dims()}));
  if (dims != x.dims())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "slope ", to_string(slope.dims()),
                     " does not broadcast unidirectionally to X ", to_string(x.dims()));
  Tensor y;
  BroadcastPlan<2> plan;
  GBX_RETURN_IF_ERROR(prepare_binary(ctx, x, slope, x.dtype(), &y, &plan));
  bool handled = false;
  visit_numeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (in_dom<Dom::NumericNoBool, T>()) {
      binary_apply(x.data<T>(), slope.data<T>(), y.data<T>(), plan, [](auto v, auto s) {
        using C = decltype(v);
        if constexpr (is_int_v<C>) return v < 0 ? wrap_mul(s, v) : v;
        else return leaky(v, s);
      });
      handled = true;
    }
  });
  if (!handled) return ctx.unsupported_dtype(x.dtype());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

constexpr int kLast = 18;
GBX_REGISTER_KERNEL({"", "Sigmoid", 1, kLast, kEngineRef, {}, sigmoid_op});
GBX_REGISTER_KERNEL({"", "Tanh", 1, kLast, kEngineRef, {}, tanh_op});
GBX_REGISTER_KERNEL({"", "HardSigmoid", 1, kLast, kEngineRef, {}, hard_sigmoid_op});
GBX_REGISTER_KERNEL({"", "HardSwish", 14, kLast, kEngineRef, {}, hard_swish_op});
GBX_REGISTER_KERNEL({"", "Softplus", 1, kLast, kEngineRef, {}, softplus_op});
GBX_REGISTER_KERNEL({"", "Softsign", 1, kLast, kEngineRef, {}, softsign_op});
GBX_REGISTER_KERNEL({"", "Mish", 18, 18, kEngineRef, {}, mish_op});
GBX_REGISTER_KERNEL({"", "Elu", 1, kLast, kEngineRef, {}, elu_op});
GBX_REGISTER_KERNEL({"", "Selu", 1, kLast, kEngineRef, {}, selu_op});
GBX_REGISTER_KERNEL({"", "Celu", 12, kLast, kEngineRef, {}, celu_op});
GBX_REGISTER_KERNEL({"", "LeakyRelu", 1, kLast, kEngineRef, {}, leaky_relu_op});
GBX_REGISTER_KERNEL({"", "ThresholdedRelu", 10, kLast, kEngineRef, {}, thresholded_relu_op});
GBX_REGISTER_KERNEL({"", "Shrink", 9, kLast, kEngineRef, {}, shrink_op});
GBX_REGISTER_KERNEL({"", "PRelu", 1, kLast, kEngineRef, {}, prelu_op});

}  // namespace
}  // namespace gearbox::ref
