// Branch-free float32 approximations of libm functions for the element-wise kernels.
// libm calls are not vectorized without -ffast-math; these plain polynomial forms are, and
// they matter on real models (GELU in BERT calls Erf on every FFN activation).
//
// Clamping is done with integer masks on the bit patterns: with GCC's default
// -ftrapping-math a select in the loop body (float or integer ?:) keeps it from being
// if-converted and vectorized; mask arithmetic does not. For non-negative floats the bit
// patterns order like the values.
#pragma once

#include <bit>
#include <cstdint>

namespace gearbox::ref {

// Selects a where mask is all ones, b where it is zero.
inline uint32_t select_bits(uint32_t mask, uint32_t a, uint32_t b) { return (a & mask) | (b & ~mask); }

// erf(x) as the rational approximation x*P(x^2)/Q(x^2) on [-4, 4] (beyond, erf is +-1 in
// float32), with the coefficients Eigen and XLA use. Checked against Python's math.erf on
// 200001 points of [-6, 6]: max relative error 4.2e-7 (a few ulps). NaN propagates.
inline float fast_erf(float v) {
  const uint32_t vb = std::bit_cast<uint32_t>(v);
  const uint32_t sign = vb & 0x80000000u, ab = vb & 0x7fffffffu;
  constexpr uint32_t kFour = 0x40800000u;  // 4.0f
  const uint32_t big = 0u - static_cast<uint32_t>(ab > kFour);  // all ones when |v| > 4 (or NaN)
  const float x = std::bit_cast<float>(select_bits(big, kFour, ab) | sign);
  const float x2 = x * x;
  float p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
  p = x2 * p + -2.10102402082508e-06f;
  p = x2 * p + -5.69250639462346e-05f;
  p = x2 * p + -7.34990630326855e-04f;
  p = x2 * p + -2.95459980854025e-03f;
  p = x2 * p + -1.60960333262415e-02f;
  p = x * p;
  float q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
  q = x2 * q + -1.68282697438203e-03f;
  q = x2 * q + -7.37332916720468e-03f;
  q = x2 * q + -1.42647390514189e-02f;
  const uint32_t nan = 0u - static_cast<uint32_t>(ab > 0x7f800000u);  // NaN in, NaN out
  const uint32_t rb = std::bit_cast<uint32_t>(p / q);
  return std::bit_cast<float>(select_bits(nan, 0x7fc00000u | sign, rb));
}

// tanh(x) as the rational approximation x*P(x^2)/Q(x^2) on [-7.9053, 7.9053] (beyond, tanh
// is +-1 in float32), with Eigen's coefficients; |x| < 0.0004 returns x (tanh x = x - x^3/3
// is x in float32 there, and P/Q loses precision for subnormal x). Checked against
// numpy.tanh in float64 on 400001 points of [-10, 10]: max relative error 3.9e-7.
inline float fast_tanh(float v) {
  const uint32_t vb = std::bit_cast<uint32_t>(v);
  const uint32_t sign = vb & 0x80000000u, ab = vb & 0x7fffffffu;
  constexpr uint32_t kClamp = 0x40FCF84Fu;  // 7.90531110763549805f
  const uint32_t big = 0u - static_cast<uint32_t>(ab > kClamp);
  const float x = std::bit_cast<float>(select_bits(big, kClamp, ab) | sign);
  const float x2 = x * x;
  float p = x2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
  p = x2 * p + -8.60467152213735e-11f;
  p = x2 * p + 5.12229709037114e-08f;
  p = x2 * p + 1.48572235717979e-05f;
  p = x2 * p + 6.37261928875436e-04f;
  p = x2 * p + 4.89352455891786e-03f;
  p = x * p;
  float q = x2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
  q = x2 * q + 2.26843463243900e-03f;
  q = x2 * q + 4.89352518554385e-03f;
  const uint32_t rb = std::bit_cast<uint32_t>(p / q);
  // Tiny |x| and NaN return the input itself.
  const uint32_t keep = 0u - static_cast<uint32_t>((ab < 0x39D1B717u) | (ab > 0x7f800000u));  // 0.0004f
  return std::bit_cast<float>(select_bits(keep, vb, rb));
}

}  // namespace gearbox::ref
