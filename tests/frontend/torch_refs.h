// Reading torch_reference.py's files (GEARBOX_FRONTEND_REF_DIR, written into the build tree at
// test time) and comparing against them: shared by the torch parity tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/npy.h"
#include "frontend/tensor_impl.h"

namespace gbx::nn::testing {

inline const std::string kRefDir = GEARBOX_FRONTEND_REF_DIR;

inline Tensor load(const std::string& path) {
  auto t = gearbox::read_npy(path);
  if (!t.ok()) throw std::runtime_error(t.status().to_string());
  return wrap(std::move(t.value()));
}

// Largest |a - b| / (atol + |b|) over the elements.
inline void expect_close(const Tensor& got, const Tensor& want, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  std::vector<double> g = got.to_double_vector(), w = want.to_double_vector();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double e = std::abs(g[i] - w[i]) / (atol / rtol + std::abs(w[i]));
    if (e > worst) worst = e, at = i;
  }
  EXPECT_LE(worst, rtol) << what << ": element " << at << " is " << g[at] << ", torch " << w[at];
}

}  // namespace gbx::nn::testing
