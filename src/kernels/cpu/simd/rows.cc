// The row-wise inner loops of the cpu.simd engine (LayerNorm with optional skip, Softmax,
// Gelu and its gradient), compiled per instruction set by Highway's foreach_target and picked at run time.
// Tails shorter than a vector run with masked loads, so any length works.

// Only the targets worth dispatching to on x86-64: AVX-512, AVX2 and the baseline.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/rows.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/simd/simd_math-inl.h"
#include "kernels/cpu/simd/simd_util.h"

HWY_BEFORE_NAMESPACE();
namespace gearbox::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

const char* TargetNameHere() { return hwy::TargetName(HWY_TARGET); }

void LayerNormRow(const float* x, const float* skip, const float* gamma, const float* beta, float* y, int64_t cols,
                  float eps) {
  const hn::ScalableTag<float> d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  // Pass 1: y = x + skip (or x), and its sum.
  auto s0 = hn::Zero(d), s1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * n <= cols; i += 2 * n) {
    auto a = hn::LoadU(d, x + i), b = hn::LoadU(d, x + i + n);
    if (skip) {
      a = hn::Add(a, hn::LoadU(d, skip + i));
      b = hn::Add(b, hn::LoadU(d, skip + i + n));
    }
    hn::StoreU(a, d, y + i);
    hn::StoreU(b, d, y + i + n);
    s0 = hn::Add(s0, a);
    s1 = hn::Add(s1, b);
  }
  for (; i < cols; i += n) {
    auto a = LoadN(d, x + i, cols - i);
    if (skip) a = hn::Add(a, LoadN(d, skip + i, cols - i));
    StoreN(a, d, y + i, cols - i);
    s0 = hn::Add(s0, a);
  }
  const float mean = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1))) / static_cast<float>(cols);
  // Pass 2: variance from squared deviations (no cancellation, unlike E[x^2] - mean^2).
  const auto vmean = hn::Set(d, mean);
  s0 = hn::Zero(d);
  s1 = hn::Zero(d);
  for (i = 0; i + n <= cols; i += n) {
    const auto c = hn::Sub(hn::LoadU(d, y + i), vmean);
    s0 = hn::MulAdd(c, c, s0);
  }
  if (i < cols) {
    const auto c =
        hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(cols - i)), hn::Sub(LoadN(d, y + i, cols - i), vmean));
    s1 = hn::MulAdd(c, c, s1);
  }
  const float var = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1))) / static_cast<float>(cols);
  const auto inv = hn::Set(d, 1.0f / std::sqrt(var + eps));
  // Pass 3: normalize, scale, shift.
  for (i = 0; i < cols; i += n) {
    auto v = hn::Mul(hn::Mul(hn::Sub(LoadN(d, y + i, cols - i), vmean), inv), LoadN(d, gamma + i, cols - i));
    if (beta) v = hn::Add(v, LoadN(d, beta + i, cols - i));
    StoreN(v, d, y + i, cols - i);
  }
}

void SoftmaxRow(const float* x, float* y, int64_t len) {
  const hn::ScalableTag<float> d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const auto ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  auto mx = ninf;
  for (int64_t i = 0; i < len; i += n) {
    mx = hn::Max(mx, hn::IfThenElse(hn::FirstN(d, static_cast<size_t>(std::min<int64_t>(n, len - i))),
                                    LoadN(d, x + i, len - i), ninf));
  }
  const auto vmax = hn::MaxOfLanes(d, mx);
  auto sum = hn::Zero(d);
  for (int64_t i = 0; i < len; i += n) {
    const auto e = hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(std::min<int64_t>(n, len - i))),
                                      ExpNonPositive(d, hn::Sub(LoadN(d, x + i, len - i), vmax)));
    StoreN(e, d, y + i, len - i);
    sum = hn::Add(sum, e);
  }
  const auto inv = hn::Div(hn::Set(d, 1.0f), hn::SumOfLanes(d, sum));
  for (int64_t i = 0; i < len; i += n) {
    StoreN(hn::Mul(LoadN(d, y + i, len - i), inv), d, y + i, len - i);
  }
}

