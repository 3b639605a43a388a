// Weights that may change (issue 21 item 4): a weight updated in place between two runs of
// one session (Session::update_weight, what an optimizer step does) must give the new result
// on the engines that keep derived copies of weights -- cpu.simd's packed GEMM panels and
// cpu.dnnl's reordered weights and per-node convolution state -- checked against a cpu.ref
// session built with the new weights from the start. Also: the buffer versions those caches
// key on (base/buffer_version.h), the errors of a bad update, and kernels' thread scratch in
// the pool's statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <string>

#include "base/buffer_version.h"
#include "base/scratch.h"
#include "device/memory_pool.h"
#include "graph/pass_test_util.h"
#include "kernels/cpu/dnnl/dnnl_util.h"
#include "runtime/session.h"

namespace gearbox {
namespace {

using testing::attr_ints;
using testing::attr_int;
using testing::GraphBuilder;
using testing::random_tensor;
using testing::unoptimized_on;

// y = MatMul(x, W) ; z = Gemm(x, V, transB) ; c = Conv(img, K, B): one consumer of each cache.
Model model_with(const Tensor& w, const Tensor& v, const Tensor& k, const Tensor& bias) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {8, 64});
  Value* img = b.input("img", DType::F32, {1, 16, 12, 12});
  b.output(b.op("MatMul", {x, b.constant("W", w)}));
  AttributeMap gemm;
  gemm["transB"] = attr_int(1);
  b.output(b.op("Gemm", {x, b.constant("V", v)}, gemm));
  AttributeMap conv;
  conv["pads"] = attr_ints({1, 1, 1, 1});
  b.output(b.op("Conv", {img, b.constant("K", k), b.constant("B", bias)}, conv));
  return b.take();
}

struct Weights {
  Tensor w, v, k, bias;
};
Weights weights(uint32_t seed) {
  return {random_tensor({64, 48}, seed), random_tensor({40, 64}, seed + 1), random_tensor({32, 16, 3, 3}, seed + 2),
          random_tensor({32}, seed + 3)};
}

std::vector<Tensor> run_ok(Session& s, const std::map<std::string, Tensor>& feeds) {
  auto r = s.run(feeds);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : std::vector<Tensor>{};
}

// Largest |a - b| relative to max(1, |b|) over all outputs.
double max_error(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  double e = 0;
  EXPECT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size() && o < want.size(); ++o) {
    EXPECT_EQ(got[o].dims(), want[o].dims()) << "output " << o;
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      const double g = got[o].data<float>()[i], r = want[o].data<float>()[i];
      e = std::max(e, std::abs(g - r) / std::max(1.0, std::abs(r)));
    }
  }
  return e;
}

class WeightUpdate : public ::testing::TestWithParam<std::string> {};

