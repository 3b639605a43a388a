// cpu.dnnl MatMul and Gemm against the cpu.ref kernels: randomized shapes with odd sizes and
// numpy batch broadcasting (MatMul); transA/transB, alpha, beta and every broadcast form of
// C (Gemm); and the cases that fall back to the reference inside the kernel.
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/dnnl_test_util.h"

namespace gearbox {
namespace {

using testing::attr_float;
using testing::attr_int;
using testing::dnnl_random;
using testing::DnnlPath;
using testing::expect_dnnl_matches_ref;
using testing::KernelCall;
using testing::make_call;

TEST(DnnlMatMul, RandomizedBatchBroadcastingAgainstReference) {
  std::mt19937 g(42);
  auto pick = [&](std::vector<int64_t> v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(g)]; };
  for (int it = 0; it < 60; ++it) {
    const int64_t m = pick({1, 3, 7, 17, 33}), k = pick({1, 3, 7, 17, 64}), n = pick({1, 3, 7, 17, 33});
    // Batch dims: each side gets 0-2 leading dims; each shared dim is equal or 1 on one side.
    const size_t ra = static_cast<size_t>(pick({0, 1, 2})), rb = static_cast<size_t>(pick({0, 1, 2}));
    Dims batch{pick({2, 3}), pick({1, 5})};
    Dims ad, bd;
    for (size_t i = 2 - ra; i < 2; ++i) ad.push_back(pick({0, 1}) ? batch[i] : 1);
    for (size_t i = 2 - rb; i < 2; ++i) bd.push_back(pick({0, 1}) ? batch[i] : 1);
    ad.insert(ad.end(), {m, k});
    bd.insert(bd.end(), {k, n});
    expect_dnnl_matches_ref(make_call("MatMul", 13, {dnnl_random(ad, g), dnnl_random(bd, g)}), k,
                            "A " + to_string(ad) + " B " + to_string(bd));
  }
}

TEST(DnnlMatMul, FallbacksMatchTheReference) {
  std::mt19937 g(1);
  // 1-D operands, a K mismatch (ref error), batch dims that do not broadcast (ref error).
  expect_dnnl_matches_ref(make_call("MatMul", 13, {dnnl_random({7}, g), dnnl_random({2, 7, 3}, g)}), 7, "1-D A", DnnlPath::Reference);
  expect_dnnl_matches_ref(make_call("MatMul", 13, {dnnl_random({4, 7}, g), dnnl_random({7}, g)}), 7, "1-D B", DnnlPath::Reference);
  expect_dnnl_matches_ref(make_call("MatMul", 13, {dnnl_random({4, 7}, g), dnnl_random({6, 3}, g)}), 7, "K mismatch", DnnlPath::Reference);
  expect_dnnl_matches_ref(make_call("MatMul", 13, {dnnl_random({2, 4, 7}, g), dnnl_random({3, 7, 3}, g)}), 7,
                          "batch mismatch", DnnlPath::Reference);
}

TEST(DnnlGemm, TransposesAlphaBetaAndBroadcastC) {
  std::mt19937 g(8);
  int cases = 0;
  for (int64_t m : {1, 7, 33})
    for (int64_t n : {1, 17})
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb)
          for (int cform = 0; cform < 6; ++cform) {
            const int64_t k = 13;
            KernelCall call = make_call("Gemm", 13,
                                        {dnnl_random(ta ? Dims{k, m} : Dims{m, k}, g), dnnl_random(tb ? Dims{n, k} : Dims{k, n}, g)});
            call.attrs["transA"] = attr_int(ta);
            call.attrs["transB"] = attr_int(tb);
            if (cases % 3 != 0) call.attrs["alpha"] = attr_float(cases % 3 == 1 ? 0.5f : -2.f);
            if (cases % 2 != 0) call.attrs["beta"] = attr_float(1.5f);
            const std::vector<Dims> cdims{{}, {n}, {1, n}, {m, 1}, {m, n}};
            if (cform < 5) call.inputs.push_back(dnnl_random(cdims[static_cast<size_t>(cform)], g));
            expect_dnnl_matches_ref(call, k, "case " + std::to_string(cases));
            ++cases;
          }
  EXPECT_EQ(cases, 144);
}

