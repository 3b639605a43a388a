// cpu.simd com.gearbox.Attention against the cpu.ref kernel (the unfused composition of
// Reshape/Transpose/MatMul/Div/Add/Softmax): randomized batch, heads, sequence and head
// sizes (odd, not multiples of the vector width, seq 1, heads 1, cross attention with
// Sk != S and Dv != Dh), every mask form that broadcasts to the scores, non-default
// permutations (strided operands and output), large magnitudes, -inf in the mask, and the
// configurations that fall back to the reference.
#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <hwy/targets.h>

#include "kernels/cpu/simd/attention_core.h"
#include "kernels/simd_test_util.h"

namespace gearbox {
namespace {

using testing::attr_int;
using testing::attr_ints;
using testing::expect_simd_matches_ref;
using testing::KernelCall;
using testing::make_call;
using testing::simd_random;
using testing::SimdPath;

Tensor shape_of(std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); }

struct Geometry {
  int64_t b, h, s, sk, dh, dv;
};

// BERT-style call: q [B, S, H*Dh], k [B, Sk, H*Dh], v [B, Sk, H*Dv] split into heads by
// Reshape + Transpose (default permutations), context reshaped back to [B, S, H*Dv].
KernelCall bert_call(const Geometry& g, std::mt19937& rng, float mag = 1.f) {
  KernelCall c = make_call("Attention", 1,
                           {simd_random({g.b, g.s, g.h * g.dh}, rng, -mag, mag),
                            simd_random({g.b, g.sk, g.h * g.dh}, rng, -mag, mag),
                            simd_random({g.b, g.sk, g.h * g.dv}, rng), Tensor::scalar<float>(std::sqrt(float(g.dh))),
                            shape_of({g.b, g.s, g.h, g.dh}), shape_of({0, 0, g.h, -1}), shape_of({g.b, g.sk, g.h, g.dv}),
                            shape_of({0, 0, -1})});
  c.domain = "com.gearbox";
  c.attrs["num_heads"] = attr_int(g.h);
  return c;
}

std::string describe(const Geometry& g) {
  return "B" + std::to_string(g.b) + " H" + std::to_string(g.h) + " S" + std::to_string(g.s) + " Sk" +
         std::to_string(g.sk) + " Dh" + std::to_string(g.dh) + " Dv" + std::to_string(g.dv);
}

TEST(SimdAttention, RandomizedShapesAndMaskFormsAgainstReference) {
  std::mt19937 rng(5);
  auto pick = [&](std::vector<int64_t> v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)]; };
  int cases = 0;
  for (int it = 0; it < 48; ++it) {
    Geometry g{pick({1, 2}), pick({1, 2, 3}), pick({1, 3, 7, 17, 70}), 0, pick({1, 5, 8, 16, 24}), 0};
    g.sk = it % 3 == 0 ? pick({1, 5, 33, 64, 130}) : g.s;  // cross attention a third of the time
    g.dv = it % 4 == 0 ? pick({3, 16, 19}) : g.dh;
    KernelCall c = bert_call(g, rng);
    // Mask forms (numpy broadcasting onto [B, H, S, Sk]): none, [B,1,1,Sk] (BERT), [B,1,S,Sk],
    // [1,1,S,Sk], [S,Sk], [Sk], [B,H,S,Sk], [1], scalar.
    const int form = it % 9;
    const std::vector<Dims> forms{{}, {g.b, 1, 1, g.sk}, {g.b, 1, g.s, g.sk}, {1, 1, g.s, g.sk}, {g.s, g.sk},
                                  {g.sk}, {g.b, g.h, g.s, g.sk}, {1}, {}};
    std::string what = describe(g) + " mask form " + std::to_string(form);
    if (form > 0) {
      Tensor m = simd_random(forms[static_cast<size_t>(form)], rng);
      // Padding-style masks: some keys pushed far down (BERT uses -10000), never all of a row.
      for (int64_t i = 0; i < m.numel(); ++i)
        if (i % 3 == 1) m.data<float>()[i] = -10000.f;
      if (form == 8) m = Tensor::scalar<float>(0.25f);
      c.inputs.push_back(m);
    }
    expect_simd_matches_ref(c, what);
    ++cases;
  }
  EXPECT_EQ(cases, 48);
}

