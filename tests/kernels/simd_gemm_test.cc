// The cpu.simd GEMM (MatMul, Gemm, FusedMatMul, FusedGemm: kernels/cpu/simd/gemm*.cc)
// against the cpu.ref kernels: randomized shapes around and across the register and cache
// blocking (1, odd sizes, M < MR, N < NR, K not a multiple of the K block, several M blocks),
// numpy batch broadcasting, transA/transB/alpha/beta and every broadcast form of C, every
// fused activation with and without bias, constant (packed once, cached) and run-time B
// (packed per call, never cached), and the configurations handed to the reference.
// Tolerances grow with K (float sums of K products in another order than the reference's).
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cpu/simd/gemm.h"
#include "kernels/simd_test_util.h"

namespace gearbox {
namespace {

using testing::attr_float;
using testing::attr_int;
using testing::expect_simd_matches_ref;
using testing::KernelCall;
using testing::make_call;
using testing::simd_random;
using testing::SimdPath;

// Inputs in [-1, 1]: a sum of K products differs from the reference's order by a few ulps
// of partial sums of magnitude up to ~sqrt(K).
void expect_gemm(const KernelCall& call, int64_t k, const std::string& what, SimdPath path = SimdPath::Simd) {
  expect_simd_matches_ref(call, what, path, 1e-5 + 2e-6 * static_cast<double>(k), 1e-4);
}

Attribute floats_attr(std::vector<float> v) {
  Attribute a;
  a.type = AttrType::Floats;
  a.floats = std::move(v);
  return a;
}

TEST(SimdGemm, BlockingReportsARegisterTile) {
  const simd::gemm::Blocking b = simd::gemm::blocking();
  EXPECT_GE(b.mr, 1);
  EXPECT_GE(b.nr, 1);
  EXPECT_LE(b.mr, 8);
}

TEST(SimdMatMul, RandomizedOddShapesAgainstReference) {
  std::mt19937 g(42);
  auto pick = [&](std::vector<int64_t> v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(g)]; };
  for (int it = 0; it < 40; ++it) {
    const int64_t m = pick({1, 3, 7, 8, 9, 17, 33, 100}), k = pick({1, 3, 17, 33, 100, 257}),
                  n = pick({1, 3, 17, 33, 47, 48, 49, 100});
    expect_gemm(make_call("MatMul", 13, {simd_random({m, k}, g), simd_random({k, n}, g)}), k,
                "MatMul " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n));
  }
  // Several M blocks (> 128 rows), several K blocks (K > 1024) and K not a multiple of the
  // block, N over several panel groups with a ragged last panel.
  for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {257, 1000, 33}, {130, 513, 401}, {1001, 37, 19}, {5, 1030, 3}, {128, 768, 100},
           // A rows a multiple of 4 KiB apart (read in place like any row-major A).
           {130, 1024, 100}, {9, 2048, 50},
           // 22 panels (the last ragged) dealt out unevenly over the N groups (2, 3, 3, ... with
           // 2 threads; 7, 7, 8 with 1), with one and with three M blocks.
           {9, 40, 1050}, {300, 40, 1050}}) {
    expect_gemm(make_call("MatMul", 13, {simd_random({m, k}, g), simd_random({k, n}, g)}), k,
                "MatMul " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n));
  }
}

// The K block policy (gemm.h kKcMax: the whole K up to 1024, else equal blocks): K at the
// limit (one block), one past it (two of 513) and 2500 (834, 834, 832), with a row-major A
// read in place and a transposed A packed (per item, or once per call and shared when the
// item splits N: N = 400 is 9 panels of 48, more than one item's 8), over 2 M blocks.
TEST(SimdGemm, KBlocksAroundTheLimitAgainstReference) {
  std::mt19937 g(1024);
  for (const int64_t k : {1024, 1025, 2500}) {
    for (const auto& [m, n] : std::vector<std::pair<int64_t, int64_t>>{{130, 400}, {9, 50}}) {
      const std::string shape = std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
      expect_gemm(make_call("MatMul", 13, {simd_random({m, k}, g), simd_random({k, n}, g)}), k, "MatMul " + shape);
      KernelCall gm = make_call("Gemm", 13, {simd_random({k, m}, g), simd_random({k, n}, g)});
      gm.attrs["transA"] = attr_int(1);
      expect_gemm(gm, k, "Gemm transA " + shape);
    }
  }
}

// A run-time B without batches is packed by the work items, a group of panels each as they
// first reach it, while items of other M blocks wait for it (gemm.cc run()): several M
// blocks and several panel groups, row-major and transposed B, on the session's threads.
TEST(SimdGemm, RunTimeBPackedByTheWorkItemsAgainstReference) {
  std::mt19937 g(31);
  for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {300, 70, 1050}, {1030, 33, 500}, {257, 1100, 150}, {64, 9, 2000}}) {
    const std::string shape = std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
    expect_gemm(make_call("MatMul", 13, {simd_random({m, k}, g), simd_random({k, n}, g)}), k, "MatMul " + shape);
    KernelCall gm = make_call("Gemm", 13, {simd_random({m, k}, g), simd_random({n, k}, g)});
    gm.attrs["transB"] = attr_int(1);
    expect_gemm(gm, k, "Gemm transB " + shape);
  }
}

