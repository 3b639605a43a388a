// Window functions (against torch.*_window), Det (numpy.linalg.det), MaxUnpool and
// MelWeightMatrix (the ONNX spec examples).
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

void expect_near(const Tensor& t, const Dims& d, const std::vector<double>& v, double tol = 1e-6) {
  ASSERT_EQ(t.dims(), d);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(t.at_double(int64_t(i)), v[i], tol) << i;
}

TEST(MiscSignal, Windows) {
  auto hann = run_kernel(make_call("HannWindow", 17, {Tensor::scalar<int64_t>(5)}));
  ASSERT_TRUE(hann.ok()) << hann.status().to_string();
  expect_near(hann.value()[0], {5}, {0.0, 0.3454915, 0.9045085, 0.9045085, 0.3454915});
  auto c = make_call("HammingWindow", 17, {Tensor::scalar<int32_t>(4)});
  c.attrs["periodic"] = attr_int(0);
  auto ham = run_kernel(c);
  ASSERT_TRUE(ham.ok()) << ham.status().to_string();
  expect_near(ham.value()[0], {4}, {0.0869565, 0.7717391, 0.7717391, 0.0869565});
  auto bl = run_kernel(make_call("BlackmanWindow", 17, {Tensor::scalar<int64_t>(6)}));
  ASSERT_TRUE(bl.ok()) << bl.status().to_string();
  expect_near(bl.value()[0], {6}, {0.0, 0.13, 0.63, 1.0, 0.63, 0.13});
}

TEST(MiscSignal, Det) {
  auto r = run_kernel(make_call("Det", 11, {Tensor::from_vector<float>({1, 2, 3, 4, 2, 0, 0, 3}, {2, 2, 2})}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_near(r.value()[0], {2}, {-2, 6}, 1e-5);
  auto p = run_kernel(make_call("Det", 11, {Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 9}, {3, 3})}));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  expect_near(p.value()[0], {}, {-3}, 1e-5);  // needs a pivot: a[0][0] is 0
  auto bad = run_kernel(make_call("Det", 11, {Tensor(DType::F32, {2, 3})}));
  EXPECT_FALSE(bad.ok());
}

TEST(MiscSignal, MaxUnpoolWithOutputShapeKeepsCoordinates) {
  auto c = make_call("MaxUnpool", 11,
              {Tensor::from_vector<float>({5, 6, 7, 8}, {1, 1, 2, 2}),
               Tensor::from_vector<int64_t>({5, 7, 13, 15}, {1, 1, 2, 2}), Tensor::from_vector<int64_t>({1, 1, 5, 5})});
  c.attrs["kernel_shape"] = attr_ints({2, 2});
  c.attrs["strides"] = attr_ints({2, 2});
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<double> want(25, 0.0);
  want[6] = 5;
  want[8] = 6;
  want[16] = 7;
  want[18] = 8;
  expect_near(r.value()[0], {1, 1, 5, 5}, want);
}

TEST(MiscSignal, MaxUnpoolIndexOutOfRange) {
  auto c = make_call("MaxUnpool", 11,
              {Tensor::from_vector<float>({5, 6, 7, 8}, {1, 1, 2, 2}),
               Tensor::from_vector<int64_t>({5, 7, 13, 99}, {1, 1, 2, 2})});
  c.attrs["kernel_shape"] = attr_ints({2, 2});
  c.attrs["strides"] = attr_ints({2, 2});
  auto r = run_kernel(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(MiscSignal, MelWeightMatrixSpecExample) {
  auto r = run_kernel(make_call("MelWeightMatrix", 17,
                         {Tensor::scalar<int32_t>(8), Tensor::scalar<int32_t>(16), Tensor::scalar<int32_t>(8192),
                          Tensor::scalar<float>(0), Tensor::scalar<float>(4096)}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // The spec's expected matrix [9, 8]: ones at (0,0) (0,1) (1,2) (1,3) (2,4) (3,5) (4,6) (5,7).
  std::vector<double> want(72, 0.0);
  for (auto [row, col] : std::vector<std::pair<int, int>>{{0, 0}, {0, 1}, {1, 2}, {1, 3}, {2, 4}, {3, 5}, {4, 6}, {5, 7}})
    want[size_t(row * 8 + col)] = 1;
  expect_near(r.value()[0], {9, 8}, want);
}

}  // namespace
}  // namespace gearbox::testing
