// Branch-free float32 approximations of libm functions for the element-wise kernels.
// libm calls are not vectorized without -ffast-math; these plain polynomial forms are, and
// they matter on real models (GELU in BERT calls Erf on every FFN activation).
#pragma once

#include <algorithm>

namespace gearbox::ref {

// erf(x) as the rational approximation x*P(x^2)/Q(x^2) on [-4, 4] (beyond, erf is +-1 in
// float32), with the coefficients Eigen and XLA use. Checked against Python's math.erf on
// 200001 points of [-6, 6]: max relative error 4.2e-7 (a few ulps). NaN propagates
// (std::min/max return their first argument when the comparison is false).
inline float fast_erf(float v) {
  const float x = std::max(std::min(v, 4.0f), -4.0f);
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
  return p / q;
}

}  // namespace gearbox::ref
