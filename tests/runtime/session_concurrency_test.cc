// One Session serving 8 threads x 50 runs at once: every run's outputs must be bit-identical to
// a single-threaded run of the same inputs. Each thread has its own input (and batch size, so
// three shape signatures share the plan cache), so outputs swapped between threads, a buffer
// recycled while still in use, or a half-written cache entry all show up as a mismatch. The
// threads meet a cold session, so plan preparation and weight packing run concurrently too.
//
// The model goes through the state that concurrent runs share: a cpu.dnnl Conv (oneDNN
// primitive cache, reordered-weights cache), a MatMul with constant weights on each GEMM
// engine (cpu.simd's packed-panel cache and cpu.dnnl's packed-weights cache; the second one
// forced with an engine override), cpu.simd LayerNormalization and Softmax, cpu.ref ops, a Loop (subgraph runs
// inside a run), the plan cache, and the plans' BufferPools drawing on a device MemoryPool.
//
// The same source is built into gearbox_unit_tests and, under ThreadSanitizer, into
// gearbox_concurrency_tests (make test-tsan, docs/testing.md), where any data race fails it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <thread>

#include "device/memory_pool.h"
#include "graph/onnx_importer.h"
#include "graph/onnx_test_models.h"
#include "kernels/cpu/dnnl/dnnl_util.h"
#include "kernels/cpu/simd/simd_util.h"
#include "runtime/plan_cache.h"
#include "runtime/profiler.h"
#include "runtime/session.h"

namespace gearbox {
namespace {

constexpr int kThreads = 8, kRuns = 50;
constexpr int64_t kC = 3, kH = 8, kW = 8, kOut = 4, kHidden = 16;

void add_floats(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims, float scale,
                float offset) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  for (int64_t i = 0; i < n; ++i) t->add_float_data(scale * std::sin(0.37f * static_cast<float>(i) + offset));
}

void add_int64s(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                const std::vector<int64_t>& values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t v : values) t->add_int64_data(v);
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& ins,
                          const std::string& out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out);
  for (const auto& i : ins) n->add_input(i);
  n->add_output(out);
  return n;
}

void add_scalar_io(onnx::ValueInfoProto* vi, const std::string& name, int elem_type) {
  testing::add_tensor_io(vi, name, elem_type, {});
  vi->mutable_type()->mutable_tensor_type()->mutable_shape();
}

// x [n,3,8,8] -> Conv 3x3 (4 filters, pad 1) -> Relu -> Reshape [n,4,64] -> MatMul const [64,16]
//   -> LayerNormalization -> Softmax = probs
//   MatMul output -> Tanh -> MatMul const [16,16] (forced onto cpu.dnnl) -> Loop 3 times:
//   y = Tanh(y * k + float(i)) = looped
onnx::ModelProto concurrency_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("concurrency");
  testing::add_tensor_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"n", "3", "8", "8"});
  testing::add_tensor_io(g->add_output(), "probs", onnx::TensorProto::FLOAT, {"n", "4", "16"});
  testing::add_tensor_io(g->add_output(), "looped", onnx::TensorProto::FLOAT, {"n", "4", "16"});
  add_floats(g, "conv_w", {kOut, kC, 3, 3}, 0.3f, 0.1f);
  add_floats(g, "conv_b", {kOut}, 0.1f, 0.7f);
  add_int64s(g, "shape", {3}, {0, kOut, kH * kW});
  add_floats(g, "mm_w", {kH * kW, kHidden}, 0.2f, 1.3f);
  add_floats(g, "mm2_w", {kHidden, kHidden}, 0.25f, 0.9f);
  add_floats(g, "ln_scale", {kHidden}, 1.0f, 0.4f);
  add_floats(g, "ln_bias", {kHidden}, 0.5f, 2.2f);
  add_int64s(g, "trips", {}, {3});
  auto* k = g->add_initializer();
  k->set_name("k");
  k->set_data_type(onnx::TensorProto::FLOAT);
  k->add_float_data(0.75f);

  auto* conv = add_node(g, "Conv", {"x", "conv_w", "conv_b"}, "conv");
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  add_node(g, "Relu", {"conv"}, "relu");
  add_node(g, "Reshape", {"relu", "shape"}, "flat");
  add_node(g, "MatMul", {"flat", "mm_w"}, "mm");
  auto* ln = add_node(g, "LayerNormalization", {"mm", "ln_scale", "ln_bias"}, "ln");
  auto* axis = ln->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(-1);
  add_node(g, "Softmax", {"ln"}, "probs");
  add_node(g, "Tanh", {"mm"}, "t");
  add_node(g, "MatMul", {"t", "mm2_w"}, "mm2");

  auto* loop = add_node(g, "Loop", {"trips", "", "mm2"}, "looped");
  auto* attr = loop->add_attribute();
  attr->set_name("body");
  attr->set_type(onnx::AttributeProto::GRAPH);
  auto* body = attr->mutable_g();
  body->set_name("body");
  add_scalar_io(body->add_input(), "i", onnx::TensorProto::INT64);
  add_scalar_io(body->add_input(), "cond", onnx::TensorProto::BOOL);
  testing::add_tensor_io(body->add_input(), "y", onnx::TensorProto::FLOAT, {"n", "4", "16"});
  add_scalar_io(body->add_output(), "cond_out", onnx::TensorProto::BOOL);
  testing::add_tensor_io(body->add_output(), "y_out", onnx::TensorProto::FLOAT, {"n", "4", "16"});
  add_node(body, "Identity", {"cond"}, "cond_out");
  auto* cast = add_node(body, "Cast", {"i"}, "fi");
  auto* to = cast->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::FLOAT);
  add_node(body, "Mul", {"y", "k"}, "yk");
  add_node(body, "Add", {"yk", "fi"}, "yki");
  add_node(body, "Tanh", {"yki"}, "y_out");
  return m;
}

