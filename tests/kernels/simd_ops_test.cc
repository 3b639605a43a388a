// cpu.simd LayerNormalization, com.gearbox.LayerNormalization, com.gearbox.SkipLayerNormalization,
// Softmax, com.gearbox.Gelu and com.gearbox.GeluGrad against the cpu.ref kernels: row lengths that are not multiples
// of any vector width, several axes, large magnitudes, and the fall-back cases.
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/simd_test_util.h"

namespace gearbox {
namespace {

using testing::attr_float;
using testing::attr_int;
using testing::attr_string;
using testing::expect_simd_matches_ref;
using testing::KernelCall;
using testing::make_call;
using testing::simd_random;
using testing::SimdPath;

TEST(SimdEngine, DispatchesToAVectorTarget) {
  // The dispatched name is one Highway knows; on x86-64 never the scalar fallback unless the
  // CPU lacks AVX2 (then this still names the target it runs).
  const std::string name = simd::dispatch_target_name();
  EXPECT_FALSE(name.empty());
  EXPECT_NE(name, "Unknown");
}

TEST(SimdLayerNorm, RowsAxesScaleShapesAgainstReference) {
  std::mt19937 g(4);
  int cases = 0;
  for (const Dims& xd :
       std::vector<Dims>{{3, 1}, {2, 7}, {5, 17}, {4, 64}, {3, 100}, {2, 5, 768}, {2, 3, 5}, {1, 1, 33}})
    for (int64_t axis : {-1, 1})
      for (int variant = 0; variant < 4; ++variant) {
        const int64_t rank = static_cast<int64_t>(xd.size());
        const int64_t a = axis < 0 ? axis + rank : axis;
        Dims norm(xd.begin() + a, xd.end());
        Dims sdims = norm;
        if (variant == 1) sdims.insert(sdims.begin(), 1);                // leading 1 (still the row's shape)
        if (variant == 3 && norm.size() > 1) sdims = Dims{norm.back()};  // broadcast within the row
        const bool broadcasts = variant == 3 && norm.size() > 1 && norm[0] != 1;
        KernelCall c = make_call("LayerNormalization", 17, {simd_random(xd, g, -3.f, 5.f), simd_random(sdims, g)});
        if (variant != 2) c.inputs.push_back(simd_random(sdims, g));
        c.attrs["axis"] = attr_int(axis);
        if (variant == 1) c.attrs["epsilon"] = attr_float(1e-3f);
        const std::string what =
            "LN x " + to_string(xd) + " axis " + std::to_string(axis) + " v" + std::to_string(variant);
        expect_simd_matches_ref(c, what, broadcasts ? SimdPath::Reference : SimdPath::Simd);
        c.domain = "com.gearbox";
        c.opset = 1;
        expect_simd_matches_ref(c, "com.gearbox " + what, broadcasts ? SimdPath::Reference : SimdPath::Simd);
        ++cases;
      }
  EXPECT_EQ(cases, 64);
}

TEST(SimdLayerNorm, LargeOffsetAndFallbacks) {
  std::mt19937 g(9);
  // A large common offset: the two-pass variance keeps it exact enough.
  Tensor x = simd_random({6, 300}, g);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] += 1000.f;
  expect_simd_matches_ref(make_call("LayerNormalization", 17, {x, simd_random({300}, g), simd_random({300}, g)}),
                          "offset 1000", SimdPath::Simd, 2e-3, 1e-3);
  // Mean / InvStdDev outputs wanted.
  KernelCall c = make_call("LayerNormalization", 17, {simd_random({3, 9}, g), simd_random({9}, g)});
  c.num_outputs = 3;
  expect_simd_matches_ref(c, "with Mean/InvStdDev", SimdPath::Reference);
  // Scale that does not fit the row: both fail with the same code.
  expect_simd_matches_ref(make_call("LayerNormalization", 17, {simd_random({3, 9}, g), simd_random({8}, g)}),
                          "bad scale");
  // float64 is not served by cpu.simd at all (the executor picks cpu.ref).
  EXPECT_EQ(KernelRegistry::global().find("", "LayerNormalization", 17, kEngineSimd, DType::F64), nullptr);
}

TEST(SimdSkipLayerNorm, AgainstReference) {
  std::mt19937 g(12);
  for (const Dims& xd : std::vector<Dims>{{1, 1}, {3, 13}, {1, 128, 768}, {2, 9, 31}}) {
    const Dims norm{xd.back()};
    for (int with_bias = 0; with_bias < 2; ++with_bias) {
      KernelCall c = make_call("SkipLayerNormalization", 1,
                               {simd_random(xd, g, -4.f, 4.f), simd_random(xd, g), simd_random(norm, g)});
      if (with_bias) c.inputs.push_back(simd_random(norm, g));
      c.domain = "com.gearbox";
      c.attrs["epsilon"] = attr_float(1e-12f);
      expect_simd_matches_ref(c, "SkipLN " + to_string(xd) + (with_bias ? " +B" : ""));
    }
  }
  // A Skip that broadcasts runs the reference.
  KernelCall c = make_call("SkipLayerNormalization", 1,
                           {simd_random({4, 10}, g), simd_random({10}, g), simd_random({10}, g), simd_random({10}, g)});
  c.domain = "com.gearbox";
  expect_simd_matches_ref(c, "broadcast skip", SimdPath::Reference);
  // Skip of another shape that does not broadcast: both fail alike.
  c.inputs[1] = simd_random({3, 10}, g);
  expect_simd_matches_ref(c, "bad skip");
}

TEST(SimdSoftmax, RowsOpsetsAndMagnitudesAgainstReference) {
  std::mt19937 g(6);
  for (const Dims& xd : std::vector<Dims>{{1}, {3, 5}, {2, 3, 17}, {4, 129}, {2, 12, 128, 128}})
    for (float mag : {1.f, 300.f}) {
      KernelCall c = make_call("Softmax", 13, {simd_random(xd, g, -mag, mag)});
      expect_simd_matches_ref(c, "Softmax-13 " + to_string(xd) + " mag " + std::to_string(mag));
      // Before opset 13 the default axis 1 coerces dims[1:] into one row.
      c.opset = 11;
      expect_simd_matches_ref(c, "Softmax-11 " + to_string(xd));
    }
  // -inf entries (not a whole row) give exact zeros.
  Tensor x = simd_random({3, 20}, g);
  for (int64_t i = 0; i < x.numel(); i += 3) x.data<float>()[i] = -std::numeric_limits<float>::infinity();
  expect_simd_matches_ref(make_call("Softmax", 13, {x}), "-inf entries");
  // Opset 13 over a middle axis: the reference.
  KernelCall c = make_call("Softmax", 13, {simd_random({2, 6, 5}, g)});
  c.attrs["axis"] = attr_int(1);
  expect_simd_matches_ref(c, "axis 1 at opset 13", SimdPath::Reference);
  c.attrs["axis"] = attr_int(3);
  expect_simd_matches_ref(c, "axis out of range");
}

TEST(SimdGelu, ErfAndTanhFormsAgainstReference) {
  std::mt19937 g(2);
  for (int64_t n : {1, 7, 16, 33, 1000, 40001})
    for (const char* approx : {"none", "tanh"}) {
      KernelCall c = make_call("Gelu", 1, {simd_random({n}, g, -8.f, 8.f)});
      c.domain = "com.gearbox";
      c.attrs["approximate"] = attr_string(approx);
      // abs 4e-6: for x near -4..-8, 1 + erf(x) (or 1 + tanh) cancels to a few ulps of 1,
      // which both engines round differently (FMA here) and Gelu multiplies by x/2.
      expect_simd_matches_ref(c, std::string("Gelu ") + approx + " n " + std::to_string(n), SimdPath::Simd, 4e-6, 1e-5);
    }
  // Magnitudes far outside the polynomial ranges.
  Tensor x(DType::F32, {6});
  const float v[6] = {-1e4f, -30.f, -1e-30f, 0.f, 25.f, 3e4f};
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = v[i];
  KernelCall c = make_call("Gelu", 1, {x});
  c.domain = "com.gearbox";
  expect_simd_matches_ref(c, "Gelu extremes", SimdPath::Simd, 1e-6, 1e-5);
  c.attrs["approximate"] = attr_string("tanh");
  expect_simd_matches_ref(c, "Gelu tanh extremes", SimdPath::Simd, 1e-6, 1e-5);
  // float64 runs the reference.
  Tensor d(DType::F64, {5});
  for (int64_t i = 0; i < 5; ++i) d.data<double>()[i] = 0.5 * static_cast<double>(i) - 1.0;
  c = make_call("Gelu", 1, {d});
  c.domain = "com.gearbox";
  expect_simd_matches_ref(c, "Gelu float64", SimdPath::Reference);
}

// The gradient kernel: the reference in float64 against central differences of the reference
// Gelu (both forms), then cpu.simd against the reference.
TEST(SimdGeluGrad, ReferenceIsGelusDerivativeAndSimdMatchesIt) {
  for (const char* approx : {"none", "tanh"}) {
    const int64_t n = 41;
    Tensor x(DType::F64, {n}), ones(DType::F64, {n});
    for (int64_t i = 0; i < n; ++i) {
      x.data<double>()[i] = -6.0 + 0.3 * static_cast<double>(i);
      ones.data<double>()[i] = 1.0;
    }
    KernelCall grad = make_call("GeluGrad", 1, {ones, x});
    grad.domain = "com.gearbox";
    grad.engine = std::string(kEngineRef);
    grad.attrs["approximate"] = attr_string(approx);
    auto dx = testing::run_kernel(grad);
    ASSERT_TRUE(dx.ok()) << dx.status().to_string();
    const double h = 1e-6;
    auto gelu_at = [&](double shift) {
      Tensor xs(DType::F64, {n});
      for (int64_t i = 0; i < n; ++i) xs.data<double>()[i] = x.data<double>()[i] + shift;
      KernelCall c = make_call("Gelu", 1, {xs});
      c.domain = "com.gearbox";
      c.engine = std::string(kEngineRef);
      c.attrs["approximate"] = attr_string(approx);
      auto y = testing::run_kernel(c);
      EXPECT_TRUE(y.ok());
      return y.value()[0];
    };
    Tensor up = gelu_at(h), down = gelu_at(-h);
    for (int64_t i = 0; i < n; ++i) {
      const double fd = (up.data<double>()[i] - down.data<double>()[i]) / (2 * h);
      EXPECT_NEAR(dx.value()[0].data<double>()[i], fd, 1e-7) << approx << " at x = " << x.data<double>()[i];
    }
  }
  std::mt19937 g(3);
  for (int64_t n : {1, 7, 16, 33, 1000, 40001})
    for (const char* approx : {"none", "tanh"}) {
      KernelCall c = make_call("GeluGrad", 1, {simd_random({n}, g, -2.f, 2.f), simd_random({n}, g, -8.f, 8.f)});
      c.domain = "com.gearbox";
      c.attrs["approximate"] = attr_string(approx);
      expect_simd_matches_ref(c, std::string("GeluGrad ") + approx + " n " + std::to_string(n), SimdPath::Simd, 4e-6,
                              1e-5);
    }
  // Magnitudes far outside the polynomial ranges: the slope is 0 or 1 there.
  Tensor x(DType::F32, {6}), dy(DType::F32, {6});
  const float v[6] = {-1e4f, -30.f, -1e-30f, 0.f, 25.f, 3e19f};
  for (int i = 0; i < 6; ++i) {
    x.data<float>()[i] = v[i];
    dy.data<float>()[i] = 1.5f;
  }
  KernelCall c = make_call("GeluGrad", 1, {dy, x});
  c.domain = "com.gearbox";
  expect_simd_matches_ref(c, "GeluGrad extremes", SimdPath::Simd, 1e-6, 1e-5);
  c.attrs["approximate"] = attr_string("tanh");
  expect_simd_matches_ref(c, "GeluGrad tanh extremes", SimdPath::Simd, 1e-6, 1e-5);
  // Mismatched shapes: cpu.simd's kernel gives the node to the reference, which says why.
  c = make_call("GeluGrad", 1, {simd_random({4}, g), simd_random({5}, g)});
  c.domain = "com.gearbox";
  expect_simd_matches_ref(c, "GeluGrad shape mismatch", SimdPath::Reference);
}

}  // namespace
}  // namespace gearbox
