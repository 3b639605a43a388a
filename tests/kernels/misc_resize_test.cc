// Resize / Upsample against the examples of the ONNX operator spec (Operators.md).
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

void expect_values(const Tensor& t, const Dims& dims, const std::vector<double>& want) {
  ASSERT_EQ(t.dims(), dims);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.at_double(int64_t(i)), want[i], 1e-5) << "at " << i;
}

TEST(MiscResize, UpsampleScalesLinearHalfPixel) {
  auto c = make_call("Resize", 13,
              {Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2}), Tensor(),
               Tensor::from_vector<float>({1, 1, 2, 2})});
  c.attrs["mode"] = attr_string("linear");
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_values(r.value()[0], {1, 1, 4, 4},
                {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
}

TEST(MiscResize, DownsampleScalesNearest) {
  auto c = make_call("Resize", 13,
              {Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 4}), Tensor(),
               Tensor::from_vector<float>({1, 1, 0.6f, 0.6f})});
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_values(r.value()[0], {1, 1, 1, 2}, {1, 3});
}

TEST(MiscResize, DownsampleLinearAlignCornersUsesUnflooredWidth) {
  auto c = make_call("Resize", 13,
              {Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 4}), Tensor(),
               Tensor::from_vector<float>({1, 1, 0.6f, 0.6f})});
  c.attrs["mode"] = attr_string("linear");
  c.attrs["coordinate_transformation_mode"] = attr_string("align_corners");
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_values(r.value()[0], {1, 1, 1, 2}, {1, 3.142857});
}

TEST(MiscResize, UpsampleNearestRepeats) {
  auto c = make_call("Upsample", 9,
              {Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2}), Tensor::from_vector<float>({1, 1, 2, 3})});
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_values(r.value()[0], {1, 1, 4, 6},
                {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
}

TEST(MiscResize, BothScalesAndSizesIsAnError) {
  auto c = make_call("Resize", 13,
              {Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2}), Tensor(),
               Tensor::from_vector<float>({1, 1, 2, 2}), Tensor::from_vector<int64_t>({1, 1, 4, 4})});
  auto r = run_kernel(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace gearbox::testing