TEST(SimdAttention, BertBaseShape) {
  std::mt19937 rng(11);
  Geometry g{1, 12, 128, 128, 64, 64};
  KernelCall c = bert_call(g, rng);
  Tensor m(DType::F32, {1, 1, 1, 128});
  for (int64_t j = 0; j < 128; ++j) m.data<float>()[j] = j < 100 ? 0.f : -10000.f;
  c.inputs.push_back(m);
  expect_simd_matches_ref(c, "BERT-base");
}

TEST(SimdAttention, LargeMagnitudesAndInfiniteMaskStayFinite) {
  std::mt19937 rng(3);
  // Scores of several hundred: exp without the running max would overflow.
  for (int64_t s : {1, 9, 80}) {
    Geometry g{1, 2, s, s, 8, 8};
    KernelCall c = bert_call(g, rng, 12.f);
    c.inputs[3] = Tensor::scalar<float>(1.f);
    expect_simd_matches_ref(c, "large scores S" + std::to_string(s), SimdPath::Simd, 1e-3, 1e-3);
  }
  // -inf and float-lowest entries in the mask, with whole key tiles (64 keys) masked out
  // first: the online softmax must start over cleanly after an all -inf tile.
  Geometry g{1, 2, 5, 150, 7, 7};
  KernelCall c = bert_call(g, rng);
  Tensor m(DType::F32, {1, 1, 1, 150});
  for (int64_t j = 0; j < 150; ++j)
    m.data<float>()[j] = j < 70 ? -std::numeric_limits<float>::infinity() : (j % 5 == 0 ? std::numeric_limits<float>::lowest() : 0.f);
  c.inputs.push_back(m);
  expect_simd_matches_ref(c, "-inf mask");
  // Every key masked with -inf: the softmax is 0/0, NaN on both engines.
  Tensor all(DType::F32, {1});
  all.data<float>()[0] = -std::numeric_limits<float>::infinity();
  c.inputs[8] = all;
  expect_simd_matches_ref(c, "all keys -inf");
}

TEST(SimdAttention, NonDefaultPermutationsAndMultiplyScale) {
  std::mt19937 rng(21);
  // q already split [B, H, S, Dh] (identity perm), k given as [B, H, Dh, Sk] (identity), v as
  // [B, Sk, H, Dv] (default), the context left as [B, H, S, Dv] and flattened to [B*H, S, Dv].
  const int64_t b = 2, h = 3, s = 11, sk = 13, dh = 6, dv = 9;
  KernelCall c = make_call("Attention", 1,
                           {simd_random({b, h, s, dh}, rng), simd_random({b, h, dh, sk}, rng),
                            simd_random({b, sk, h * dv}, rng), Tensor::scalar<float>(0.4f), shape_of({b, h, s, dh}),
                            shape_of({b, h, dh, sk}), shape_of({b, sk, h, dv}), shape_of({b * h, s, dv})});
  c.domain = "com.gearbox";
  c.attrs["q_perm"] = attr_ints({0, 1, 2, 3});
  c.attrs["k_perm"] = attr_ints({0, 1, 2, 3});
  c.attrs["out_perm"] = attr_ints({0, 1, 2, 3});
  c.attrs["scale_is_div"] = attr_int(0);
  expect_simd_matches_ref(c, "identity perms, Mul scale");
  // The context transposed to [S, B, H, Dv] before the reshape: a strided output.
  c.attrs["out_perm"] = attr_ints({2, 0, 1, 3});
  c.inputs[7] = shape_of({s, -1});
  expect_simd_matches_ref(c, "out_perm 2,0,1,3");
  // Softmax before opset 13 with axis 3 normalizes the same rows.
  c.attrs["softmax_opset"] = attr_int(11);
  c.attrs["softmax_axis"] = attr_int(3);
  expect_simd_matches_ref(c, "softmax opset 11 axis 3");
}

