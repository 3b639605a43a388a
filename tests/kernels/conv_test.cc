// Tests for Conv and ConvTranspose: random cases (groups incl. depthwise, strides,
// dilations, asymmetric pads, auto_pad, 1-D/2-D/3-D, odd sizes) against a naive direct
// convolution / scatter written here, plus small cases with values from torch
// (torch.nn.functional.conv2d / conv_transpose2d) computed when the test was written.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"

namespace gearbox {
namespace {

using testing::attr_int;
using testing::attr_ints;
using testing::attr_string;
using testing::KernelCall;
using testing::make_call;
using testing::run_kernel;

Tensor random_tensor(DType dt, Dims dims, uint32_t seed) {
  Tensor t(dt, dims);
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::F32)
      t.data<float>()[i] = static_cast<float>(d(g));
    else
      t.data<double>()[i] = d(g);
  }
  return t;
}

struct ConvCase {
  Dims x;  // N, C, spatial...
  int64_t m, group;
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begin..., end...
  bool bias;
};

// Direct convolution in double over N-d (rank <= 3 spatial) with explicit pads.
std::vector<double> naive_conv(const Tensor& x, const Tensor& w, const Tensor* b, const ConvCase& c, Dims* out_dims) {
  const size_t k = c.kernel.size();
  const int64_t n = c.x[0], ch = c.x[1], cg = ch / c.group, mg = c.m / c.group;
  std::vector<int64_t> in(c.x.begin() + 2, c.x.end()), out(k);
  for (size_t i = 0; i < k; ++i)
    out[i] = (in[i] + c.pads[i] + c.pads[i + k] - ((c.kernel[i] - 1) * c.dilations[i] + 1)) / c.strides[i] + 1;
  *out_dims = {n, c.m};
  for (int64_t o : out) out_dims->push_back(o);
  int64_t out_plane = 1, in_plane = 1, kprod = 1;
  for (size_t i = 0; i < k; ++i) {
    out_plane *= out[i];
    in_plane *= in[i];
    kprod *= c.kernel[i];
  }
  std::vector<double> y(static_cast<size_t>(n * c.m * out_plane));
  for (int64_t img = 0; img < n; ++img)
    for (int64_t oc = 0; oc < c.m; ++oc) {
      const int64_t g = oc / mg;
      for (int64_t op = 0; op < out_plane; ++op) {
        std::vector<int64_t> oi(k);
        for (int64_t r = op, i = static_cast<int64_t>(k) - 1; i >= 0; --i) {
          oi[i] = r % out[i];
          r /= out[i];
        }
        double acc = b ? b->at_double(oc) : 0.0;
        for (int64_t icg = 0; icg < cg; ++icg) {
          const int64_t ic = g * cg + icg;
          for (int64_t kp = 0; kp < kprod; ++kp) {
            std::vector<int64_t> ki(k);
            for (int64_t r = kp, i = static_cast<int64_t>(k) - 1; i >= 0; --i) {
              ki[i] = r % c.kernel[i];
              r /= c.kernel[i];
            }
            int64_t xoff = 0;
            bool inside = true;
            for (size_t i = 0; i < k; ++i) {
              const int64_t p = oi[i] * c.strides[i] - c.pads[i] + ki[i] * c.dilations[i];
              if (p < 0 || p >= in[i]) inside = false;
              xoff = xoff * in[i] + p;
            }
            if (!inside) continue;
            acc += x.at_double((img * ch + ic) * in_plane + xoff) * w.at_double((oc * cg + icg) * kprod + kp);
          }
        }
        y[static_cast<size_t>((img * c.m + oc) * out_plane + op)] = acc;
      }
    }
  return y;
}

void check_conv(const ConvCase& c, DType dt, uint32_t seed) {
  Tensor x = random_tensor(dt, c.x, seed);
  Dims wd{c.m, c.x[1] / c.group};
  for (int64_t kk : c.kernel) wd.push_back(kk);
  Tensor w = random_tensor(dt, wd, seed + 1);
  Tensor b = random_tensor(dt, {c.m}, seed + 2);
  KernelCall call = make_call("Conv", 11, {x, w});
  if (c.bias) call.inputs.push_back(b);
  call.attrs["group"] = attr_int(c.group);
  call.attrs["strides"] = attr_ints(c.strides);
  call.attrs["dilations"] = attr_ints(c.dilations);
  call.attrs["pads"] = attr_ints(c.pads);
  call.attrs["kernel_shape"] = attr_ints(c.kernel);
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  Dims expect_dims;
  const auto expect = naive_conv(x, w, c.bias ? &b : nullptr, c, &expect_dims);
  const Tensor& y = out.value()[0];
  ASSERT_EQ(y.dims(), expect_dims);
  const double tol = dt == DType::F32 ? 1e-4 : 1e-11;
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_NEAR(y.at_double(i), expect[static_cast<size_t>(i)], tol) << i;
}

