// Tests for MaxPool (values and Indices), AveragePool (count_include_pad) and the global
// pools, with expected values from torch (max_pool2d with return_indices, avg_pool2d)
// computed when the test was written, and hand-computed global pools; com.gearbox.MaxPoolGrad
// against the MaxPool kernel's Indices.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"

namespace gearbox {
namespace {

using testing::attr_int;
using testing::attr_ints;
using testing::KernelCall;
using testing::make_call;
using testing::run_kernel;

// x = (arange(30).reshape(1,1,5,6) * 7 % 11) - 5
Tensor pool_input() {
  std::vector<float> v(30);
  for (int i = 0; i < 30; ++i) v[i] = static_cast<float>((i * 7) % 11 - 5);
  return Tensor::from_vector(v, {1, 1, 5, 6});
}

TEST(MaxPool, CeilModePadsAndIndicesMatchTorch) {
  // torch max_pool2d(kernel (3,2), stride 2, padding 1, ceil_mode=True, return_indices=True)
  KernelCall call = make_call("MaxPool", 12, {pool_input()});
  call.attrs["kernel_shape"] = attr_ints({3, 2});
  call.attrs["strides"] = attr_ints({2, 2});
  call.attrs["pads"] = attr_ints({1, 1, 1, 1});
  call.attrs["ceil_mode"] = attr_int(1);
  call.num_outputs = 2;
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<float> expect{4, 2, 5, -3, 4, 5, 3, 4, 0, 5, 4, 2};
  const std::vector<int64_t> expect_idx{6, 1, 3, 5, 6, 14, 9, 17, 18, 25, 28, 23};
  ASSERT_EQ(out.value()[0].dims(), (Dims{1, 1, 3, 4}));
  ASSERT_EQ(out.value()[1].dtype(), DType::I64);
  for (size_t i = 0; i < expect.size(); ++i) {
    EXPECT_EQ(out.value()[0].data<float>()[i], expect[i]) << i;
    EXPECT_EQ(out.value()[1].data<int64_t>()[i], expect_idx[i]) << i;
  }
}

TEST(MaxPool, ColumnMajorIndices) {
  // storage_order=1: index = w * H + h. 2x3 input, 2x2 kernel, stride 1: windows at w=0,1.
  KernelCall call = make_call("MaxPool", 12, {Tensor::from_vector<float>({1, 9, 2, 3, 4, 8}, {1, 1, 2, 3})});
  call.attrs["kernel_shape"] = attr_ints({2, 2});
  call.attrs["storage_order"] = attr_int(1);
  call.num_outputs = 2;
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  // Window 0 max 9 at (h0,w1) -> 1*2+0 = 2; window 1 max 9 at (h0,w1) -> 2 as well.
  EXPECT_EQ(out.value()[0].data<float>()[0], 9);
  EXPECT_EQ(out.value()[0].data<float>()[1], 9);
  EXPECT_EQ(out.value()[1].data<int64_t>()[0], 2);
  EXPECT_EQ(out.value()[1].data<int64_t>()[1], 2);
}

TEST(MaxPool, Uint8AndDilation) {
  // 1-D, kernel 2 with dilation 2: y[i] = max(x[i], x[i+2]).
  KernelCall call = make_call("MaxPool", 12, {Tensor::from_vector<uint8_t>({3, 200, 7, 1, 250}, {1, 1, 5})});
  call.attrs["kernel_shape"] = attr_ints({2});
  call.attrs["dilations"] = attr_ints({2});
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out.value()[0].dims(), (Dims{1, 1, 3}));
  EXPECT_EQ(out.value()[0].data<uint8_t>()[0], 7);
  EXPECT_EQ(out.value()[0].data<uint8_t>()[1], 200);
  EXPECT_EQ(out.value()[0].data<uint8_t>()[2], 250);
}

TEST(AveragePool, CountIncludePadMatchesTorch) {
  const std::vector<float> include{0.111111f,  0.444444f,  0.0f,      0.0f,      0.111111f,
                                   -0.555556f, -0.111111f, 0.111111f, -0.333333f};
  const std::vector<float> exclude{0.25f, 0.666667f, 0.0f, 0.0f, 0.111111f, -0.555556f, -0.25f, 0.166667f, -0.5f};
  for (int inc = 0; inc < 2; ++inc) {
    KernelCall call = make_call("AveragePool", 11, {pool_input()});
    call.attrs["kernel_shape"] = attr_ints({3, 3});
    call.attrs["strides"] = attr_ints({2, 2});
    call.attrs["pads"] = attr_ints({1, 1, 1, 1});
    call.attrs["count_include_pad"] = attr_int(inc);
    auto out = run_kernel(call);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    ASSERT_EQ(out.value()[0].dims(), (Dims{1, 1, 3, 3}));
    const auto& expect = inc ? include : exclude;
    for (size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(out.value()[0].data<float>()[i], expect[i], 1e-5) << i;
  }
}

TEST(GlobalPool, AverageAndMax) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4, -1, -2, -3, -8}, {1, 2, 2, 2});
  auto avg = run_kernel(make_call("GlobalAveragePool", 1, {x}));
  auto mx = run_kernel(make_call("GlobalMaxPool", 1, {x}));
  ASSERT_TRUE(avg.ok() && mx.ok());
  ASSERT_EQ(avg.value()[0].dims(), (Dims{1, 2, 1, 1}));
  EXPECT_DOUBLE_EQ(avg.value()[0].data<double>()[0], 2.5);
  EXPECT_DOUBLE_EQ(avg.value()[0].data<double>()[1], -3.5);
  EXPECT_DOUBLE_EQ(mx.value()[0].data<double>()[0], 4);
  EXPECT_DOUBLE_EQ(mx.value()[0].data<double>()[1], -1);
}

