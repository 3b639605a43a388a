// Element-wise loops of the cpu.simd engine (elementwise.h), compiled per instruction set by
// Highway's foreach_target and picked at run time. Tails run with masked loads and stores.
// Exp, Tanh and Sigmoid use Highway's contrib math (a few ulp from libm; the kernel tests
// bound the difference from the reference).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/elementwise_core.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <cmath>

#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include "kernels/cpu/simd/elementwise.h"
#include "kernels/cpu/simd/simd_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace gearbox::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <BinaryOp kOp, class D, class V>
HWY_INLINE V Apply(D, V a, V b) {
  if constexpr (kOp == BinaryOp::Add) return hn::Add(a, b);
  if constexpr (kOp == BinaryOp::Sub) return hn::Sub(a, b);
  if constexpr (kOp == BinaryOp::Mul) return hn::Mul(a, b);
  if constexpr (kOp == BinaryOp::Div) return hn::Div(a, b);
}

template <BinaryOp kOp>
void BinaryLoop(const float* a, int64_t a_step, const float* b, int64_t b_step, float* y, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto a0 = hn::Set(d, a[0]), b0 = hn::Set(d, b[0]);
  for (int64_t i = 0; i < n; i += lanes) {
    const int64_t count = n - i < lanes ? n - i : lanes;
    const auto va = a_step ? LoadN(d, a + i, count) : a0;
    const auto vb = b_step ? LoadN(d, b + i, count) : b0;
    StoreN(Apply<kOp>(d, va, vb), d, y + i, count);
  }
}

void BinarySpan(BinaryOp op, const float* a, int64_t a_step, const float* b, int64_t b_step, float* y, int64_t n) {
  switch (op) {
    case BinaryOp::Add: return BinaryLoop<BinaryOp::Add>(a, a_step, b, b_step, y, n);
    case BinaryOp::Sub: return BinaryLoop<BinaryOp::Sub>(a, a_step, b, b_step, y, n);
    case BinaryOp::Mul: return BinaryLoop<BinaryOp::Mul>(a, a_step, b, b_step, y, n);
    case BinaryOp::Div: return BinaryLoop<BinaryOp::Div>(a, a_step, b, b_step, y, n);
  }
}

template <UnaryOp kOp, class D, class V>
HWY_INLINE V Apply1(D d, V x) {
  const auto zero = hn::Zero(d);
  if constexpr (kOp == UnaryOp::Relu) return hn::IfThenElse(hn::Lt(x, zero), zero, x);  // NaN stays NaN
  if constexpr (kOp == UnaryOp::Neg) return hn::Neg(x);
  if constexpr (kOp == UnaryOp::Abs) return hn::Abs(x);
  if constexpr (kOp == UnaryOp::Sqrt) return hn::Sqrt(x);
  V r;
  if constexpr (kOp == UnaryOp::Exp) {
    // Highway's Exp covers x <= 104; past log(FLT_MAX) the result is +inf, as libm's.
    r = hn::IfThenElse(hn::Gt(x, hn::Set(d, 88.72283935546875f)), hn::Set(d, HUGE_VALF), hn::Exp(d, x));
  }
  if constexpr (kOp == UnaryOp::Tanh) r = hn::Tanh(d, x);
  if constexpr (kOp == UnaryOp::Sigmoid) {
    // With e = e^-|x| (never overflows): 1 / (1 + e) for x >= 0, e / (1 + e) for x < 0
    // (not 1 minus the former, which cancels to 0 for x below about -17).
    const auto e = hn::Exp(d, hn::Neg(hn::Abs(x)));
    const auto inv = hn::Div(hn::Set(d, 1.f), hn::Add(hn::Set(d, 1.f), e));
    r = hn::IfThenElse(hn::Lt(x, zero), hn::Mul(e, inv), inv);
  }
  return hn::IfThenElse(hn::IsNaN(x), x, r);  // NaN in, NaN out (as the reference)
}

template <UnaryOp kOp>
void UnaryLoop(const float* x, float* y, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t i = 0; i < n; i += lanes) {
    const int64_t count = n - i < lanes ? n - i : lanes;
    StoreN(Apply1<kOp>(d, LoadN(d, x + i, count)), d, y + i, count);
  }
}

void UnarySpan(UnaryOp op, const float* x, float* y, int64_t n) {
  switch (op) {
    case UnaryOp::Relu: return UnaryLoop<UnaryOp::Relu>(x, y, n);
    case UnaryOp::Neg: return UnaryLoop<UnaryOp::Neg>(x, y, n);
    case UnaryOp::Abs: return UnaryLoop<UnaryOp::Abs>(x, y, n);
    case UnaryOp::Sqrt: return UnaryLoop<UnaryOp::Sqrt>(x, y, n);
    case UnaryOp::Sigmoid: return UnaryLoop<UnaryOp::Sigmoid>(x, y, n);
    case UnaryOp::Tanh: return UnaryLoop<UnaryOp::Tanh>(x, y, n);
    case UnaryOp::Exp: return UnaryLoop<UnaryOp::Exp>(x, y, n);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace gearbox::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gearbox::simd {
HWY_EXPORT(BinarySpan);
HWY_EXPORT(UnarySpan);

void binary_span(BinaryOp op, const float* a, int64_t a_step, const float* b, int64_t b_step, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BinarySpan)(op, a, a_step, b, b_step, y, n);
}
void unary_span(UnaryOp op, const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(UnarySpan)(op, x, y, n); }
}  // namespace gearbox::simd
#endif