TEST(Conv, RandomCasesAgainstDirect) {
  const std::vector<ConvCase> cases = {
      // 2-D: plain 3x3, pad 1
      {{1, 3, 7, 9}, 5, 1, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      // 2-D: strides, dilations, asymmetric pads, batch 2, no bias
      {{2, 4, 11, 13}, 6, 1, {3, 2}, {2, 3}, {2, 1}, {1, 0, 2, 3}, false},
      // grouped
      {{1, 6, 9, 8}, 9, 3, {3, 3}, {1, 2}, {1, 1}, {1, 1, 0, 1}, true},
      // depthwise (one in/out channel per group), strided
      {{2, 8, 10, 9}, 8, 8, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, true},
      // depthwise with dilation
      {{1, 5, 12, 12}, 5, 5, {3, 3}, {1, 1}, {2, 2}, {2, 2, 2, 2}, false},
      // depthwise multiplier 2 (two outputs per group: goes through GEMM)
      {{1, 4, 7, 7}, 8, 4, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      // 1x1 stride 1: direct GEMM path, batch 3, groups 2
      {{3, 6, 5, 7}, 10, 2, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, true},
      // 1x1 stride 2 (im2col path)
      {{1, 16, 9, 9}, 33, 1, {1, 1}, {2, 2}, {1, 1}, {0, 0, 0, 0}, false},
      // large enough to split over threads and K blocks: K = 40 * 9 = 360
      {{1, 40, 17, 19}, 65, 1, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
      // 1-D
      {{2, 3, 17}, 4, 1, {5}, {2}, {1}, {2, 1}, true},
      // 3-D
      {{1, 2, 5, 6, 7}, 3, 1, {3, 2, 3}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 0, 1, 2}, true},
  };
  uint32_t seed = 100;
  for (const auto& c : cases) {
    check_conv(c, DType::F32, seed);
    check_conv(c, DType::F64, seed);
    seed += 10;
  }
}

TEST(Conv, MatchesTorchStrideDilationPads) {
  // torch.nn.functional.conv2d(x, w, b, stride=(2,1), padding=(1,2), dilation=(1,2)) with
  // x = arange(40).reshape(1,2,4,5)*0.1-2, w = arange(18).reshape(3,2,2,3)*0.05-0.4, b = [0.5,-1,2].
  std::vector<float> x(40), w(36);
  for (int i = 0; i < 40; ++i) x[i] = i * 0.1f - 2;
  for (int i = 0; i < 36; ++i) w[i] = i * 0.05f - 0.4f;
  KernelCall call = make_call("Conv", 11,
                              {Tensor::from_vector(x, {1, 2, 4, 5}), Tensor::from_vector(w, {3, 2, 2, 3}),
                               Tensor::from_vector<float>({0.5f, -1.0f, 2.0f})});
  call.attrs["strides"] = attr_ints({2, 1});
  call.attrs["pads"] = attr_ints({1, 2, 1, 2});
  call.attrs["dilations"] = attr_ints({1, 2});
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<float> expect{1.2,  1.19, 1.68, 1.35,  1.32,  1.99, 1.91,  2.68,  1.93,  1.81,  0.69,  0.62,
                                  0.6,  0.48, 0.39, -2.46, -2.23, -2.7, -2.07, -1.86, -0.23, 0.17,  0.82,  0.19,
                                  0.55, 0.63, 0.8,  1.62,  0.66,  0.81, -1.62, -1.15, -2.58, -0.99, -0.54, 2.05,
                                  2.93, 3.46, 2.95, 3.79,  5.07,  5.48, 7.14,  5.34,  5.73};
  ASSERT_EQ(out.value()[0].dims(), (Dims{1, 3, 3, 5}));
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(out.value()[0].data<float>()[i], expect[i], 1e-4) << i;
}

TEST(Conv, AutoPadSameUpperAndLower) {
  // SAME with an even kernel: total pad 1 goes to the end (UPPER) or the start (LOWER).
  Tensor x = random_tensor(DType::F32, {1, 2, 6, 7}, 7);
  Tensor w = random_tensor(DType::F32, {3, 2, 2, 2}, 8);
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER"}) {
    KernelCall call = make_call("Conv", 11, {x, w});
    call.attrs["auto_pad"] = attr_string(mode);
    auto out = run_kernel(call);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const bool upper = std::string(mode) == "SAME_UPPER";
    ConvCase c{{1, 2, 6, 7},
               3,
               1,
               {2, 2},
               {1, 1},
               {1, 1},
               upper ? std::vector<int64_t>{0, 0, 1, 1} : std::vector<int64_t>{1, 1, 0, 0},
               false};
    Dims dims;
    const auto expect = naive_conv(x, w, nullptr, c, &dims);
    ASSERT_EQ(out.value()[0].dims(), (Dims{1, 3, 6, 7}));
    for (size_t i = 0; i < expect.size(); ++i) ASSERT_NEAR(out.value()[0].data<float>()[i], expect[i], 1e-5);
  }
}

TEST(Conv, BadShapesAreErrors) {
  // C = 3 is not W[1] * group.
  auto out = run_kernel(make_call("Conv", 11, {Tensor(DType::F32, {1, 3, 5, 5}), Tensor(DType::F32, {4, 2, 3, 3})}));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::SHAPE_MISMATCH);
  // Kernel larger than the padded input.
  out = run_kernel(make_call("Conv", 11, {Tensor(DType::F32, {1, 1, 2, 2}), Tensor(DType::F32, {1, 1, 3, 3})}));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::SHAPE_MISMATCH);
}