void GeluSpan(const float* x, float* y, int64_t len, bool tanh_form) {
  const hn::ScalableTag<float> d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const auto half = hn::Set(d, 0.5f), one = hn::Set(d, 1.0f);
  for (int64_t i = 0; i < len; i += n) {
    const auto v = LoadN(d, x + i, len - i);
    hn::Vec<decltype(d)> t;
    if (tanh_form) {
      const auto v3 = hn::Mul(hn::Mul(v, v), v);
      t = TanhRational(d, hn::Mul(hn::Set(d, 0.7978845608028654f), hn::MulAdd(hn::Set(d, 0.044715f), v3, v)));
    } else {
      t = ErfRational(d, hn::Mul(v, hn::Set(d, 0.7071067811865476f)));
    }
    StoreN(hn::Mul(hn::Mul(half, v), hn::Add(one, t)), d, y + i, len - i);
  }
}

void GeluGradSpan(const float* dy, const float* x, float* dx, int64_t len, bool tanh_form) {
  const hn::ScalableTag<float> d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const auto half = hn::Set(d, 0.5f), one = hn::Set(d, 1.0f);
  for (int64_t i = 0; i < len; i += n) {
    const auto v = LoadN(d, x + i, len - i);
    hn::Vec<decltype(d)> slope;
    if (tanh_form) {
      // sech^2(u) = 4 e / (1 + e)^2 with e = exp(-2|u|), as the reference computes it (1 - t^2
      // cancels for |u| > 3).
      const auto k = hn::Set(d, 0.7978845608028654f), c = hn::Set(d, 0.044715f);
      const auto v2 = hn::Mul(v, v);
      const auto u = hn::Mul(k, hn::MulAdd(hn::Mul(c, v2), v, v));
      const auto e = ExpNonPositive(d, hn::Mul(hn::Set(d, -2.0f), hn::Abs(u)));
      const auto one_e = hn::Add(one, e);
      const auto sech2 = hn::Div(hn::Mul(hn::Set(d, 4.0f), e), hn::Mul(one_e, one_e));
      // sech2 == 0 far out, where (1 + 3 c x^2) may be inf: the term is 0, not NaN.
      const auto inner = hn::IfThenZeroElse(
          hn::Eq(sech2, hn::Zero(d)), hn::Mul(hn::Mul(k, sech2), hn::MulAdd(hn::Mul(hn::Set(d, 3.0f), c), v2, one)));
      slope = hn::Mul(half, hn::Add(hn::Add(one, TanhRational(d, u)), hn::Mul(v, inner)));
    } else {
      const auto cdf = hn::Mul(half, hn::Add(one, ErfRational(d, hn::Mul(v, hn::Set(d, 0.7071067811865476f)))));
      const auto pdf =
          hn::Mul(hn::Set(d, 0.3989422804014327f), ExpNonPositive(d, hn::Mul(hn::Set(d, -0.5f), hn::Mul(v, v))));
      slope = hn::MulAdd(v, pdf, cdf);
    }
    StoreN(hn::Mul(LoadN(d, dy + i, len - i), slope), d, dx + i, len - i);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace gearbox::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gearbox::simd {
HWY_EXPORT(TargetNameHere);
HWY_EXPORT(LayerNormRow);
HWY_EXPORT(SoftmaxRow);
HWY_EXPORT(GeluSpan);
HWY_EXPORT(GeluGradSpan);

const char* dispatch_target_name() { return HWY_DYNAMIC_DISPATCH(TargetNameHere)(); }
void layer_norm_row(const float* x, const float* skip, const float* gamma, const float* beta, float* y, int64_t cols,
                    float eps) {
  HWY_DYNAMIC_DISPATCH(LayerNormRow)(x, skip, gamma, beta, y, cols, eps);
}
void softmax_row(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(SoftmaxRow)(x, y, n); }
void gelu_span(const float* x, float* y, int64_t n, bool tanh_form) {
  HWY_DYNAMIC_DISPATCH(GeluSpan)(x, y, n, tanh_form);
}
void gelu_grad_span(const float* dy, const float* x, float* dx, int64_t n, bool tanh_form) {
  HWY_DYNAMIC_DISPATCH(GeluGradSpan)(dy, x, dx, n, tanh_form);
}
}  // namespace gearbox::simd
#endif
