// Broadcasting arithmetic (reference): Add, Sub, Mul, Div, Pow, Mod.
//
// Semantics that differ from plain C++:
// - integer Add/Sub/Mul wrap (two's complement) like numpy and ONNX Runtime;
// - integer Div truncates toward zero (C semantics, as ONNX Runtime); division by zero is
//   INVALID_ARGUMENT instead of SIGFPE, and INT_MIN / -1 wraps;
// - Pow: since opset 12 base and exponent may have different dtypes; the output has the
//   base's dtype. Integer ** integer is exact (repeated squaring, wrapping);
// - Mod: fmod=1 is C fmod (sign of the dividend), fmod=0 the Python/numpy remainder (sign
//   of the divisor), which the spec allows for integers only.
#include <cmath>

#include "kernels/cpu/ref/elementwise.h"

namespace gearbox::ref {
namespace {

constexpr int kLast = 18;

Status add_op(KernelContext& ctx) {
  return binary_op<Dom::NumericNoBool>(ctx, [](auto a, auto b) { return wrap_add(a, b); });
}
Status sub_op(KernelContext& ctx) {
  return binary_op<Dom::NumericNoBool>(ctx, [](auto a, auto b) { return wrap_sub(a, b); });
}
Status mul_op(KernelContext& ctx) {
  return binary_op<Dom::NumericNoBool>(ctx, [](auto a, auto b) { return wrap_mul(a, b); });
}

// Rejects an integer divisor that holds a zero (C++ integer division by zero traps).
struct NoZeroDivisor {
  const KernelContext& ctx;
  template <typename Tag>
  Status operator()(Tag, const Tensor& b) const {
    using T = typename Tag::type;
    if constexpr (is_int_v<T>) {
      const T* p = b.data<T>();
      for (int64_t i = 0; i < b.numel(); ++i)
        if (p[i] == 0)
          return ctx.error(ErrorCode::INVALID_ARGUMENT, "integer division by zero (divisor ", describe(b),
                           " holds 0 at flat index ", i, ")");
    }
    return Status::OK();
  }
};

Status div_op(KernelContext& ctx) {
  return binary_op<Dom::NumericNoBool>(
      ctx,
      [](auto a, auto b) {
        using C = decltype(a);
        if constexpr (is_int_v<C> && std::is_signed_v<C>) return b == C(-1) ? wrap_neg(a) : C(a / b);
        else return C(a / b);
      },
      NoZeroDivisor{ctx});
}

Status mod_op(KernelContext& ctx) {
  const bool fmod = ctx.attr_int("fmod", 0) != 0;
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  if (!fmod && is_float(ctx.input(0).dtype()))
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "fmod must be 1 for floating-point inputs (got dtype ",
                     dtype_name(ctx.input(0).dtype()), " with fmod=0)");
  return binary_op<Dom::NumericNoBool>(
      ctx,
      [fmod](auto a, auto b) {
        using C = decltype(a);
        if constexpr (!is_int_v<C>) {
          return std::fmod(a, b);
        } else if constexpr (std::is_unsigned_v<C>) {
          return C(a % b);
        } else {
          C r = b == C(-1) ? C(0) : C(a % b);  // INT_MIN % -1 traps on x86
          if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = C(r + b);
          return r;
        }
      },
      NoZeroDivisor{ctx});
}

// base ** exponent for integers, by repeated squaring with wrapping multiplication.
// Negative exponents truncate 1/base^n toward zero as C would.
template <typename T, typename E>
T int_pow(T base, E exp) {
  if constexpr (std::is_signed_v<E>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if constexpr (std::is_signed_v<T>)
        if (base == -1) return (exp % 2 == 0) ? T(1) : T(-1);
      return 0;
    }
  }
  T result = 1;
  uint64_t e = static_cast<uint64_t>(exp);
  while (e) {
    if (e & 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    e >>= 1;
  }
  return result;
}

template <typename T, typename E>
void pow_typed(const Tensor& a, const Tensor& b, Tensor& out, const BroadcastPlan<2>& plan) {
  using C = compute_t<T>;
  // x**2 and x**1 are common in exported models (LayerNorm variance) and exact without pow.
  if constexpr (is_float_v<T>) {
    if (b.numel() == 1 && out.numel() == a.numel()) {  // then out has a's layout
      const double e = b.at_double(0);
      if (e == 2.0 || e == 1.0) {
        const bool sq = e == 2.0;
        unary_apply(a.data<T>(), out.data<T>(), a.numel(), [sq](C x) { return sq ? x * x : x; });
        return;
      }
    }
  }
  binary_apply(a.data<T>(), b.data<E>(), out.data<T>(), plan, [](auto x, auto e) {
    using CE = decltype(e);
    if constexpr (is_float_v<T>) {
      return static_cast<C>(std::pow(x, static_cast<C>(e)));
    } else if constexpr (is_int_v<CE>) {
      return int_pow<C>(x, e);
    } else {
      return float_to_int<T>(std::pow(static_cast<double>(x), static_cast<double>(e)));
    }
  });
}

Status pow_op(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  // Before opset 12 both inputs share one type constraint.
  if (ctx.opset() < 12 && a.dtype() != b.dtype())
    return dtype_mismatch(ctx, "base and exponent (same dtype required before opset 12)", a.dtype(), b.dtype());
  Status st = ctx.unsupported_dtype(a.dtype());
  Tensor out;
  visit_numeric(a.dtype(), [&](auto ta) {
    using T = typename decltype(ta)::type;
    if constexpr (in_dom<Dom::NumericNoBool, T>()) {
      st = ctx.unsupported_dtype(b.dtype());
      visit_numeric(b.dtype(), [&](auto tb) {
        using E = typename decltype(tb)::type;
        if constexpr (in_dom<Dom::NumericNoBool, E>()) {
          BroadcastPlan<2> plan;
          st = prepare_binary(ctx, a, b, a.dtype(), &out, &plan);
          if (st.ok()) pow_typed<T, E>(a, b, out, plan);
        }
      });
    }
  });
  if (!st.ok()) return st;
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Add", 7, kLast, kEngineRef, {}, add_op});
GBX_REGISTER_KERNEL({"", "Sub", 7, kLast, kEngineRef, {}, sub_op});
GBX_REGISTER_KERNEL({"", "Mul", 7, kLast, kEngineRef, {}, mul_op});
GBX_REGISTER_KERNEL({"", "Div", 7, kLast, kEngineRef, {}, div_op});
GBX_REGISTER_KERNEL({"", "Mod", 10, kLast, kEngineRef, {}, mod_op});
GBX_REGISTER_KERNEL({"", "Pow", 7, kLast, kEngineRef, {}, pow_op});

}  // namespace
}  // namespace gearbox::ref