// Random permutations of q, k, v and the context (every operand strided in its own way,
// channel strides other than 1 included), with mask forms that broadcast along rows or keys,
// against the reference; sizes straddle the kernel's query block (32 rows on AVX-512) and
// key tile (128 keys).
TEST(SimdAttention, RandomPermutationsAndBroadcastMasks) {
  std::mt19937 rng(77);
  auto pick = [&](std::vector<int64_t> v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)]; };
  std::vector<int64_t> perm{0, 1, 2, 3};
  // x given as a plain rank-4 tensor that Transpose(x, p) turns into `want`.
  auto operand = [&](const std::vector<int64_t>& want, std::vector<int64_t>& p) {
    std::shuffle(p.begin(), p.end(), rng);
    std::vector<int64_t> dims(4);
    for (size_t j = 0; j < 4; ++j) dims[static_cast<size_t>(p[j])] = want[j];
    return dims;
  };
  for (int it = 0; it < 24; ++it) {
    const int64_t b = pick({1, 2}), h = pick({1, 3}), s = pick({1, 31, 33, 65}), sk = pick({1, 7, 129, 200}),
                  dh = pick({4, 13, 16}), dv = pick({5, 16, 32});
    std::vector<int64_t> qp = perm, kp = perm, vp = perm, op = perm;
    const auto qd = operand({b, h, s, dh}, qp), kd = operand({b, h, dh, sk}, kp), vd = operand({b, h, sk, dv}, vp);
    std::shuffle(op.begin(), op.end(), rng);
    KernelCall c = make_call("Attention", 1,
                             {simd_random(qd, rng, -2.f, 2.f), simd_random(kd, rng, -2.f, 2.f), simd_random(vd, rng),
                              Tensor::scalar<float>(0.5f), shape_of(qd), shape_of(kd), shape_of(vd), shape_of({-1})});
    c.domain = "com.gearbox";
    c.attrs["q_perm"] = attr_ints(qp);
    c.attrs["k_perm"] = attr_ints(kp);
    c.attrs["v_perm"] = attr_ints(vp);
    c.attrs["out_perm"] = attr_ints(op);
    // Masks: none, per query row broadcast over keys [B,1,S,1], per (head, key) [1,H,1,Sk],
    // per (row, key) [S,Sk] with some -inf (never a whole row).
    const int form = it % 4;
    if (form == 1) c.inputs.push_back(simd_random({b, 1, s, 1}, rng, -3.f, 3.f));
    if (form == 2) c.inputs.push_back(simd_random({1, h, 1, sk}, rng, -3.f, 3.f));
    if (form == 3) {
      Tensor m = simd_random({s, sk}, rng, -3.f, 3.f);
      for (int64_t i = 0; i < s; ++i)
        for (int64_t j = 1; j < sk; j += 2) m.data<float>()[i * sk + j] = -std::numeric_limits<float>::infinity();
      c.inputs.push_back(m);
    }
    const std::string what = "perms q" + std::to_string(qp[0]) + std::to_string(qp[1]) + std::to_string(qp[2]) +
                             std::to_string(qp[3]) + " " + describe({b, h, s, sk, dh, dv}) + " mask form " +
                             std::to_string(form);
    expect_simd_matches_ref(c, what);
  }
}

// Keys in several tiles where a whole tile (128 keys) is masked with -inf for some rows and not
// others: the online softmax must start over cleanly once a finite score arrives.
TEST(SimdAttention, WholeKeyTilesMaskedPerRow) {
  std::mt19937 rng(9);
  Geometry g{1, 2, 40, 300, 8, 8};
  KernelCall c = bert_call(g, rng);
  Tensor m(DType::F32, {g.s, g.sk});
  for (int64_t i = 0; i < g.s; ++i)
    for (int64_t j = 0; j < g.sk; ++j)
      m.data<float>()[i * g.sk + j] = (i % 2 == 0 && j < 260) ? -std::numeric_limits<float>::infinity() : 0.f;
  c.inputs.push_back(m);
  expect_simd_matches_ref(c, "tiles masked per row");
}