// Naive ConvTranspose: scatter every input element times the kernel into the output.
std::vector<double> naive_conv_transpose(const Tensor& x, const Tensor& w, int64_t group, const Dims& y_dims,
                                         const std::vector<int64_t>& strides, const std::vector<int64_t>& pads) {
  const int64_t n = x.dim(0), c = x.dim(1), mg = w.dim(1), m = y_dims[1], cg = c / group;
  const int64_t ih = x.dim(2), iw = x.dim(3), kh = w.dim(2), kw = w.dim(3), oh = y_dims[2], ow = y_dims[3];
  std::vector<double> y(static_cast<size_t>(n * m * oh * ow), 0.0);
  for (int64_t img = 0; img < n; ++img)
    for (int64_t ic = 0; ic < c; ++ic) {
      const int64_t g = ic / cg;
      for (int64_t a = 0; a < ih; ++a)
        for (int64_t bb = 0; bb < iw; ++bb)
          for (int64_t o = 0; o < mg; ++o)
            for (int64_t p = 0; p < kh; ++p)
              for (int64_t q = 0; q < kw; ++q) {
                const int64_t yy = a * strides[0] - pads[0] + p, xx = bb * strides[1] - pads[1] + q;
                if (yy < 0 || yy >= oh || xx < 0 || xx >= ow) continue;
                const int64_t oc = g * mg + o;
                y[static_cast<size_t>(((img * m + oc) * oh + yy) * ow + xx)] +=
                    x.at_double(((img * c + ic) * ih + a) * iw + bb) * w.at_double(((ic * mg + o) * kh + p) * kw + q);
              }
    }
  return y;
}

TEST(ConvTranspose, GroupedStridedAgainstScatter) {
  Tensor x = random_tensor(DType::F32, {2, 4, 5, 6}, 11);
  Tensor w = random_tensor(DType::F32, {4, 3, 3, 4}, 12);  // group 2 -> M = 6
  KernelCall call = make_call("ConvTranspose", 11, {x, w});
  call.attrs["group"] = attr_int(2);
  call.attrs["strides"] = attr_ints({2, 3});
  call.attrs["pads"] = attr_ints({1, 0, 1, 2});
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  // out = s * (in - 1) + k - pads: (2*4 + 3 - 2, 3*5 + 4 - 2) = (9, 17)
  const Dims yd{2, 6, 9, 17};
  ASSERT_EQ(out.value()[0].dims(), yd);
  const auto expect = naive_conv_transpose(x, w, 2, yd, {2, 3}, {1, 0});
  for (size_t i = 0; i < expect.size(); ++i) ASSERT_NEAR(out.value()[0].data<float>()[i], expect[i], 1e-5) << i;
}

TEST(ConvTranspose, MatchesTorchOutputPadding) {
  // torch.nn.functional.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1) with
  // x = arange(18).reshape(1,2,3,3)*0.1-0.5, w = arange(36).reshape(2,2,3,3)*0.1-1.
  std::vector<float> x(18), w(36);
  for (int i = 0; i < 18; ++i) x[i] = i * 0.1f - 0.5f;
  for (int i = 0; i < 36; ++i) w[i] = i * 0.1f - 1.0f;
  KernelCall call =
      make_call("ConvTranspose", 11, {Tensor::from_vector(x, {1, 2, 3, 3}), Tensor::from_vector(w, {2, 2, 3, 3})});
  call.attrs["strides"] = attr_ints({2, 2});
  call.attrs["pads"] = attr_ints({1, 1, 1, 1});
  call.attrs["output_padding"] = attr_ints({1, 1});
  auto out = run_kernel(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<float> expect{
      0.78, 1.6,  0.84, 1.72, 0.9,  0.93, 1.56, 3.2,  1.68, 3.44, 1.8,  1.92, 0.96, 1.96, 1.02, 2.08, 1.08, 1.17,
      1.92, 3.92, 2.04, 4.16, 2.16, 2.4,  1.14, 2.32, 1.2,  2.44, 1.26, 1.41, 1.47, 3.04, 1.59, 3.28, 1.71, 1.86,
      0.69, 1.6,  0.93, 2.08, 1.17, 1.2,  1.92, 4.28, 2.4,  5.24, 2.88, 3.0,  1.41, 3.04, 1.65, 3.52, 1.89, 1.98,
      3.36, 7.16, 3.84, 8.12, 4.32, 4.56, 2.13, 4.48, 2.37, 4.96, 2.61, 2.76, 2.46, 5.2,  2.76, 5.8,  3.06, 3.21};
  ASSERT_EQ(out.value()[0].dims(), (Dims{1, 2, 6, 6}));
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(out.value()[0].data<float>()[i], expect[i], 1e-4) << i;
}

}  // namespace
}  // namespace gearbox