// The second MatMul runs on cpu.dnnl whichever GEMM engine the list prefers.
const std::vector<std::string> kDnnlMatMul = {"mm2=cpu.dnnl"};

std::unique_ptr<Session> load(const std::string& engines, device::MemoryPool* pool,
                              std::vector<std::string> overrides = {}) {
  auto model = import_onnx_bytes(testing::serialize(concurrency_model()), "");
  if (!model.ok()) {
    ADD_FAILURE() << model.status().to_string();
    return nullptr;
  }
  SessionOptions options;
  options.engine = engines;
  options.device_pool = pool;
  options.engine_overrides = std::move(overrides);
  // threads = 0: GEARBOX_NUM_THREADS, else all cores. The ThreadSanitizer run sets it to 1
  // (tests/CMakeLists.txt says why).
  auto s = Session::create(std::move(model).value(), options);
  if (!s.ok()) {
    ADD_FAILURE() << s.status().to_string();
    return nullptr;
  }
  return std::move(s).value();
}

// Thread t's input: batch 1..3 and values of its own.
std::map<std::string, Tensor> feeds(int t) {
  Tensor x(DType::F32, {1 + t % 3, kC, kH, kW});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = std::cos(0.11f * static_cast<float>(i) + 0.9f * static_cast<float>(t)) * (1.0f + 0.1f * t);
  return {{"x", x}};
}

bool bit_identical(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype() != b[i].dtype() || a[i].dims() != b[i].dims()) return false;
    if (std::memcmp(a[i].raw(), b[i].raw(), a[i].nbytes()) != 0) return false;
  }
  return true;
}

