// Small helpers for the tensor-manipulation and reduction kernel tests: build
// typed tensors, run one op and compare a result with expected values (computed
// independently with numpy or taken from the ONNX spec, never from the code
// under test).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace gearbox::testing::shape {

// Dims {} with one value makes a 0-d scalar (from_vector alone would make it
// [1]).
template <typename T>
Tensor make(const std::vector<T> &v, Dims dims) {
  if (dims.empty() && v.size() == 1) return Tensor::from_vector<T>(v, {1}).reshaped({});
  return Tensor::from_vector<T>(v, std::move(dims));
}
inline Tensor i64(const std::vector<int64_t> &v) { return Tensor::from_vector<int64_t>(v, {int64_t(v.size())}); }
inline Tensor i64s(int64_t v) { return Tensor::scalar<int64_t>(v); }
// 0..n-1 as float32 in the given shape (numpy.arange(n).reshape(dims)).
inline Tensor arange_f32(Dims dims) {
  int64_t n = numel(dims);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(i);
  return make<float>(v, std::move(dims));
}

struct Run {
  std::string op;
  int opset = 17;
  std::vector<Tensor> inputs;
  AttributeMap attrs = {};
  size_t outputs = 1;
};

inline Result<std::vector<Tensor>> run(const Run &r) {
  KernelCall c;
  c.op_type = r.op;
  c.opset = r.opset;
  c.inputs = r.inputs;
  c.attrs = r.attrs;
  c.num_outputs = r.outputs;
  return run_kernel(c);
}

// Runs and returns output 0, failing the test when the kernel reports an error.
inline Tensor run1(const Run &r) {
  auto out = run(r);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return Tensor();
  return out.value()[0];
}

inline ErrorCode run_code(const Run &r) {
  auto out = run(r);
  return out.ok() ? ErrorCode::OK : out.status().code();
}

inline void expect_values(const Tensor &t, const Dims &dims, const std::vector<double> &want, double tol = 0) {
  ASSERT_TRUE(t.defined());
  ASSERT_EQ(t.dims(), dims);
  ASSERT_EQ(t.numel(), int64_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    const double got = t.at_double(int64_t(i));
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got)) << "element " << i;
    } else if (tol == 0) {
      EXPECT_EQ(got, want[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got, want[i], tol * std::max(1.0, std::fabs(want[i]))) << "element " << i;
    }
  }
}

}  // namespace gearbox::testing::shape
