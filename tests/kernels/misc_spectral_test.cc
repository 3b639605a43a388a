// DFT / STFT against numpy.fft, RoiAlign against torchvision.ops.roi_align
// (aligned=True is half_pixel; aligned=False matches opset 10's output_half_pixel here).
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

void expect_near(const Tensor& t, const Dims& d, const std::vector<double>& v, double tol = 1e-5) {
  ASSERT_EQ(t.dims(), d);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(t.at_double(int64_t(i)), v[i], tol) << i;
}

TEST(MiscSpectral, DftRealInput) {
  auto r = run_kernel(make_call("DFT", 17, {Tensor::from_vector<float>({1, 2, 0, -1}, {1, 4, 1})}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_near(r.value()[0], {1, 4, 2}, {2, 0, 1, -3, 0, 0, 1, 3});
}

TEST(MiscSpectral, DftPaddedOnesided) {
  auto c = make_call("DFT", 17, {Tensor::from_vector<float>({1, 2, 0, -1}, {1, 4, 1}), Tensor::scalar<int64_t>(6)});
  c.attrs["onesided"] = attr_int(1);
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_near(r.value()[0], {1, 4, 2}, {2, 0, 3, -1.7320508, -1, -1.7320508, 0, 0});
}

TEST(MiscSpectral, DftInverseComplex) {
  auto c = make_call("DFT", 17, {Tensor::from_vector<float>({1, 1, 2, 0, 0, -1}, {1, 3, 2})});
  c.attrs["inverse"] = attr_int(1);
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_near(r.value()[0], {1, 3, 2}, {1, 0, -0.28867513, 1.07735027, 0.28867513, -0.07735027});
}

TEST(MiscSpectral, Stft) {
  auto r = run_kernel(make_call("STFT", 17,
                         {Tensor::from_vector<float>({1, 2, 0, -1}, {1, 4, 1}), Tensor::scalar<int64_t>(2), Tensor(),
                          Tensor::scalar<int64_t>(2)}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_near(r.value()[0], {1, 2, 2, 2}, {3, 0, -1, 0, -1, 0, 1, 0});
}

TEST(MiscSpectral, RoiAlign) {
  std::vector<float> img(16);
  for (int i = 0; i < 16; ++i) img[size_t(i)] = float(i);
  Tensor x = Tensor::from_vector<float>(img, {1, 1, 4, 4});
  Tensor rois = Tensor::from_vector<float>({0.5f, 0.5f, 3.0f, 2.5f}, {1, 4});
  Tensor bi = Tensor::from_vector<int64_t>({0});
  auto c = make_call("RoiAlign", 16, {x, rois, bi});
  c.attrs["output_height"] = attr_int(2);
  c.attrs["output_width"] = attr_int(2);
  c.attrs["sampling_ratio"] = attr_int(2);
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_near(r.value()[0], {1, 1, 2, 2}, {2.625, 3.875, 6.625, 7.875});
  auto c10 = make_call("RoiAlign", 10, {x, rois, bi});
  c10.attrs["output_height"] = attr_int(2);
  c10.attrs["output_width"] = attr_int(2);
  auto r10 = run_kernel(c10);
  ASSERT_TRUE(r10.ok()) << r10.status().to_string();
  expect_near(r10.value()[0], {1, 1, 2, 2}, {5.125, 6.375, 9.125, 10.375});
}

TEST(MiscSpectral, RoiAlignBadBatchIndex) {
  auto c = make_call("RoiAlign", 16,
              {Tensor(DType::F32, {1, 1, 4, 4}), Tensor::from_vector<float>({0, 0, 1, 1}, {1, 4}),
               Tensor::from_vector<int64_t>({3})});
  auto r = run_kernel(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace gearbox::testing