TEST(SimdMatMul, BatchBroadcastingAgainstReference) {
  std::mt19937 g(7);
  auto pick = [&](std::vector<int64_t> v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(g)]; };
  // Fixed cases first, so that each path is covered whatever the random draw: B with batch
  // dims (the per-batch path), broadcast on either side, and B without (A's batch folded into M).
  for (const auto& [ad, bd] : std::vector<std::pair<Dims, Dims>>{{{3, 9, 5}, {3, 5, 7}},
                                                                {{1, 9, 5}, {4, 5, 7}},
                                                                {{2, 1, 9, 5}, {4, 5, 7}},
                                                                {{2, 4, 9, 5}, {5, 7}}})
    expect_gemm(make_call("MatMul", 13, {simd_random(ad, g), simd_random(bd, g)}), ad.back(),
                "A " + to_string(ad) + " B " + to_string(bd));
  for (int it = 0; it < 50; ++it) {
    const int64_t m = pick({1, 3, 9, 17}), k = pick({1, 5, 33}), n = pick({1, 7, 50});
    // Each side gets 0-2 leading dims; each shared dim is equal or 1 on one side.
    const size_t ra = static_cast<size_t>(pick({0, 1, 2})), rb = static_cast<size_t>(pick({0, 1, 2}));
    Dims batch{pick({2, 3}), pick({1, 4})};
    Dims ad, bd;
    for (size_t i = 2 - ra; i < 2; ++i) ad.push_back(pick({0, 1}) ? batch[i] : 1);
    for (size_t i = 2 - rb; i < 2; ++i) bd.push_back(pick({0, 1}) ? batch[i] : 1);
    ad.insert(ad.end(), {m, k});
    bd.insert(bd.end(), {k, n});
    expect_gemm(make_call("MatMul", 13, {simd_random(ad, g), simd_random(bd, g)}), k,
                "A " + to_string(ad) + " B " + to_string(bd));
  }
}

TEST(SimdMatMul, FallbacksMatchTheReference) {
  std::mt19937 g(1);
  expect_gemm(make_call("MatMul", 13, {simd_random({7}, g), simd_random({2, 7, 3}, g)}), 7, "1-D A",
              SimdPath::Reference);
  expect_gemm(make_call("MatMul", 13, {simd_random({4, 7}, g), simd_random({7}, g)}), 7, "1-D B", SimdPath::Reference);
  expect_gemm(make_call("MatMul", 13, {simd_random({4, 7}, g), simd_random({6, 3}, g)}), 7, "K mismatch",
              SimdPath::Reference);
  expect_gemm(make_call("MatMul", 13, {simd_random({2, 4, 7}, g), simd_random({3, 7, 3}, g)}), 7, "batch mismatch",
              SimdPath::Reference);
}

TEST(SimdGemm, TransposesAlphaBetaAndBroadcastC) {
  std::mt19937 g(8);
  int cases = 0;
  for (int64_t m : {1, 9, 33})
    for (int64_t n : {1, 17, 50})
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb)
          for (int cform = 0; cform < 6; ++cform) {
            const int64_t k = cases % 2 ? 13 : 300;
            KernelCall call = make_call(
                "Gemm", 13, {simd_random(ta ? Dims{k, m} : Dims{m, k}, g), simd_random(tb ? Dims{n, k} : Dims{k, n}, g)});
            call.attrs["transA"] = attr_int(ta);
            call.attrs["transB"] = attr_int(tb);
            if (cases % 3 != 0) call.attrs["alpha"] = attr_float(cases % 3 == 1 ? 0.5f : -2.f);
            if (cases % 4 == 1) call.attrs["beta"] = attr_float(1.5f);
            const std::vector<Dims> cdims{{}, {n}, {1, n}, {m, 1}, {m, n}};
            if (cform < 5) call.inputs.push_back(simd_random(cdims[static_cast<size_t>(cform)], g));
            expect_gemm(call, k, "Gemm case " + std::to_string(cases) + " C form " + std::to_string(cform));
            ++cases;
          }
  EXPECT_EQ(cases, 216);
}