TEST(DnnlFusedMatMulGemm, BiasAndActivationsAgainstReference) {
  std::mt19937 g(77);
  Attribute params;
  params.type = AttrType::Floats;
  const std::vector<std::string> acts{"", "Relu", "Gelu", "GeluTanh", "Tanh", "Sigmoid", "LeakyRelu", "Clip"};
  for (const std::string& act : acts) {
    params.floats = act == "Clip" ? std::vector<float>{-0.5f, 0.5f} : std::vector<float>{0.2f};
    for (int variant = 0; variant < 4; ++variant) {
      // FusedMatMul: batched A, 2-D B, bias [N] (variant 0/1), a broadcasting [M, N] bias
      // that runs the reference (variant 2), no bias (variant 3).
      KernelCall mm = make_call("FusedMatMul", 1, {dnnl_random({2, 7, 33}, g), dnnl_random({33, 17}, g)});
      mm.domain = "com.gearbox";
      if (variant < 2) mm.inputs.push_back(dnnl_random({17}, g));
      if (variant == 2) mm.inputs.push_back(dnnl_random({7, 17}, g));
      if (!act.empty()) {
        mm.attrs["activation"] = testing::attr_string(act);
        mm.attrs["activation_params"] = params;
      }
      expect_dnnl_matches_ref(mm, 33, "FusedMatMul " + act + " " + std::to_string(variant),
                              variant == 2 ? DnnlPath::Reference : DnnlPath::OneDnn);
      // FusedGemm: transB, alpha, beta, C [N] (or none).
      KernelCall gm = make_call("FusedGemm", 1, {dnnl_random({9, 13}, g), dnnl_random({5, 13}, g)});
      gm.domain = "com.gearbox";
      gm.attrs["transB"] = attr_int(1);
      gm.attrs["alpha"] = attr_float(0.75f);
      gm.attrs["beta"] = attr_float(variant == 1 ? 0.5f : 1.f);
      if (variant != 3) gm.inputs.push_back(dnnl_random({5}, g));
      if (!act.empty()) {
        gm.attrs["activation"] = testing::attr_string(act);
        gm.attrs["activation_params"] = params;
      }
      expect_dnnl_matches_ref(gm, 13, "FusedGemm " + act + " " + std::to_string(variant));
    }
  }
}

TEST(DnnlMatMul, ConstantWeightsPackedOnceAndMatchTheReference) {
  std::mt19937 g(31);
  // Linear-layer shapes (A [B, M, K] x constant B [K, N] or [1, K, N]), odd sizes included.
  for (const auto& [ad, bd] : std::vector<std::pair<Dims, Dims>>{
           {{1, 128, 96}, {96, 80}}, {{2, 7, 33}, {33, 17}}, {{3, 5}, {5, 1}}, {{1, 9, 64}, {1, 64, 48}}}) {
    for (int fused = 0; fused < 2; ++fused) {
      KernelCall c = make_call(fused ? "FusedMatMul" : "MatMul", fused ? 1 : 13, {dnnl_random(ad, g), dnnl_random(bd, g)});
      if (fused) {
        c.domain = "com.gearbox";
        c.inputs.push_back(dnnl_random({bd.back()}, g));
        c.attrs["activation"] = testing::attr_string("Gelu");
      }
      c.constant_inputs = {false, true, true};
      const std::string what = std::string(fused ? "FusedMatMul " : "MatMul ") + to_string(ad) + " x const " + to_string(bd);
      expect_dnnl_matches_ref(c, ad.back(), what);
      // The weights are reordered at most once: later runs use the cached packed copy.
      const int64_t after_first = dnnl_engine::weight_reorder_count();
      expect_dnnl_matches_ref(c, ad.back(), what + " (again)");
      expect_dnnl_matches_ref(c, ad.back(), what + " (third run)");
      EXPECT_EQ(dnnl_engine::weight_reorder_count(), after_first) << what;
    }
  }
  // A B computed at run time (not constant) is read in place and never enters the cache.
  const size_t cached = dnnl_engine::weight_cache_size();
  expect_dnnl_matches_ref(make_call("MatMul", 13, {dnnl_random({1, 16, 40}, g), dnnl_random({40, 24}, g)}), 40,
                          "run-time B");
  EXPECT_EQ(dnnl_engine::weight_cache_size(), cached);
}

}  // namespace
}  // namespace gearbox