TEST(Pool, MissingKernelShapeIsAnError) {
  auto out = run_kernel(make_call("MaxPool", 12, {Tensor(DType::F32, {1, 1, 4, 4})}));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::ATTRIBUTE_INVALID);
}

KernelCall max_pool_grad_call(const Tensor& dy, const Tensor& indices, std::vector<int64_t> shape) {
  KernelCall call = make_call("MaxPoolGrad", 1, {dy, indices, Tensor::from_vector(shape)});
  call.domain = "com.gearbox";
  return call;
}

TEST(MaxPoolGrad, AddsEachGradientAtItsMaximumOverlappingWindowsIncluded) {
  // Overlapping 3x2 windows (stride 1, padding 1): an input that is the maximum of several
  // windows collects all their gradients; dX from the forward's Indices, summed here by hand.
  KernelCall fwd = make_call("MaxPool", 12, {pool_input()});
  fwd.attrs["kernel_shape"] = attr_ints({3, 2});
  fwd.attrs["pads"] = attr_ints({1, 1, 1, 1});
  fwd.num_outputs = 2;
  auto pooled = run_kernel(fwd);
  ASSERT_TRUE(pooled.ok()) << pooled.status().to_string();
  const Tensor& ind = pooled.value()[1];
  Tensor dy(DType::F32, ind.dims());
  for (int64_t i = 0; i < dy.numel(); ++i) dy.data<float>()[i] = 0.5f + static_cast<float>(i % 7);
  std::vector<double> want(30, 0.0);
  std::vector<int> windows(30, 0);
  for (int64_t i = 0; i < ind.numel(); ++i) {
    want[static_cast<size_t>(ind.data<int64_t>()[i])] += dy.data<float>()[i];
    ++windows[static_cast<size_t>(ind.data<int64_t>()[i])];
  }
  auto out = run_kernel(max_pool_grad_call(dy, ind, {1, 1, 5, 6}));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out.value()[0].dims(), (Dims{1, 1, 5, 6}));
  int shared = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(out.value()[0].data<float>()[i], want[i]) << i;
    shared += windows[i] > 1;
  }
  EXPECT_GT(shared, 0);
}

TEST(MaxPoolGrad, IndexMinusOnePassesNothingAndOthersOutsideAreErrors) {
  Tensor dy = Tensor::from_vector<float>({1, 2, 3}, {1, 1, 1, 3});
  auto out = run_kernel(max_pool_grad_call(dy, Tensor::from_vector<int64_t>({3, -1, 3}, {1, 1, 1, 3}), {1, 1, 2, 2}));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<float> want{0, 0, 0, 4};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(out.value()[0].data<float>()[i], want[i]) << i;
  for (int64_t bad : {4, -2})
    EXPECT_EQ(run_kernel(max_pool_grad_call(dy, Tensor::from_vector<int64_t>({0, bad, 1}, {1, 1, 1, 3}), {1, 1, 2, 2}))
                  .status()
                  .code(),
              ErrorCode::INVALID_ARGUMENT)
        << bad;
  EXPECT_EQ(
      run_kernel(max_pool_grad_call(dy, Tensor::from_vector<int64_t>({0, 1, 2}, {1, 1, 1, 3}), {4})).status().code(),
      ErrorCode::SHAPE_MISMATCH);  // rank
  EXPECT_EQ(run_kernel(max_pool_grad_call(dy, Tensor::from_vector<int64_t>({0, 1}, {1, 1, 1, 2}), {1, 1, 2, 2}))
                .status()
                .code(),
            ErrorCode::SHAPE_MISMATCH);  // Indices not dY's shape
}

}  // namespace
}  // namespace gearbox
