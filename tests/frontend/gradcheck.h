// Finite-difference gradient check in float64: the analytic gradient of
// L(x...) = sum(f(x...) * w) (w fixed random, so every output element matters) against
// central differences (L(x + h e_i) - L(x - h e_i)) / 2h for every element of every input.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "gearbox/nn.hpp"

namespace gbx::nn::testing {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

inline Tensor random_f64(std::vector<int64_t> shape, double low = -1.0, double high = 1.0) {
  return Tensor::uniform(std::move(shape), low, high, DType::Float64);
}

inline double weighted_sum(const Tensor& y, const std::vector<double>& w) {
  std::vector<double> v = y.to_double_vector();
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += v[i] * w[i];
  return s;
}

// Checks every input with requires_grad. h = 1e-6 in float64 leaves a truncation error of
// O(h^2 f''') ~ 1e-12 and a rounding error of O(eps/h) ~ 1e-10: 1e-6 is far above both.
inline void gradcheck(const std::string& name, const Fn& f, std::vector<Tensor> inputs, double tol = 1e-6) {
  for (Tensor& x : inputs) x.zero_grad();
  Tensor y = f(inputs);
  std::vector<double> w = Tensor::uniform(y.shape(), 0.5, 1.5, DType::Float64).to_double_vector();
  Tensor seed = Tensor::from_vector(w, y.shape());
  y.backward(seed);
  const double h = 1e-6;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    ASSERT_TRUE(x.grad().defined()) << name << ": input " << k << " got no gradient";
    std::vector<double> analytic = x.grad().to_double_vector();
    auto* data = static_cast<double*>(x.mutable_data());
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double saved = data[i];
      double plus, minus;
      {
        NoGradGuard no_grad;
        data[i] = saved + h;
        plus = weighted_sum(f(inputs), w);
        data[i] = saved - h;
        minus = weighted_sum(f(inputs), w);
        data[i] = saved;
      }
      const double numeric = (plus - minus) / (2 * h);
      EXPECT_NEAR(analytic[i], numeric, tol * (1 + std::abs(numeric)))
          << name << ": d/d input" << k << "[" << i << "]";
    }
  }
}

}  // namespace gbx::nn::testing