TEST(SimdFusedMatMulGemm, BiasAndEveryActivationAgainstReference) {
  std::mt19937 g(77);
  const std::vector<std::pair<std::string, std::vector<float>>> acts{
      {"", {}},           {"Relu", {}},           {"Gelu", {}},         {"GeluTanh", {}},
      {"Tanh", {}},       {"Sigmoid", {}},        {"Silu", {}},         {"HardSwish", {}},
      {"LeakyRelu", {0.2f}}, {"LeakyRelu", {}},   {"HardSigmoid", {0.3f, 0.4f}}, {"HardSigmoid", {}},
      {"Clip", {-0.5f, 0.5f}}, {"Clip", {}}};
  for (const auto& [act, params] : acts) {
    for (int variant = 0; variant < 5; ++variant) {
      // FusedMatMul: batched A, 2-D B; bias [N] (0), [1, N] (1), [1] (2), none (3); a
      // [M, N] bias runs the reference (4). Values up to +-6 so Sigmoid/Tanh saturate.
      KernelCall mm = make_call("FusedMatMul", 1, {simd_random({2, 9, 40}, g, -1.f, 1.f), simd_random({40, 50}, g)});
      mm.domain = "com.gearbox";
      const std::vector<Dims> bias{{50}, {1, 50}, {1}, {}, {9, 50}};
      if (variant != 3) mm.inputs.push_back(simd_random(bias[static_cast<size_t>(variant)], g));
      if (!act.empty()) {
        mm.attrs["activation"] = testing::attr_string(act);
        if (!params.empty()) mm.attrs["activation_params"] = floats_attr(params);
      }
      const std::string what = "FusedMatMul " + act + " variant " + std::to_string(variant);
      expect_gemm(mm, 40, what, variant == 4 ? SimdPath::Reference : SimdPath::Simd);
      // FusedGemm: transB, alpha, beta, C [N] or [M, 1] (or none).
      KernelCall gm = make_call("FusedGemm", 1, {simd_random({9, 13}, g), simd_random({5, 13}, g)});
      gm.domain = "com.gearbox";
      gm.attrs["transB"] = attr_int(1);
      gm.attrs["alpha"] = attr_float(2.5f);
      gm.attrs["beta"] = attr_float(variant == 1 ? 0.5f : 1.f);
      if (variant == 0 || variant == 1) gm.inputs.push_back(simd_random({5}, g));
      if (variant == 2) gm.inputs.push_back(simd_random({9, 1}, g));
      if (!act.empty()) {
        gm.attrs["activation"] = testing::attr_string(act);
        if (!params.empty()) gm.attrs["activation_params"] = floats_attr(params);
      }
      expect_gemm(gm, 13, "FusedGemm " + act + " variant " + std::to_string(variant));
    }
  }
  // An activation the kernel does not know goes to the reference, which reports it.
  KernelCall bad = make_call("FusedMatMul", 1, {simd_random({3, 4}, g), simd_random({4, 5}, g)});
  bad.domain = "com.gearbox";
  bad.attrs["activation"] = testing::attr_string("Swoosh");
  expect_gemm(bad, 4, "unknown activation", SimdPath::Reference);
}

TEST(SimdMatMul, ConstantWeightsPackedOnceRunTimeWeightsEveryCall) {
  std::mt19937 g(31);
  // Linear-layer shapes (A [B, M, K] x constant B [K, N] or [1, K, N]), BERT-like included.
  for (const auto& [ad, bd] : std::vector<std::pair<Dims, Dims>>{
           {{1, 128, 96}, {96, 80}}, {{2, 7, 33}, {33, 17}}, {{3, 5}, {5, 1}}, {{1, 9, 300}, {1, 300, 48}}}) {
    for (int fused = 0; fused < 2; ++fused) {
      KernelCall c = make_call(fused ? "FusedMatMul" : "MatMul", fused ? 1 : 13, {simd_random(ad, g), simd_random(bd, g)});
      if (fused) {
        c.domain = "com.gearbox";
        c.inputs.push_back(simd_random({bd.back()}, g));
        c.attrs["activation"] = testing::attr_string("Gelu");
      }
      c.constant_inputs = {false, true, true};
      const std::string what = std::string(fused ? "FusedMatMul " : "MatMul ") + to_string(ad) + " x const " + to_string(bd);
      expect_gemm(c, ad.back(), what);
      const int64_t after_first = simd::gemm::pack_count();
      expect_gemm(c, ad.back(), what + " (again)");
      expect_gemm(c, ad.back(), what + " (third run)");
      EXPECT_EQ(simd::gemm::pack_count(), after_first) << what << ": constant B packed again";
    }
  }
  // Run-time B: packed on every call, never cached, and a B whose values change between
  // calls (same buffer) gives the new product.
  const size_t cached = simd::gemm::packed_cache_size();
  Tensor a = simd_random({20, 40}, g), b = simd_random({40, 24}, g);
  KernelCall rt = make_call("MatMul", 13, {a, b});
  const int64_t before = simd::gemm::pack_count();
  expect_gemm(rt, 40, "run-time B");
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = -2.f * b.data<float>()[i] + 0.25f;
  expect_gemm(rt, 40, "run-time B, changed in place");
  EXPECT_EQ(simd::gemm::pack_count(), before + 2);  // one packing per simd call
  EXPECT_EQ(simd::gemm::packed_cache_size(), cached);
  // Gemm with a constant transposed B shares the cache (keyed by layout too).
  KernelCall gm = make_call("Gemm", 13, {simd_random({17, 64}, g), simd_random({33, 64}, g)});
  gm.attrs["transB"] = attr_int(1);
  gm.constant_inputs = {false, true};
  expect_gemm(gm, 64, "Gemm const transB");
  const int64_t packs = simd::gemm::pack_count();
  expect_gemm(gm, 64, "Gemm const transB (again)");
  EXPECT_EQ(simd::gemm::pack_count(), packs);
}

}  // namespace
}  // namespace gearbox
