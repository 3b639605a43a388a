// The per-shape-signature plan cache and buffer recycling of Session: a repeated shape
// re-prepares nothing and allocates nothing new, the cache is bounded (LRU), Loop iterations
// reuse their buffers, and results stay equal to values computed here by hand.
#include "runtime/plan_cache.h"

#include <gtest/gtest.h>

#include <cmath>

#include "graph/onnx_importer.h"
#include "graph/onnx_test_models.h"
#include "runtime/session.h"

namespace gearbox {
namespace {

std::unique_ptr<Session> load(const onnx::ModelProto& proto, int cache_size) {
  auto model = import_onnx_bytes(testing::serialize(proto), "");
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  SessionOptions options;
  options.plan_cache_size = cache_size;
  auto s = Session::create(std::move(model).value(), options);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return std::move(s).value();
}

// Runs add_relu (z = relu(x + y)) with a batch of `rows` and checks z by hand.
void run_add_relu(const Session& s, int64_t rows) {
  Tensor x(DType::F32, {rows, 3}), y(DType::F32, {rows, 3});
  for (int64_t i = 0; i < rows * 3; ++i) {
    x.data<float>()[i] = static_cast<float>(i % 7) - 3.0f;
    y.data<float>()[i] = 0.5f;
  }
  auto out = s.run({{"x", x}, {"y", y}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& z = out.value()[0];
  ASSERT_EQ(z.dims(), (Dims{rows, 3}));
  for (int64_t i = 0; i < rows * 3; ++i)
    EXPECT_FLOAT_EQ(z.data<float>()[i], std::max(0.0f, static_cast<float>(i % 7) - 2.5f)) << "element " << i;
}

TEST(PlanCache, SameShapeReusesPlanAndBuffers) {
  auto s = load(testing::add_relu_model(), 4);
  run_add_relu(*s, 5);
  PlanCacheStats first = s->plan_cache_stats();
  EXPECT_EQ(first.prepared, 1u);
  EXPECT_EQ(first.reused, 0u);
  EXPECT_GT(first.fresh_buffers, 0u);
  run_add_relu(*s, 5);
  PlanCacheStats second = s->plan_cache_stats();
  EXPECT_EQ(second.prepared, 1u);
  EXPECT_EQ(second.reused, 1u);
  EXPECT_EQ(second.fresh_buffers, first.fresh_buffers) << "a repeated shape must not allocate new buffers";
  EXPECT_GT(second.reused_buffers, first.reused_buffers);
}

TEST(PlanCache, NewShapePreparesAndLruEvicts) {
  auto s = load(testing::add_relu_model(), 2);
  run_add_relu(*s, 1);  // cache: 1
  run_add_relu(*s, 2);  // cache: 2 1
  run_add_relu(*s, 1);  // hit;   cache: 1 2
  run_add_relu(*s, 3);  // evicts 2; cache: 3 1
  PlanCacheStats st = s->plan_cache_stats();
  EXPECT_EQ(st.prepared, 3u);
  EXPECT_EQ(st.reused, 1u);
  EXPECT_EQ(st.evicted, 1u);
  EXPECT_EQ(st.size, 2u);
  EXPECT_EQ(st.capacity, 2u);
  run_add_relu(*s, 1);  // still cached
  EXPECT_EQ(s->plan_cache_stats().reused, 2u);
  run_add_relu(*s, 2);  // was evicted: prepared again
  EXPECT_EQ(s->plan_cache_stats().prepared, 4u);
}

TEST(PlanCache, CapacityZeroCachesNothing) {
  auto s = load(testing::add_relu_model(), 0);
  run_add_relu(*s, 2);
  run_add_relu(*s, 2);
  PlanCacheStats st = s->plan_cache_stats();
  EXPECT_EQ(st.prepared, 2u);
  EXPECT_EQ(st.reused, 0u);
  EXPECT_EQ(st.size, 0u);
}

TEST(PlanCache, OutputsOutliveTheSession) {
  Tensor kept;
  {
    auto s = load(testing::add_relu_model(), 4);
    Tensor x = Tensor::from_vector<float>({-1, 2, 3}, {1, 3});
    Tensor y = Tensor::from_vector<float>({0, 0, 1}, {1, 3});
    auto out = s->run({{"x", x}, {"y", y}});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    kept = out.value()[0];
  }
  // The buffer came from the session's pool; it must still be valid (ASan checks this).
  EXPECT_FLOAT_EQ(kept.data<float>()[0], 0.0f);
  EXPECT_FLOAT_EQ(kept.data<float>()[1], 2.0f);
  EXPECT_FLOAT_EQ(kept.data<float>()[2], 4.0f);
}

// A 0-d tensor input/output (add_tensor_io leaves the shape out when there are no dims).
// Runs the loop `trips` times on a fresh session; returns the heap allocations it made.
uint64_t run_tanh_loop(int64_t trips) {
  auto s = load(testing::tanh_loop_model(), 4);
  if (!s) return 0;
  const int64_t n = 64;
  Tensor x0(DType::F32, {n, 3});
  for (int64_t i = 0; i < n * 3; ++i) x0.data<float>()[i] = static_cast<float>(i % 11) * 0.3f - 1.5f;
  auto out = s->run({{"M", Tensor::scalar<int64_t>(trips)}, {"x0", x0}});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return 0;
  const Tensor& y = out.value()[0];
  for (int64_t i = 0; i < n * 3; ++i) {
    float x = x0.data<float>()[i];
    for (int64_t t = 0; t < trips; ++t) x = std::tanh(x * 0.5f + 1.0f);
    EXPECT_NEAR(y.data<float>()[i], x, 1e-6f) << "element " << i << " after " << trips << " iterations";
  }
  return s->plan_cache_stats().fresh_buffers;
}

TEST(PlanCache, LoopIterationsReuseBuffers) {
  uint64_t few = run_tanh_loop(3);
  uint64_t many = run_tanh_loop(60);
  EXPECT_GT(few, 0u);
  EXPECT_EQ(many, few) << "heap allocations must not grow with the trip count";
}

}  // namespace
}  // namespace gearbox
