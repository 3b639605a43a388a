// cpu.simd Resize and Upsample against cpu.ref (itself checked against the ONNX spec's
// examples, the node suite and ONNX Runtime's outputs): every mode, coordinate transform and
// nearest_mode, up- and downsampling by odd factors, NCHW (H, W) and channels-last (H, W with
// C after them) axes, antialias, exclude_outside, cubic_coeff_a, tf_crop_and_resize outside the
// image, sizes instead of scales, Resize-18's axes and aspect-ratio policies, opsets 10 to 19
// and Upsample; errors come from the same checks on both engines.
#include <random>
#include <string>
#include <vector>

#include "kernels/simd_test_util.h"

namespace gearbox {
namespace {

using testing::attr_float;
using testing::attr_floats;
using testing::attr_int;
using testing::attr_ints;
using testing::attr_string;
using testing::expect_simd_matches_ref;
using testing::KernelCall;
using testing::make_call;
using testing::simd_random;

Tensor floats(std::vector<float> v) { return Tensor::from_vector<float>(v, {static_cast<int64_t>(v.size())}); }
Tensor ints(std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); }

TEST(SimdResize, ModesTransformsAndScalesMatchTheReference) {
  std::mt19937 g(11);
  const std::vector<std::string> transforms{"half_pixel", "pytorch_half_pixel",   "align_corners",
                                            "asymmetric", "tf_half_pixel_for_nn", "half_pixel_symmetric"};
  int cases = 0;
  for (const std::string mode : {"nearest", "linear", "cubic"})
    for (const std::string& transform : transforms)
      for (const bool nhwc : {false, true})
        for (const auto& [sh, sw] : std::vector<std::pair<float, float>>{{2.f, 2.f}, {0.6f, 0.75f}, {3.f, 1.5f}}) {
          if (transform == "tf_half_pixel_for_nn" && mode != "nearest") continue;
          const Dims xd = nhwc ? Dims{2, 7, 9, 5} : Dims{2, 5, 7, 9};
          const std::vector<float> scales = nhwc ? std::vector<float>{1, sh, sw, 1} : std::vector<float>{1, 1, sh, sw};
          KernelCall c = make_call("Resize", 19, {simd_random(xd, g), Tensor(), floats(scales)});
          c.attrs["mode"] = attr_string(mode);
          c.attrs["coordinate_transformation_mode"] = attr_string(transform);
          const std::string what =
              mode + " " + transform + (nhwc ? " NHWC " : " NCHW ") + std::to_string(sh) + "x" + std::to_string(sw);
          expect_simd_matches_ref(c, what);
          ++cases;
        }
  EXPECT_EQ(cases, (6 + 5 + 5) * 2 * 3);
}

TEST(SimdResize, NearestModesAntialiasExcludeOutsideAndCubicCoefficient) {
  std::mt19937 g(12);
  for (const std::string nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
    KernelCall c = make_call("Resize", 13, {simd_random({1, 3, 8, 11}, g), Tensor(), floats({1, 1, 1.7f, 0.55f})});
    c.attrs["nearest_mode"] = attr_string(nm);
    c.attrs["coordinate_transformation_mode"] = attr_string("asymmetric");
    expect_simd_matches_ref(c, "nearest " + nm);
  }
  for (const std::string mode : {"linear", "cubic"})
    for (const float s : {0.35f, 0.5f, 0.8f, 1.6f}) {
      KernelCall c = make_call("Resize", 18, {simd_random({1, 2, 20, 17}, g), Tensor(), floats({1, 1, s, s})});
      c.attrs["mode"] = attr_string(mode);
      c.attrs["antialias"] = attr_int(1);
      c.attrs["exclude_outside"] = attr_int(s < 0.6f ? 1 : 0);
      if (mode == "cubic") c.attrs["cubic_coeff_a"] = attr_float(-0.5f);
      expect_simd_matches_ref(c, mode + " antialias " + std::to_string(s));
    }
}

TEST(SimdResize, CropSizesAxesAndPolicies) {
  std::mt19937 g(13);
  {  // tf_crop_and_resize with a region partly outside the image: extrapolation_value there
    KernelCall c = make_call(
        "Resize", 13,
        {simd_random({1, 2, 6, 6}, g), floats({0, 0, -0.2f, 0.4f, 1, 1, 0.7f, 1.3f}), Tensor(), ints({1, 2, 5, 7})});
    c.attrs["mode"] = attr_string("linear");
    c.attrs["coordinate_transformation_mode"] = attr_string("tf_crop_and_resize");
    c.attrs["extrapolation_value"] = attr_float(-3.f);
    expect_simd_matches_ref(c, "tf_crop_and_resize");
  }
  {  // sizes, every axis resized (batch and channels too)
    KernelCall c = make_call("Resize", 13, {simd_random({2, 3, 5, 4}, g), Tensor(), Tensor(), ints({3, 2, 9, 3})});
    c.attrs["mode"] = attr_string("linear");
    expect_simd_matches_ref(c, "sizes on every axis");
  }
  for (const std::string policy : {"stretch", "not_larger", "not_smaller"}) {
    KernelCall c = make_call("Resize", 18, {simd_random({1, 9, 13, 4}, g), Tensor(), Tensor(), ints({20, 16})});
    c.attrs["mode"] = attr_string("cubic");
    c.attrs["axes"] = attr_ints({1, 2});
    c.attrs["keep_aspect_ratio_policy"] = attr_string(policy);
    expect_simd_matches_ref(c, "axes 1, 2 " + policy);
  }
  {  // a 1-D signal and a 3-D volume
    KernelCall one = make_call("Resize", 13, {simd_random({40}, g), Tensor(), floats({0.3f})});
    one.attrs["mode"] = attr_string("linear");
    expect_simd_matches_ref(one, "1-D");
    KernelCall vol =
        make_call("Resize", 13, {simd_random({1, 2, 4, 5, 6}, g), Tensor(), floats({1, 1, 2, 0.5f, 1.5f})});
    vol.attrs["mode"] = attr_string("linear");
    expect_simd_matches_ref(vol, "3-D volume");
  }
  // Opset 10, Upsample-9 and -7.
  expect_simd_matches_ref(make_call("Resize", 10, {simd_random({1, 1, 3, 5}, g), floats({1, 1, 2.5f, 0.6f})}),
                          "Resize-10");
  expect_simd_matches_ref(make_call("Upsample", 9, {simd_random({1, 2, 3, 3}, g), floats({1, 1, 2, 3})}), "Upsample-9");
  KernelCall up7 = make_call("Upsample", 7, {simd_random({1, 2, 3, 3}, g)});
  up7.attrs["scales"] = attr_floats({1, 1, 2, 2});
  up7.attrs["mode"] = attr_string("linear");
  expect_simd_matches_ref(up7, "Upsample-7");
}

TEST(SimdResize, LargeImagesAndErrors) {
  std::mt19937 g(14);
  // The segmentation heads' upsampling (bench/corpus's lraspp, deeplabv3, db_text_detector).
  KernelCall seg = make_call("Resize", 13, {simd_random({1, 21, 48, 48}, g), Tensor(), floats({1, 1, 8, 8})});
  seg.attrs["mode"] = attr_string("linear");
  seg.attrs["coordinate_transformation_mode"] = attr_string("align_corners");
  expect_simd_matches_ref(seg, "1x21x48x48 x8 align_corners");
  KernelCall nhwc = make_call("Resize", 13, {simd_random({1, 40, 40, 64}, g), Tensor(), floats({1, 2, 2, 1})});
  nhwc.attrs["mode"] = attr_string("linear");
  expect_simd_matches_ref(nhwc, "channels-last x2");
  // The same error codes: both scales and sizes, a negative scale, an unknown mode.
  expect_simd_matches_ref(
      make_call("Resize", 13, {simd_random({1, 1, 2, 2}, g), Tensor(), floats({1, 1, 2, 2}), ints({1, 1, 4, 4})}),
      "scales and sizes");
  expect_simd_matches_ref(make_call("Resize", 13, {simd_random({1, 1, 2, 2}, g), Tensor(), floats({1, 1, -2, 2})}),
                          "negative scale");
  KernelCall bad = make_call("Resize", 13, {simd_random({1, 1, 2, 2}, g), Tensor(), floats({1, 1, 2, 2})});
  bad.attrs["mode"] = attr_string("bicubic");
  expect_simd_matches_ref(bad, "unknown mode");
  // float64 stays on the reference.
  EXPECT_EQ(KernelRegistry::global().find("", "Resize", 13, kEngineSimd, DType::F64), nullptr);
}

}  // namespace
}  // namespace gearbox
