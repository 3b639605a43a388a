// Per-target vector helpers of the cpu.simd engine (included by the foreach_target files,
// once per instruction set, hence the toggling include guard Highway prescribes): tail loads
// and stores through a stack buffer (a masked load is not fault-free on every target), exp
// of non-positive arguments, and the rational erf/tanh of kernels/cpu/ref/fast_math.h (same
// coefficients, so cpu.simd and cpu.ref agree to a few ulps).
#if defined(GEARBOX_SIMD_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GEARBOX_SIMD_MATH_INL_H_
#undef GEARBOX_SIMD_MATH_INL_H_
#else
#define GEARBOX_SIMD_MATH_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace gearbox::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The first `count` floats at p (fewer than a vector: the rest are zero).
template <class D>
HWY_INLINE hn::Vec<D> LoadN(D d, const float* p, int64_t count) {
  if (count >= static_cast<int64_t>(hn::Lanes(d))) return hn::LoadU(d, p);
  alignas(64) float buf[HWY_MAX_BYTES / sizeof(float)] = {};
  std::memcpy(buf, p, static_cast<size_t>(count) * sizeof(float));
  return hn::Load(d, buf);
}

// Stores the first `count` lanes of v at p.
template <class D>
HWY_INLINE void StoreN(hn::Vec<D> v, D d, float* p, int64_t count) {
  if (count >= static_cast<int64_t>(hn::Lanes(d))) return hn::StoreU(v, d, p);
  alignas(64) float buf[HWY_MAX_BYTES / sizeof(float)];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, static_cast<size_t>(count) * sizeof(float));
}

// exp(x) for x <= 0 (a softmax argument after the max is subtracted); below -87 the result is
// under FLT_MIN and returned as 0, so -inf (a masked score) gives exactly 0.
template <class D>
HWY_INLINE hn::Vec<D> ExpNonPositive(D d, hn::Vec<D> x) {
  const auto lo = hn::Set(d, -87.0f);
  return hn::IfThenElseZero(hn::Ge(x, lo), hn::Exp(d, hn::Max(x, lo)));
}

template <class D>
HWY_INLINE hn::Vec<D> ErfRational(D d, hn::Vec<D> v) {
  const auto x = hn::Min(hn::Max(v, hn::Set(d, -4.0f)), hn::Set(d, 4.0f));
  const auto x2 = hn::Mul(x, x);
  auto p = hn::MulAdd(x2, hn::Set(d, -2.72614225801306e-10f), hn::Set(d, 2.77068142495902e-08f));
  p = hn::MulAdd(x2, p, hn::Set(d, -2.10102402082508e-06f));
  p = hn::MulAdd(x2, p, hn::Set(d, -5.69250639462346e-05f));
  p = hn::MulAdd(x2, p, hn::Set(d, -7.34990630326855e-04f));
  p = hn::MulAdd(x2, p, hn::Set(d, -2.95459980854025e-03f));
  p = hn::MulAdd(x2, p, hn::Set(d, -1.60960333262415e-02f));
  p = hn::Mul(x, p);
  auto q = hn::MulAdd(x2, hn::Set(d, -1.45660718464996e-05f), hn::Set(d, -2.13374055278905e-04f));
  q = hn::MulAdd(x2, q, hn::Set(d, -1.68282697438203e-03f));
  q = hn::MulAdd(x2, q, hn::Set(d, -7.37332916720468e-03f));
  q = hn::MulAdd(x2, q, hn::Set(d, -1.42647390514189e-02f));
  // |v| >= 4: erf is +-1 in float32; exactly, so 1 + erf(x) in Gelu is exactly 0 there (the
  // FMA-evaluated P/Q at the clamp can be an ulp off 1, which Gelu multiplies by |x|).
  return hn::IfThenElse(hn::Ge(hn::Abs(v), hn::Set(d, 4.0f)), hn::CopySign(hn::Set(d, 1.0f), v), hn::Div(p, q));
}

template <class D>
HWY_INLINE hn::Vec<D> TanhRational(D d, hn::Vec<D> v) {
  const auto clamp = hn::Set(d, 7.90531110763549805f);
  const auto x = hn::Min(hn::Max(v, hn::Neg(clamp)), clamp);
  const auto x2 = hn::Mul(x, x);
  auto p = hn::MulAdd(x2, hn::Set(d, -2.76076847742355e-16f), hn::Set(d, 2.00018790482477e-13f));
  p = hn::MulAdd(x2, p, hn::Set(d, -8.60467152213735e-11f));
  p = hn::MulAdd(x2, p, hn::Set(d, 5.12229709037114e-08f));
  p = hn::MulAdd(x2, p, hn::Set(d, 1.48572235717979e-05f));
  p = hn::MulAdd(x2, p, hn::Set(d, 6.37261928875436e-04f));
  p = hn::MulAdd(x2, p, hn::Set(d, 4.89352455891786e-03f));
  p = hn::Mul(x, p);
  auto q = hn::MulAdd(x2, hn::Set(d, 1.19825839466702e-06f), hn::Set(d, 1.18534705686654e-04f));
  q = hn::MulAdd(x2, q, hn::Set(d, 2.26843463243900e-03f));
  q = hn::MulAdd(x2, q, hn::Set(d, 4.89352518554385e-03f));
  // Tiny |x|: tanh x = x in float32 (and P/Q loses precision for subnormal x).
  // Beyond the clamp tanh is +-1 in float32, returned exactly (see ErfRational).
  const auto r = hn::IfThenElse(hn::Ge(hn::Abs(v), clamp), hn::CopySign(hn::Set(d, 1.0f), v), hn::Div(p, q));
  return hn::IfThenElse(hn::Lt(hn::Abs(v), hn::Set(d, 0.0004f)), v, r);
}

}  // namespace HWY_NAMESPACE
}  // namespace gearbox::simd
HWY_AFTER_NAMESPACE();

#endif  // GEARBOX_SIMD_MATH_INL_H_
