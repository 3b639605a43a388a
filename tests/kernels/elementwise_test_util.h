// Small helpers for the element-wise kernel tests: build tensors, run one op, compare.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace gearbox::testing {

template <typename T>
Tensor tensor(const std::vector<T>& v, Dims dims = {}) {
  return Tensor::from_vector<T>(v, dims.empty() ? Dims{static_cast<int64_t>(v.size())} : dims);
}
inline Tensor f32(const std::vector<float>& v, Dims dims = {}) { return tensor<float>(v, dims); }
inline Tensor f32s(float v) { return Tensor::scalar<float>(v); }  // 0-d
inline Tensor f16(const std::vector<float>& v, Dims dims = {}) {
  std::vector<Half> h;
  for (float x : v) h.emplace_back(x);
  return tensor<Half>(h, dims);
}

// Runs op at opset with inputs and attributes; fails the test on error.
inline Tensor run1(const std::string& op, int opset, std::vector<Tensor> inputs, AttributeMap attrs = {}) {
  KernelCall call;
  call.op_type = op;
  call.opset = opset;
  call.inputs = std::move(inputs);
  call.attrs = std::move(attrs);
  auto r = run_kernel(call);
  EXPECT_TRUE(r.ok()) << op << ": " << r.status().to_string();
  return r.ok() ? r.value()[0] : Tensor();
}

// The error code the op reports (OK if it succeeds).
inline ErrorCode run_code(const std::string& op, int opset, std::vector<Tensor> inputs, AttributeMap attrs = {}) {
  KernelCall call;
  call.op_type = op;
  call.opset = opset;
  call.inputs = std::move(inputs);
  call.attrs = std::move(attrs);
  auto r = run_kernel(call);
  return r.ok() ? ErrorCode::OK : r.status().code();
}

// Element values as doubles (float16/bfloat16 widened), for comparisons.
inline std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.at_double(i));
  return v;
}

// Compares with a relative tolerance (plus a tiny absolute one for values near 0); NaN
// matches NaN.
inline void expect_close(const Tensor& t, const std::vector<double>& want, double rtol = 1e-6,
                         double atol = 1e-7) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    const double got = t.at_double(static_cast<int64_t>(i));
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got)) << "index " << i;
      continue;
    }
    if (std::isinf(want[i])) {
      EXPECT_EQ(got, want[i]) << "index " << i;
      continue;
    }
    EXPECT_NEAR(got, want[i], atol + rtol * std::fabs(want[i])) << "index " << i;
  }
}

inline void expect_exact(const Tensor& t, const std::vector<double>& want) { expect_close(t, want, 0, 0); }

}  // namespace gearbox::testing
