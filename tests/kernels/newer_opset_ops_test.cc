// The reference kernels of ops new or changed at opsets 18 to 21 (GroupNormalization, Col2Im,
// CenterCropPad, AffineGrid, DFT-20, DeformConv): each form against an older op or form the ONNX node suite
// already gates, and the refusals of inputs that do not fit. Their numbers against ONNX Runtime
// are the oracle suite's (tests/conformance/oracle).
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

void expect_same(const Tensor& a, const Tensor& b, double tol = 1e-5) {
  ASSERT_EQ(a.dims(), b.dims());
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.at_double(i), b.at_double(i), tol) << i;
}

Tensor ramp(Dims d, float step = 0.37f) {
  std::vector<float> v(static_cast<size_t>(numel(d)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(step * float(i)) * 2.0f;
  return Tensor::from_vector<float>(v, d);
}

Status code_of(const KernelCall& c) {
  auto r = run_kernel(c);
  return r.ok() ? Status::OK() : r.status();
}

// One group is layer normalization over [C, H, W] (another kernel): with its scale and bias the
// per-channel values repeated over each plane, the two agree.
TEST(NewerOpsetOps, GroupNormWithOneGroupIsLayerNormOverChannelsAndPlanes) {
  Tensor x = ramp({2, 3, 4, 5});
  const std::vector<float> s{0.5f, -1.0f, 2.0f}, b{0.1f, 0.0f, -0.3f};
  std::vector<float> s_full, b_full;
  for (size_t ch = 0; ch < 3; ++ch)
    for (int i = 0; i < 20; ++i) s_full.push_back(s[ch]), b_full.push_back(b[ch]);
  auto ln =
      make_call("LayerNormalization", 17,
                {x, Tensor::from_vector<float>(s_full, {3, 4, 5}), Tensor::from_vector<float>(b_full, {3, 4, 5})});
  ln.attrs["axis"] = attr_int(1);
  auto want = run_kernel(ln);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  auto g = make_call("GroupNormalization", 21, {x, Tensor::from_vector<float>(s), Tensor::from_vector<float>(b)});
  g.attrs["num_groups"] = attr_int(1);
  auto got = run_kernel(g);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_same(got.value()[0], want.value()[0]);
}

// Opset 18's scale per group is opset 21's scale per channel repeated over the group.
TEST(NewerOpsetOps, GroupNorm18PerGroupScaleIs21PerChannelScaleRepeated) {
  Tensor x = ramp({2, 4, 3});
  auto g18 = make_call("GroupNormalization", 18,
                       {x, Tensor::from_vector<float>({1.5f, -0.5f}), Tensor::from_vector<float>({0.2f, 0.7f})});
  g18.attrs["num_groups"] = attr_int(2);
  auto g21 = make_call("GroupNormalization", 21,
                       {x, Tensor::from_vector<float>({1.5f, 1.5f, -0.5f, -0.5f}),
                        Tensor::from_vector<float>({0.2f, 0.2f, 0.7f, 0.7f})});
  g21.attrs["num_groups"] = attr_int(2);
  auto a = run_kernel(g18), b = run_kernel(g21);
  ASSERT_TRUE(a.ok() && b.ok());
  expect_same(a.value()[0], b.value()[0]);
  // Each opset refuses the other's scale length.
  auto wrong = g18;
  wrong.opset = 21;
  EXPECT_EQ(code_of(wrong).code(), ErrorCode::SHAPE_MISMATCH);
  g21.opset = 18;
  EXPECT_EQ(code_of(g21).code(), ErrorCode::SHAPE_MISMATCH);
  g18.attrs["num_groups"] = attr_int(3);  // does not divide 4 channels
  EXPECT_EQ(code_of(g18).code(), ErrorCode::ATTRIBUTE_INVALID);
}

// Blocks that tile the image without overlap: Col2Im only moves values. A 4x4 image of 2x2 blocks,
// stride 2: block position l = (by, bx), row k = (ky, kx) holds pixel (2 by + ky, 2 bx + kx).
TEST(NewerOpsetOps, Col2ImPlacesNonOverlappingBlocks) {
  std::vector<float> cols(16);
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < 4; ++l) cols[size_t(k * 4 + l)] = float(100 * k + l);
  auto c = make_call("Col2Im", 18,
                     {Tensor::from_vector<float>(cols, {1, 4, 4}), Tensor::from_vector<int64_t>({4, 4}),
                      Tensor::from_vector<int64_t>({2, 2})});
  c.attrs["strides"] = attr_ints({2, 2});
  auto r = run_kernel(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& y = r.value()[0];
  ASSERT_EQ(y.dims(), (Dims{1, 1, 4, 4}));
  for (int py = 0; py < 4; ++py)
    for (int px = 0; px < 4; ++px) {
      const int k = (py % 2) * 2 + px % 2, l = (py / 2) * 2 + px / 2;
      EXPECT_EQ(y.at_double(py * 4 + px), 100.0 * k + l) << py << "," << px;
    }
}

TEST(NewerOpsetOps, Col2ImRefusesBlocksThatDoNotFit) {
  auto c = make_call("Col2Im", 18,
                     {ramp({1, 4, 5}), Tensor::from_vector<int64_t>({4, 4}), Tensor::from_vector<int64_t>({2, 2})});
  EXPECT_EQ(code_of(c).code(), ErrorCode::SHAPE_MISMATCH);  // 9 positions, not 5
  c.inputs[2] = Tensor::from_vector<int64_t>({5, 1});
  EXPECT_EQ(code_of(c).code(), ErrorCode::INVALID_ARGUMENT);  // a 5-high block in a 4-high image
  c.inputs[2] = Tensor::from_vector<int64_t>({2, 0});
  EXPECT_EQ(code_of(c).code(), ErrorCode::INVALID_ARGUMENT);
  c.inputs[2] = Tensor::from_vector<int64_t>({2, 2, 2});
  EXPECT_EQ(code_of(c).code(), ErrorCode::INVALID_ARGUMENT);  // 3 block axes for 2 image axes
}

// Crop rows 1..3 of 5 (the odd row dropped at the end) and pad 2 columns to 5 (the odd one at the end).
TEST(NewerOpsetOps, CenterCropPadCropsAndPadsAroundTheCentre) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {5, 2});
  auto r = run_kernel(make_call("CenterCropPad", 18, {x, Tensor::from_vector<int64_t>({2, 5})}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& y = r.value()[0];
  ASSERT_EQ(y.dims(), (Dims{2, 5}));
  const std::vector<double> want{0, 3, 4, 0, 0, 0, 5, 6, 0, 0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y.at_double(int64_t(i)), want[i]) << i;
  EXPECT_EQ(code_of(make_call("CenterCropPad", 18, {x, Tensor::from_vector<int64_t>({2, -1})})).code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(code_of(make_call("CenterCropPad", 18, {x, Tensor::from_vector<int64_t>({2})})).code(),
            ErrorCode::INVALID_ARGUMENT);
}

// The identity transform gives the pixel centres themselves (x along W first).
TEST(NewerOpsetOps, AffineGridOfTheIdentityIsThePixelCentres) {
  Tensor theta = Tensor::from_vector<float>({1, 0, 0, 0, 1, 0}, {1, 2, 3});
  auto r = run_kernel(make_call("AffineGrid", 20, {theta, Tensor::from_vector<int64_t>({1, 1, 2, 4})}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& y = r.value()[0];
  ASSERT_EQ(y.dims(), (Dims{1, 2, 4, 2}));
  for (int h = 0; h < 2; ++h)
    for (int w = 0; w < 4; ++w) {
      EXPECT_NEAR(y.at_double((h * 4 + w) * 2), -1.0 + (2.0 * w + 1) / 4, 1e-6);
      EXPECT_NEAR(y.at_double((h * 4 + w) * 2 + 1), -1.0 + (2.0 * h + 1) / 2, 1e-6);
    }
  // A 2-D theta with a 3-D size.
  EXPECT_EQ(code_of(make_call("AffineGrid", 20, {theta, Tensor::from_vector<int64_t>({1, 1, 2, 2, 2})})).code(),
            ErrorCode::SHAPE_MISMATCH);
}

// DFT-20's axis input gives DFT-17's axis attribute's result; the real/imaginary axis is refused.
TEST(NewerOpsetOps, Dft20AxisInputMatchesDft17Attribute) {
  Tensor x = ramp({2, 5, 3, 1});
  auto c17 = make_call("DFT", 17, {x});
  c17.attrs["axis"] = attr_int(2);
  auto r17 = run_kernel(c17);
  ASSERT_TRUE(r17.ok()) << r17.status().to_string();
  for (int64_t axis : {2, -2}) {  // -2 is also DFT-20's default
    auto r20 = run_kernel(make_call("DFT", 20, {x, Tensor(), Tensor::scalar<int64_t>(axis)}));
    ASSERT_TRUE(r20.ok()) << r20.status().to_string();
    expect_same(r17.value()[0], r20.value()[0]);
  }
  auto r20d = run_kernel(make_call("DFT", 20, {x}));
  ASSERT_TRUE(r20d.ok());
  expect_same(r17.value()[0], r20d.value()[0]);
  EXPECT_EQ(code_of(make_call("DFT", 20, {x, Tensor(), Tensor::scalar<int64_t>(3)})).code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(code_of(make_call("DFT", 20, {x, Tensor(), Tensor::scalar<int64_t>(-5)})).code(),
            ErrorCode::INVALID_ARGUMENT);
}

// With zero offsets and a mask of ones, a deformable convolution is the convolution itself.
TEST(NewerOpsetOps, DeformConvWithZeroOffsetsIsConv) {
  Tensor x = ramp({2, 4, 6, 5}), w = ramp({6, 2, 3, 2}, 0.71f), b = ramp({6}, 1.3f);
  AttributeMap attrs{{"group", attr_int(2)},
                     {"strides", attr_ints({2, 1})},
                     {"pads", attr_ints({1, 0, 1, 1})},
                     {"dilations", attr_ints({1, 2})}};
  auto conv = make_call("Conv", 11, {x, w, b});
  conv.attrs = attrs;
  auto want = run_kernel(conv);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  const Dims od = want.value()[0].dims();  // [2, 6, oH, oW]
  Tensor off(DType::F32, {2, 2 * 6, od[2], od[3]});
  std::vector<float> ones(size_t(2 * 6 * od[2] * od[3]), 1.0f);
  auto dc = make_call("DeformConv", 19, {x, w, off, b, Tensor::from_vector<float>(ones, {2, 6, od[2], od[3]})});
  dc.attrs = attrs;
  auto got = run_kernel(dc);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_same(got.value()[0], want.value()[0], 1e-4);
  // An offset tensor of the wrong size; a 1-D convolution (not implemented: said so).
  dc.inputs[2] = Tensor(DType::F32, {2, 6, od[2], od[3]});
  EXPECT_EQ(code_of(dc).code(), ErrorCode::SHAPE_MISMATCH);
  auto one_d = make_call("DeformConv", 19, {ramp({1, 1, 5}), ramp({1, 1, 3}), Tensor(DType::F32, {1, 6, 3})});
  EXPECT_EQ(code_of(one_d).code(), ErrorCode::OP_UNSUPPORTED);
}

}  // namespace
}  // namespace gearbox::testing
