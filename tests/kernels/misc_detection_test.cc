// NonMaxSuppression (ONNX spec example) and GridSample (values from torch.nn.functional
// .grid_sample, which defines the same sampling for these modes).
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

TEST(MiscNms, SuppressByIou) {
  Tensor boxes = Tensor::from_vector<float>({0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f, 0, 10, 1, 11, 0, 10.1f,
                                             1, 11.1f, 0, 100, 1, 101},
                                            {1, 6, 4});
  Tensor scores = Tensor::from_vector<float>({0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f}, {1, 1, 6});
  auto c = make_call("NonMaxSuppression", 11,
              {boxes, scores, Tensor::from_vector<int64_t>({3}), Tensor::from_vector<float>({0.5f}),
               Tensor::from_vector<float>({0.0f})});
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& y = r.value()[0];
  ASSERT_EQ(y.dims(), (Dims{3, 3}));
  const int64_t want[] = {0, 0, 3, 0, 0, 0, 0, 0, 5};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(y.data<int64_t>()[i], want[i]);
}

TEST(MiscNms, BadBoxesShape) {
  auto c = make_call("NonMaxSuppression", 11, {Tensor(DType::F32, {1, 6, 3}), Tensor(DType::F32, {1, 1, 6})});
  auto r = run_kernel(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::SHAPE_MISMATCH);
}

struct GsCase {
  const char* mode;
  const char* pad;
  int align;
  double want[3];
};

TEST(MiscGridSample, ModesAndPadding) {
  const GsCase cases[] = {
      {"bilinear", "zeros", 0, {0.0, 4.3, 0.11500044}},     {"bilinear", "zeros", 1, {0.0, 3.45, 2.03}},
      {"bilinear", "border", 0, {0.0, 4.3, 2.3}},           {"bilinear", "border", 1, {0.0, 3.45, 2.9}},
      {"bilinear", "reflection", 0, {0.0, 4.3, 2.3}},       {"bilinear", "reflection", 1, {0.0, 3.45, 2.6}},
      {"nearest", "zeros", 0, {0.0, 4.0, 0.0}},             {"nearest", "zeros", 1, {0.0, 4.0, 2.0}},
      {"nearest", "border", 0, {0.0, 4.0, 2.0}},            {"bicubic", "zeros", 0, {-0.1875, 4.6255007, 0.0963009}},
      {"bicubic", "zeros", 1, {0.0, 4.205625, 2.502409}},
  };
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {1, 1, 2, 3});
  Tensor g = Tensor::from_vector<float>({-1, -1, 0.2f, 0.5f, 1.3f, -0.4f}, {1, 1, 3, 2});
  for (const auto& tc : cases) {
    auto c = make_call("GridSample", 16, {x, g});
    c.attrs["mode"] = attr_string(tc.mode);
    c.attrs["padding_mode"] = attr_string(tc.pad);
    c.attrs["align_corners"] = attr_int(tc.align);
    auto r = run_kernel(c);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r.value()[0].dims(), (Dims{1, 1, 1, 3}));
    for (int i = 0; i < 3; ++i)
      EXPECT_NEAR(r.value()[0].at_double(i), tc.want[i], 1e-5) << tc.mode << " " << tc.pad << " " << tc.align;
  }
}

TEST(MiscGridSample, NanGridReadsAsZeroPadding) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor g = Tensor::from_vector<float>({NAN, 0.f, 0.f, 0.f}, {1, 1, 2, 2});
  auto r = run_kernel(make_call("GridSample", 16, {x, g}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value()[0].at_double(0), 0.0);
  EXPECT_NEAR(r.value()[0].at_double(1), 2.5, 1e-6);  // the centre averages all four pixels
}

}  // namespace
}  // namespace gearbox::testing
