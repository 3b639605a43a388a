// Element-wise unary math (reference): Abs, Neg, Exp, Log, Sqrt, Reciprocal, Floor, Ceil,
// Round, Sign, the trigonometric and hyperbolic functions and their inverses, Erf, IsNaN,
// IsInf. float16/bfloat16 are computed in float (compute_t) and rounded once on store.
// The ops' opset revisions (6/13 added bfloat16, ...) only widened the dtype lists, so one
// kernel per op serves opsets 1-17 with the widest list.
#include <cmath>

#include "kernels/cpu/ref/elementwise.h"
#include "kernels/cpu/ref/fast_math.h"

namespace gearbox::ref {
namespace {

Status abs_op(KernelContext& ctx) {
  return unary_op<Dom::NumericNoBool>(ctx, [](auto x) {
    using C = decltype(x);
    if constexpr (is_int_v<C> && std::is_unsigned_v<C>) return x;
    else if constexpr (is_int_v<C>) return x < 0 ? wrap_neg(x) : x;  // INT_MIN wraps, as numpy
    else return std::fabs(x);
  });
}

Status neg_op(KernelContext& ctx) {
  return unary_op<Dom::FloatSigned>(ctx, [](auto x) { return wrap_neg(x); });
}

Status sign_op(KernelContext& ctx) {
  return unary_op<Dom::NumericNoBool>(ctx, [](auto x) {
    using C = decltype(x);
    if constexpr (is_int_v<C>) return static_cast<C>((x > 0) - (x < 0));
    else return x > 0 ? C(1) : x < 0 ? C(-1) : x;  // keeps 0, -0 and NaN, as numpy.sign
  });
}

Status exp_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::exp(x); });
}
Status log_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::log(x); });
}
Status sqrt_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::sqrt(x); });
}
Status reciprocal_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return decltype(x)(1) / x; });
}
Status floor_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::floor(x); });
}
Status ceil_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::ceil(x); });
}
// Half to even: nearbyint in the default rounding mode (std::round rounds half away).
Status round_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::nearbyint(x); });
}

Status sin_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::sin(x); });
}
Status cos_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::cos(x); });
}
Status tan_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::tan(x); });
}
Status asin_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::asin(x); });
}
Status acos_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::acos(x); });
}
Status atan_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::atan(x); });
}
Status sinh_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::sinh(x); });
}
Status cosh_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::cosh(x); });
}
Status asinh_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::asinh(x); });
}
Status acosh_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::acosh(x); });
}
Status atanh_op(KernelContext& ctx) {
  return unary_op<Dom::Float>(ctx, [](auto x) { return std::atanh(x); });
}

// Erf is on BERT's GELU path, so float32 uses a branch-free approximation that vectorizes
// (fast_math.h); the other types use libm. Integer inputs are allowed by the spec.
Status erf_op(KernelContext& ctx) {
  return unary_op<Dom::NumericNoBool>(ctx, [](auto x) {
    using C = decltype(x);
    if constexpr (std::is_same_v<C, float>) return fast_erf(x);
    else if constexpr (is_int_v<C>) return std::erf(static_cast<double>(x));
    else return std::erf(x);
  });
}

Status isnan_op(KernelContext& ctx) {
  return unary_op<Dom::Float, true>(ctx, [](auto x) { return std::isnan(x); });
}

Status isinf_op(KernelContext& ctx) {
  const bool pos = ctx.attr_int("detect_positive", 1) != 0;
  const bool neg = ctx.attr_int("detect_negative", 1) != 0;
  return unary_op<Dom::Float, true>(ctx,
                                    [pos, neg](auto x) { return std::isinf(x) && ((x > 0 && pos) || (x < 0 && neg)); });
}

constexpr int kLast = 18;
GBX_REGISTER_KERNEL({"", "Abs", 1, kLast, kEngineRef, {}, abs_op});
GBX_REGISTER_KERNEL({"", "Neg", 1, kLast, kEngineRef, {}, neg_op});
GBX_REGISTER_KERNEL({"", "Sign", 9, kLast, kEngineRef, {}, sign_op});
GBX_REGISTER_KERNEL({"", "Exp", 1, kLast, kEngineRef, {}, exp_op});
GBX_REGISTER_KERNEL({"", "Log", 1, kLast, kEngineRef, {}, log_op});
GBX_REGISTER_KERNEL({"", "Sqrt", 1, kLast, kEngineRef, {}, sqrt_op});
GBX_REGISTER_KERNEL({"", "Reciprocal", 1, kLast, kEngineRef, {}, reciprocal_op});
GBX_REGISTER_KERNEL({"", "Floor", 1, kLast, kEngineRef, {}, floor_op});
GBX_REGISTER_KERNEL({"", "Ceil", 1, kLast, kEngineRef, {}, ceil_op});
GBX_REGISTER_KERNEL({"", "Round", 11, kLast, kEngineRef, {}, round_op});
GBX_REGISTER_KERNEL({"", "Sin", 7, kLast, kEngineRef, {}, sin_op});
GBX_REGISTER_KERNEL({"", "Cos", 7, kLast, kEngineRef, {}, cos_op});
GBX_REGISTER_KERNEL({"", "Tan", 7, kLast, kEngineRef, {}, tan_op});
GBX_REGISTER_KERNEL({"", "Asin", 7, kLast, kEngineRef, {}, asin_op});
GBX_REGISTER_KERNEL({"", "Acos", 7, kLast, kEngineRef, {}, acos_op});
GBX_REGISTER_KERNEL({"", "Atan", 7, kLast, kEngineRef, {}, atan_op});
GBX_REGISTER_KERNEL({"", "Sinh", 9, kLast, kEngineRef, {}, sinh_op});
GBX_REGISTER_KERNEL({"", "Cosh", 9, kLast, kEngineRef, {}, cosh_op});
GBX_REGISTER_KERNEL({"", "Asinh", 9, kLast, kEngineRef, {}, asinh_op});
GBX_REGISTER_KERNEL({"", "Acosh", 9, kLast, kEngineRef, {}, acosh_op});
GBX_REGISTER_KERNEL({"", "Atanh", 9, kLast, kEngineRef, {}, atanh_op});
GBX_REGISTER_KERNEL({"", "Erf", 9, kLast, kEngineRef, {}, erf_op});
GBX_REGISTER_KERNEL({"", "IsNaN", 9, kLast, kEngineRef, {}, isnan_op});
GBX_REGISTER_KERNEL({"", "IsInf", 10, kLast, kEngineRef, {}, isinf_op});

}  // namespace
}  // namespace gearbox::ref