TEST_P(WeightUpdate, InPlaceUpdateBetweenRunsGivesTheNewResult) {
  const std::map<std::string, Tensor> feeds{{"x", random_tensor({8, 64}, 100)},
                                            {"img", random_tensor({1, 16, 12, 12}, 101)}};
  const Weights before = weights(1), after = weights(50);
  // The references: cpu.ref sessions built with each set of weights.
  auto ref_before = Session::create(model_with(before.w, before.v, before.k, before.bias), unoptimized_on("cpu.ref"));
  auto ref_after = Session::create(model_with(after.w, after.v, after.k, after.bias), unoptimized_on("cpu.ref"));
  ASSERT_TRUE(ref_before.ok() && ref_after.ok());
  const auto want_before = run_ok(**ref_before, feeds), want_after = run_ok(**ref_after, feeds);
  ASSERT_GT(max_error(want_after, want_before), 0.1) << "the two weight sets must give different outputs";

  // The session under test owns copies of the first weights (the update writes into them).
  auto s = Session::create(model_with(before.w.clone(), before.v.clone(), before.k.clone(), before.bias.clone()),
                           unoptimized_on(GetParam()));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const int64_t reorders = dnnl_engine::weight_reorder_count();
  for (int run = 0; run < 2; ++run) EXPECT_LT(max_error(run_ok(**s, feeds), want_before), 1e-4) << "run " << run;
  if (GetParam().rfind("cpu.dnnl", 0) == 0)
    EXPECT_GT(dnnl_engine::weight_reorder_count(), reorders) << "cpu.dnnl reordered no weight: the test misses its cache";

  for (const auto& [name, value] : std::map<std::string, Tensor>{
           {"W", after.w}, {"V", after.v}, {"K", after.k}, {"B", after.bias}}) {
    Status st = (*s)->update_weight(name, value);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  for (int run = 0; run < 2; ++run)
    EXPECT_LT(max_error(run_ok(**s, feeds), want_after), 1e-4) << "run " << run << " after the update";
  // Only one weight changes: the others' derived copies are still right.
  ASSERT_TRUE((*s)->update_weight("W", before.w).ok());
  auto mixed = Session::create(model_with(before.w, after.v, after.k, after.bias), unoptimized_on("cpu.ref"));
  ASSERT_TRUE(mixed.ok());
  EXPECT_LT(max_error(run_ok(**s, feeds), run_ok(**mixed, feeds)), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Engines, WeightUpdate, ::testing::Values("cpu.simd,cpu.ref", "cpu.dnnl,cpu.ref"),
                         [](const auto& info) { return info.param.substr(4, 4); });

TEST(WeightUpdate, BadUpdatesAreErrorsAndChangeNothing) {
  const Weights w = weights(1);
  auto s = Session::create(model_with(w.w.clone(), w.v.clone(), w.k.clone(), w.bias.clone()), unoptimized_on("cpu.ref"));
  ASSERT_TRUE(s.ok());
  Status st = (*s)->update_weight("Wx", w.w);
  EXPECT_EQ(st.code(), ErrorCode::INVALID_ARGUMENT) << st.to_string();
  EXPECT_NE(st.message().find("no weight 'Wx'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("W, V, K, B"), std::string::npos) << "lists the weights: " << st.message();
  st = (*s)->update_weight("W", random_tensor({48, 64}, 9));
  EXPECT_EQ(st.code(), ErrorCode::INVALID_ARGUMENT) << st.to_string();
  EXPECT_NE(st.message().find("float32[64,48]"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("float32[48,64]"), std::string::npos) << st.message();
  st = (*s)->update_weight("W", Tensor(DType::F64, {64, 48}));
  EXPECT_EQ(st.code(), ErrorCode::INVALID_ARGUMENT) << st.to_string();
  const Tensor& kept = (*s)->model().graph->initializers[0]->initializer;
  EXPECT_EQ(buffer_version(kept), 0u);
  EXPECT_EQ(kept.data<float>()[5], w.w.data<float>()[5]);
}

TEST(BufferVersion, BelongsToTheBufferAndCountsMarks) {
  Tensor a(DType::F32, {4});
  Tensor view = a.reshaped({2, 2});
  // (A fresh buffer at an address marked before, by an earlier test, starts there: only the
  // differences are asserted.)
  const uint64_t v0 = buffer_version(a);
  mark_modified(view);
  EXPECT_EQ(buffer_version(a), v0 + 1) << "the version belongs to the buffer, not to one tensor";
  mark_modified(a);
  EXPECT_EQ(buffer_version(view), v0 + 2);
  EXPECT_EQ(buffer_version(Tensor()), 0u);
}

TEST(ThreadScratch, CountedInThePoolStatistics) {
  auto pool = std::move(device::MemoryPool::create(1 << 20)).value();
  const size_t before = pool->stats().thread_scratch;
  {
    ThreadScratch<float> s;
    float* p = s.get(1000);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    EXPECT_EQ(pool->stats().thread_scratch, before + 4032);  // 4000 bytes in whole 64-byte lines
    s.get(10);                                                // smaller: no growth
    EXPECT_EQ(pool->stats().thread_scratch, before + 4032);
    s.get(2000);
    EXPECT_EQ(pool->stats().thread_scratch, before + 8000);
    EXPECT_GE(pool->stats().thread_scratch_peak, before + 8000);
  }
  EXPECT_EQ(pool->stats().thread_scratch, before);
}

TEST(ThreadScratch, GemmPackingBuffersAreCounted) {
  // A cpu.simd MatMul with a run-time B uses the calling thread's packing buffers.
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {64, 256});
  Value* y = b.input("y", DType::F32, {256, 128});
  b.output(b.op("MatMul", {x, y}));
  auto s = Session::create(b.take(), unoptimized_on("cpu.simd,cpu.ref"));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->run({{"x", random_tensor({64, 256}, 1)}, {"y", random_tensor({256, 128}, 2)}}).ok());
  EXPECT_GE((*s)->device_pool()->stats().thread_scratch, size_t{256} * 128 * 4)
      << "the packed run-time B alone is k x n floats";
}

}  // namespace
}  // namespace gearbox
