// cpu.simd element-wise kernels (elementwise.cc) against the cpu.ref kernels: every binary op
// over each broadcast the simd path takes (same shape, leading-1 dims, a scalar on either
// side, a side repeated over blocks: a trailing row, a column, a per-channel scale) at odd sizes around the vector and
// chunk lengths, the broadcasts it hands to the reference, shapes that do not broadcast (the reference's error on both
// paths); every unary op on random values, extremes and NaN; then both again on every Highway target compiled in and
// supported here (AVX-512, AVX2, scalar), forced in turn.
#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/simd_test_util.h"

namespace gearbox {
namespace {

using testing::expect_simd_matches_ref;
using testing::KernelCall;
using testing::make_call;
using testing::simd_random;
using testing::SimdPath;

const std::vector<std::string> kBinary{"Add", "Sub", "Mul", "Div"};

TEST(SimdElementwise, BinaryBroadcastsAgainstReference) {
  std::mt19937 g(20261130);
  struct Case {
    Dims a, b;
    SimdPath path;
  };
  const std::vector<Case> cases{
      {{7}, {7}, SimdPath::Simd},
      {{3, 17}, {3, 17}, SimdPath::Simd},
      {{1, 1, 40000}, {40000}, SimdPath::Simd},  // leading 1s, more than two OpenMP chunks
      {{5, 33}, {}, SimdPath::Simd},             // scalar b
      {{1}, {4, 9, 15}, SimdPath::Simd},         // one-element a
      {{128, 768}, {768}, SimdPath::Simd},       // bias-like row
      {{2, 12, 5, 31}, {1, 5, 31}, SimdPath::Simd},
      {{1, 31}, {64, 3, 31}, SimdPath::Simd},             // the row on the left
      {{300, 257}, {257}, SimdPath::Simd},                // rows over the threading threshold
      {{4, 1, 6}, {1, 5, 6}, SimdPath::Reference},        // both sides broadcast
      {{6, 4}, {6, 1}, SimdPath::Simd},                   // a column
      {{2, 3, 4, 5}, {2, 3, 1, 1}, SimdPath::Simd},       // a per-channel scale, NCHW at batch 2
      {{8, 7, 7, 16}, {8, 1, 1, 16}, SimdPath::Simd},     // the same channels-last at batch 8
      {{2, 3, 1, 1}, {2, 3, 4, 5}, SimdPath::Simd},       // the scale on the left
      {{2, 1, 5}, {2, 4, 5}, SimdPath::Simd},             // rows repeated within each outer block
      {{64, 130, 1}, {64, 130, 9}, SimdPath::Simd},       // over the threading threshold, row 1
      {{4, 3, 5, 6}, {1, 3, 1, 1}, SimdPath::Simd},       // BatchNormalization's [1, C, 1, 1] at batch 4
      {{1, 16, 1, 1}, {8, 16, 20, 20}, SimdPath::Simd},   // the same on the left, over the threading threshold
      {{2, 3, 4, 5}, {1, 3, 4, 1}, SimdPath::Simd},       // a batch repeat of an [outer, mid] block
      {{3, 1, 4, 1}, {3, 5, 4, 6}, SimdPath::Reference},  // two separate runs of 1s
      {{3, 4, 1}, {1, 4, 6}, SimdPath::Reference},        // both sides broadcast, one a batch repeat
      {{0, 3}, {3}, SimdPath::Reference},                 // empty
      {{4, 3}, {5, 3}, SimdPath::Simd},                   // does not broadcast: the reference's error on both
  };
  for (const std::string& op : kBinary)
    for (size_t i = 0; i < cases.size(); ++i) {
      Tensor b = simd_random(cases[i].b, g);
      if (op == "Div")  // keep quotients finite and comparable
        for (int64_t k = 0; k < b.numel(); ++k) b.data<float>()[k] += b.data<float>()[k] < 0 ? -0.5f : 0.5f;
      KernelCall call = make_call(op, 14, {simd_random(cases[i].a, g), b});
      expect_simd_matches_ref(call, op + " case " + std::to_string(i), cases[i].path, 0, 0);  // IEEE ops: exact
    }
}

TEST(SimdElementwise, UnaryAgainstReference) {
  std::mt19937 g(11);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::string op : {"Relu", "Neg", "Abs", "Sqrt", "Sigmoid", "Tanh", "Exp"}) {
    for (int64_t n : {1, 15, 16, 17, 100, 40001}) {
      Tensor x = simd_random({n}, g, op == "Sqrt" ? 0.f : -20.f, 20.f);
      expect_simd_matches_ref(make_call(op, 13, {x}), op + " n=" + std::to_string(n), SimdPath::Simd, 1e-30, 4e-6);
    }
    Tensor edge = Tensor::from_vector<float>(
        {0.f, -0.f, 1e-30f, -1e-30f, 88.f, 88.7f, 89.f, 100.f, -87.f, -100.f, -1e4f, 1e4f, inf, -inf, nan});
    if (op == "Sqrt") edge = Tensor::from_vector<float>({0.f, 1e-30f, 2.f, 1e30f, inf, nan, -1.f});
    expect_simd_matches_ref(make_call(op, 13, {edge}), op + " extremes", SimdPath::Simd, 1e-30, 4e-6);
  }
}

// The cpu.simd files share one target list (attention_core.h names it).
TEST(SimdElementwise, EveryCompiledTargetAgainstReference) {
  const std::vector<std::string> ran = testing::for_each_compiled_target([&](const std::string& name, int64_t t) {
    std::mt19937 g(static_cast<unsigned>(t % 1000));
    for (const std::string& op : kBinary)
      expect_simd_matches_ref(make_call(op, 14, {simd_random({3, 37}, g, 0.5f, 2.f), simd_random({37}, g, 0.5f, 2.f)}),
                              name + " " + op, SimdPath::Simd, 0, 0);
    for (const std::string op : {"Relu", "Sigmoid", "Tanh", "Exp"})
      expect_simd_matches_ref(make_call(op, 13, {simd_random({53}, g, -30.f, 30.f)}), name + " " + op, SimdPath::Simd,
                              1e-30, 4e-6);
  });
  EXPECT_NE(std::find(ran.begin(), ran.end(), std::string(simd::dispatch_target_name())), ran.end());
}

}  // namespace
}  // namespace gearbox