// The inner loop has per-target register blocking (AVX-512: 32 query rows, 8-key score and
// 4-row context tiles; AVX2: 16 rows, 4 keys, 2 rows; scalar: 2 rows) and the dispatcher
// picks only the best target of this CPU, so each compiled target this CPU can run is forced
// in turn and checked against the reference on shapes that straddle its block edges.
TEST(SimdAttention, EveryCompiledTargetAgainstReference) {
  const std::vector<std::string> ran = testing::for_each_compiled_target([&](const std::string& name, int64_t t) {
    std::mt19937 rng(static_cast<unsigned>(t % 1000));
    for (const Geometry& g : std::vector<Geometry>{{1, 2, 37, 37, 13, 13}, {2, 1, 9, 150, 16, 24},
                                                  {1, 3, 70, 33, 64, 19}, {1, 1, 1, 5, 3, 8}}) {
      KernelCall c = bert_call(g, rng);
      Tensor m = simd_random({g.b, 1, g.s, g.sk}, rng);
      for (int64_t i = 0; i < m.numel(); i += 4) m.data<float>()[i] = -10000.f;
      c.inputs.push_back(m);
      expect_simd_matches_ref(c, name + " " + describe(g));
    }
  });
  // At least the target the dispatcher picks by itself ran.
  EXPECT_FALSE(ran.empty());
  EXPECT_NE(std::find(ran.begin(), ran.end(), std::string(simd::dispatch_target_name())), ran.end());
}

TEST(SimdAttention, FallbacksMatchTheReference) {
  std::mt19937 rng(8);
  Geometry g{2, 2, 5, 5, 4, 4};
  // Softmax over another axis.
  KernelCall c = bert_call(g, rng);
  c.attrs["softmax_axis"] = attr_int(2);
  expect_simd_matches_ref(c, "softmax axis 2", SimdPath::Reference);
  // Legacy softmax with its default axis 1 coerces [B, H*S*Sk]: not per row.
  c = bert_call(g, rng);
  c.attrs["softmax_opset"] = attr_int(11);
  c.attrs["softmax_axis"] = attr_int(1);
  expect_simd_matches_ref(c, "softmax opset 11 axis 1", SimdPath::Reference);
  // float64 operands.
  c = bert_call(g, rng);
  for (size_t i = 0; i < 3; ++i) {
    Tensor d(DType::F64, c.inputs[i].dims());
    for (int64_t j = 0; j < d.numel(); ++j) d.data<double>()[j] = c.inputs[i].data<float>()[j];
    c.inputs[i] = d;
  }
  c.inputs[3] = Tensor::scalar<double>(2.0);
  expect_simd_matches_ref(c, "float64", SimdPath::Reference);
  // A mask that enlarges the scores (S = 1 query, mask with 4 query rows): numpy broadcasting.
  Geometry g1{1, 2, 1, 5, 4, 4};
  c = bert_call(g1, rng);
  c.inputs.push_back(simd_random({1, 1, 4, 5}, rng));
  expect_simd_matches_ref(c, "mask enlarging the scores", SimdPath::Reference);
  // A non-scalar scale.
  c = bert_call(g, rng);
  c.inputs[3] = simd_random({5}, rng, 1.f, 2.f);
  expect_simd_matches_ref(c, "vector scale", SimdPath::Reference);
  // Errors: the same code from both engines.
  c = bert_call(g, rng);
  c.inputs.push_back(simd_random({3, 5}, rng));  // does not broadcast to [2, 2, 5, 5]
  expect_simd_matches_ref(c, "mask not broadcastable");
  c = bert_call(g, rng);
  c.inputs[5] = shape_of({2, 5, 3, -1});  // 8 values cannot split into 3 heads
  expect_simd_matches_ref(c, "bad k reshape");
  c = bert_call(g, rng);
  c.inputs[1] = simd_random({2, 5, 2 * 3}, rng);
  c.inputs[5] = shape_of({2, 5, 2, 3});  // Dh 3 against q's 4
  expect_simd_matches_ref(c, "Dh mismatch");
}

}  // namespace
}  // namespace gearbox