TEST(SessionConcurrency, EightThreadsFiftyRunsMatchSingleThreadedRuns) {
  auto pool_or = device::MemoryPool::create(64 << 20);
  ASSERT_TRUE(pool_or.ok()) << pool_or.status().to_string();
  auto pool = std::move(pool_or).value();
  // `warm` gives the single-threaded outputs; `s`, a second session of the same model, meets
  // the threads cold: its plans are prepared and its weights (new buffers, so new cache keys)
  // packed by concurrent first runs.
  auto warm = load(std::string(kDefaultEngines), pool.get(), kDnnlMatMul);
  auto s = load(std::string(kDefaultEngines), pool.get(), kDnnlMatMul);
  auto ref = load(std::string(kEngineRef), nullptr);
  ASSERT_TRUE(warm && s && ref);

  // mm2 is forced onto cpu.dnnl: a case its kernel refused would fail the run (counted below),
  // never run elsewhere unseen.
  for (const auto& n : s->model().graph->nodes)
    if (n->name == "mm2") EXPECT_EQ(n->engine, kEngineDnnl);

  // Single-threaded outputs, one per thread's input; each checked against the reference
  // engine (so an engine that computed garbage consistently would not pass).
  std::vector<std::vector<Tensor>> expected(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    auto out = warm->run(feeds(t));
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    auto want = ref->run(feeds(t));
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    ASSERT_EQ(out.value().size(), 2u);
    for (size_t o = 0; o < 2; ++o) {
      const Tensor& a = out.value()[o];
      const Tensor& b = want.value()[o];
      ASSERT_EQ(a.dims(), (Dims{1 + t % 3, kOut, kHidden}));
      ASSERT_EQ(a.dims(), b.dims());
      for (int64_t i = 0; i < a.numel(); ++i)
        ASSERT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-4 + 1e-4 * std::fabs(b.data<float>()[i]))
            << "thread " << t << " output " << o << " element " << i;
    }
    expected[t] = std::move(out).value();
  }
  // Different inputs give different outputs, else a mix-up between threads would go unseen.
  for (int t = 1; t < kThreads; ++t)
    for (int u = 0; u < t; ++u) ASSERT_FALSE(bit_identical(expected[t], expected[u])) << t << " vs " << u;

  // The run went through the engines this test is about (a fall-back to cpu.ref would hide
  // the shared caches).
  Profiler profiler;
  ASSERT_TRUE(warm->run(feeds(0), &profiler).ok());
  std::set<std::string> ran;  // "engine op"
  bool loop_body = false;
  for (const auto& r : profiler.ops()) {
    ran.insert(r.engine + " " + r.op_type);
    loop_body |= r.depth > 0;
  }
  auto ran_on = [&](std::string_view engine, const std::string& op_part) {
    for (const auto& e : ran)
      if (e.rfind(std::string(engine) + " ", 0) == 0 && e.find(op_part) != std::string::npos) return true;
    return false;
  };
  std::string all;
  for (const auto& e : ran) all += e + "; ";
  EXPECT_TRUE(ran_on(kEngineDnnl, "Conv")) << all;
  EXPECT_TRUE(ran_on(kEngineDnnl, "MatMul")) << all;
  EXPECT_TRUE(ran_on(kEngineSimd, "MatMul")) << all;
  EXPECT_TRUE(ran_on(kEngineSimd, "LayerNormalization")) << all;
  EXPECT_TRUE(ran_on(kEngineSimd, "Softmax")) << all;
  EXPECT_TRUE(ran_on(kEngineRef, "Loop")) << all;
  EXPECT_TRUE(loop_body) << all;
  EXPECT_GT(dnnl_engine::weight_cache_size(), 0u) << "no constant weights were reordered/packed";
  const int64_t reorders = dnnl_engine::weight_reorder_count();

  std::vector<int> failures(kThreads, 0), mismatches(kThreads, 0);
  std::vector<std::string> first_error(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const auto in = feeds(t);
      for (int r = 0; r < kRuns; ++r) {
        auto out = s->run(in);
        if (!out.ok()) {
          if (failures[t]++ == 0) first_error[t] = out.status().to_string();
          continue;
        }
        if (!bit_identical(out.value(), expected[t])) ++mismatches[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[t], 0) << "thread " << t << ": " << first_error[t];
    EXPECT_EQ(mismatches[t], 0) << "thread " << t << " of " << kRuns << " runs";
  }

  const PlanCacheStats plans = s->plan_cache_stats();
  EXPECT_EQ(plans.size, 3u);  // one plan per batch size, shared by the threads that use it
  EXPECT_EQ(plans.prepared, 3u);
  EXPECT_EQ(plans.prepared + plans.reused, static_cast<uint64_t>(kThreads * kRuns));
  EXPECT_GT(dnnl_engine::weight_reorder_count(), reorders) << "the cold session's weights were not packed";
  const device::PoolStats ps = pool->stats();
  EXPECT_GT(ps.alloc_count, 0u);
  EXPECT_EQ(ps.failed_count, 0u);
}

}  // namespace
}  // namespace gearbox
