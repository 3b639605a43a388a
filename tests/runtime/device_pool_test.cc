// Session tensors come from the device memory pool: outputs and intermediates live in the
// pool's region, its statistics follow a run, a model that does not fit gets the pool's
// POOL_EXHAUSTED / POOL_FRAGMENTED from Session::run (with the numbers, checked here against
// values worked out by hand from the buddy layout), never an abort; allocations inside an
// OpenMP region of a run go to the heap instead of throwing; idle cached blocks of other plans
// are given back before a request fails.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <regex>

#include "base/buffer_source.h"
#include "device/memory_pool.h"
#include "graph/onnx_importer.h"
#include "graph/onnx_test_models.h"
#include "runtime/buffer_pool.h"
#include "runtime/plan_cache.h"
#include "runtime/session.h"

#include "base/asan_poison.h"  // GBX_ASAN, asan_interface.h under AddressSanitizer

namespace gearbox {
namespace {

using device::MemoryPool;

std::unique_ptr<MemoryPool> make_pool(size_t capacity) {
  auto p = MemoryPool::create(capacity);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return std::move(p).value();
}

std::unique_ptr<Session> load(const onnx::ModelProto& proto, MemoryPool* pool, bool optimize = true) {
  auto model = import_onnx_bytes(testing::serialize(proto), "");
  if (!model.ok()) {
    ADD_FAILURE() << model.status().to_string();
    return nullptr;
  }
  SessionOptions options;
  options.device_pool = pool;
  // These cases are about the buffer pool's blocks (their numbers are worked out from it);
  // the arena's placement has its own tests (arena_test.cc).
  options.arena = false;
  options.optimizer.enabled = optimize;
  options.optimizer.use_env = false;
  auto s = Session::create(std::move(model).value(), options);
  if (!s.ok()) {
    ADD_FAILURE() << s.status().to_string();
    return nullptr;
  }
  return std::move(s).value();
}

std::map<std::string, Tensor> add_relu_inputs(int64_t rows) {
  Tensor x(DType::F32, {rows, 3}), y(DType::F32, {rows, 3});
  for (int64_t i = 0; i < rows * 3; ++i) {
    x.data<float>()[i] = static_cast<float>(i % 7) - 3.0f;
    y.data<float>()[i] = 0.5f;
  }
  return {{"x", x}, {"y", y}};
}

void expect_add_relu(const Tensor& z, int64_t rows) {
  ASSERT_EQ(z.dims(), (Dims{rows, 3}));
  for (int64_t i = 0; i < rows * 3; ++i)
    ASSERT_FLOAT_EQ(z.data<float>()[i], std::max(0.0f, static_cast<float>(i % 7) - 2.5f)) << "element " << i;
}

// "... total free 524800 bytes ..." -> 524800
size_t number_after(const std::string& message, const std::string& label) {
  std::smatch m;
  if (!std::regex_search(message, m, std::regex(label + " ([0-9]+) bytes"))) return SIZE_MAX;
  return std::stoull(m[1].str());
}

TEST(DevicePool, SessionTensorsComeFromThePoolAndGoBack) {
  auto pool = make_pool(64 << 20);
  auto s = load(testing::add_relu_model(), pool.get());
  ASSERT_TRUE(s);
  EXPECT_EQ(s->device_pool(), pool.get());
  EXPECT_EQ(pool->stats().used, 0u);
  {
    auto out = s->run(add_relu_inputs(1000));
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& z = out.value()[0];
    expect_add_relu(z, 1000);
    EXPECT_TRUE(pool->owns(z.raw())) << "the output must live in the device pool's region";
    device::PoolStats st = pool->stats();
    // s = x + y (12000 bytes -> a 16 KiB block) was live together with z (another 16 KiB).
    EXPECT_EQ(st.peak_used, 2u * 16384u);
    EXPECT_GE(st.used, 16384u);  // at least z, still held here
  }
  // Outputs dropped: what stays used is the plan's cache of idle blocks, one per buffer the
  // plan allocated.
  device::PoolStats after = pool->stats();
  EXPECT_GT(after.used, 0u);
  EXPECT_EQ(after.live_allocations, s->plan_cache_stats().fresh_buffers);
  // A second run with the same shape takes nothing new from the pool.
  uint64_t allocs = after.alloc_count;
  ASSERT_TRUE(s->run(add_relu_inputs(1000)).ok());
  EXPECT_EQ(pool->stats().alloc_count, allocs);
  EXPECT_EQ(pool->stats().used, after.used);
  s.reset();
  EXPECT_EQ(pool->stats().used, 0u) << "destroying the session gives its cached blocks back";
  EXPECT_EQ(pool->stats().live_allocations, 0u);
}

TEST(DevicePool, OutputsOutliveTheSession) {
  auto pool = make_pool(1 << 20);
  Tensor z;
  {
    auto s = load(testing::add_relu_model(), pool.get());
    ASSERT_TRUE(s);
    auto out = s->run(add_relu_inputs(50));
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    z = out.value()[0];
  }
  EXPECT_EQ(pool->stats().live_allocations, 1u);  // z alone: the session's idle blocks went back
  EXPECT_TRUE(pool->owns(z.raw()));
  expect_add_relu(z, 50);
  z = Tensor();
  EXPECT_EQ(pool->stats().used, 0u);
}

TEST(DevicePool, DefaultIsTheCpuDevicePool) {
  auto s = load(testing::add_relu_model(), nullptr);
  ASSERT_TRUE(s);
  auto def = device::default_pool();
  ASSERT_TRUE(def.ok()) << def.status().to_string();
  EXPECT_EQ(s->device_pool(), def.value());
  auto out = s->run(add_relu_inputs(4));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(def.value()->owns(out.value()[0].raw()));
  EXPECT_GT(def.value()->stats().peak_used, 0u);
}

TEST(DevicePool, IntermediatesBeyondThePoolAreExhaustedNotACrash) {
  // 768 KiB = roots of 512 KiB and 256 KiB. With 32768 rows each of s and z is 393216 bytes,
  // a 512 KiB block: s fits, z cannot be placed while s is live.
  auto pool = make_pool(768 << 10);
  auto s = load(testing::add_relu_model(), pool.get(), /*optimize=*/false);
  ASSERT_TRUE(s);
  auto out = s->run(add_relu_inputs(32768));
  ASSERT_FALSE(out.ok());
  const Status& st = out.status();
  EXPECT_EQ(st.code(), ErrorCode::POOL_EXHAUSTED) << st.to_string();
  const std::string& msg = st.message();
  EXPECT_NE(msg.find("node 'relu'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot allocate 393216 bytes"), std::string::npos) << msg;
  EXPECT_EQ(number_after(msg, "total free"), 256u << 10) << msg;
  EXPECT_EQ(number_after(msg, "largest free block"), 256u << 10) << msg;
  EXPECT_NE(msg.find("fragmentation 0.0%"), std::string::npos) << msg;
  EXPECT_EQ(pool->stats().failed_count, 1u) << "retries after giving back idle blocks are not failures";
  // The failed run released what it held; the session keeps working at a size that fits.
  auto small = s->run(add_relu_inputs(100));
  ASSERT_TRUE(small.ok()) << small.status().to_string();
  expect_add_relu(small.value()[0], 100);
}

TEST(DevicePool, TensorLargerThanThePool) {
  auto pool = make_pool(1 << 20);
  auto s = load(testing::add_relu_model(), pool.get());
  ASSERT_TRUE(s);
  auto out = s->run(add_relu_inputs(200000));  // 2.4 MB per tensor
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::POOL_EXHAUSTED) << out.status().to_string();
  EXPECT_NE(out.status().message().find("cannot allocate 2400000 bytes"), std::string::npos)
      << out.status().message();
  EXPECT_EQ(number_after(out.status().message(), "total free"), 1u << 20);
}

// x float[65536] (256 KiB). a = Relu(x), b = Neg(x), c = Abs(x), d = Sigmoid(x) fill the
// 1 MiB root in address order; b and d are then only read by ReduceSums (whose scalar outputs
// go to the 1 KiB root) and die, leaving two free 256 KiB blocks whose buddies (a, c) are live.
// Concat(a, c) needs 512 KiB: 512 KiB + 512 B are free in total, the largest block is 256 KiB.
onnx::ModelProto fragmenting_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("fragmenting");
  testing::add_tensor_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"65536"});
  for (const char* scalar : {"rb", "rd"}) {
    auto* vi = g->add_output();
    testing::add_tensor_io(vi, scalar, onnx::TensorProto::FLOAT, {});
    vi->mutable_type()->mutable_tensor_type()->mutable_shape();  // rank 0, not unknown
  }
  testing::add_tensor_io(g->add_output(), "big", onnx::TensorProto::FLOAT, {"131072"});
  auto node = [&](const char* op, std::vector<std::string> in, const char* out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  };
  node("Relu", {"x"}, "a");
  node("Neg", {"x"}, "b");
  node("Abs", {"x"}, "c");
  node("Sigmoid", {"x"}, "d");
  for (const char* r : {"rb", "rd"}) {
    auto* n = node("ReduceSum", {r[1] == 'b' ? "b" : "d"}, r);
    auto* keep = n->add_attribute();
    keep->set_name("keepdims");
    keep->set_type(onnx::AttributeProto::INT);
    keep->set_i(0);
  }
  auto* cat = node("Concat", {"a", "c"}, "big");
  auto* axis = cat->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  return m;
}

TEST(DevicePool, FragmentationThroughASession) {
  auto pool = make_pool((1 << 20) + 1024);
  auto s = load(fragmenting_model(), pool.get(), /*optimize=*/false);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s);
  Tensor x(DType::F32, {65536});
  for (int64_t i = 0; i < 65536; ++i) x.data<float>()[i] = static_cast<float>(i % 11) - 5.0f;
  auto out = s->run({{"x", x}});
  ASSERT_FALSE(out.ok());
  const Status& st = out.status();
  EXPECT_EQ(st.code(), ErrorCode::POOL_FRAGMENTED) << st.to_string();
  const std::string& msg = st.message();
  EXPECT_NE(msg.find("node 'big'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot allocate 524288 bytes"), std::string::npos) << msg;
  EXPECT_EQ(number_after(msg, "total free"), 524288u + 512u) << msg;
  EXPECT_EQ(number_after(msg, "largest free block"), 262144u) << msg;
  // 1 - 262144 / 524800
  EXPECT_NE(msg.find("fragmentation 50.0%"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4 live allocations"), std::string::npos) << msg;  // a, c, rb, rd

  // The same model in a pool with room runs, and its values are the hand-computed ones.
  auto roomy = make_pool(4 << 20);
  auto roomy_session = load(fragmenting_model(), roomy.get(), /*optimize=*/false);
  ASSERT_TRUE(roomy_session);
  auto ok = roomy_session->run({{"x", x}});
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  double sum_neg = 0, sum_sig = 0;
  for (int64_t i = 0; i < 65536; ++i) {
    double v = x.data<float>()[i];
    sum_neg -= v;
    sum_sig += 1.0 / (1.0 + std::exp(-v));
  }
  EXPECT_NEAR(ok.value()[0].data<float>()[0], sum_neg, 1e-3 * std::abs(sum_neg) + 1e-2);
  EXPECT_NEAR(ok.value()[1].data<float>()[0], sum_sig, 1e-4 * sum_sig);
  const Tensor& big = ok.value()[2];
  ASSERT_EQ(big.dims(), (Dims{131072}));
  for (int64_t i = 0; i < 65536; ++i) {
    float v = x.data<float>()[i];
    ASSERT_EQ(big.data<float>()[i], std::max(v, 0.0f));
    ASSERT_EQ(big.data<float>()[65536 + i], std::abs(v));
  }
}

// Blocks a run gives back are poisoned under AddressSanitizer; once the session and the pool
// are gone, none of that poison may stay on the pool's address range, which the kernel hands
// out again (libomp's registration page landed there at exit and read as use-after-poison).
TEST(DevicePool, DestroyedPoolLeavesNoPoison) {
#if !defined(GBX_ASAN)
  GTEST_SKIP() << "pool memory is poisoned only under AddressSanitizer (make test-asan runs this)";
#else
  const void* base = nullptr;
  size_t capacity = 0;
  {
    auto pool = make_pool(4 << 20);
    base = pool->base();
    capacity = pool->capacity();
    {
      auto s = load(fragmenting_model(), pool.get(), /*optimize=*/false);
      ASSERT_TRUE(s);
      Tensor x(DType::F32, {65536});
      for (int64_t i = 0; i < 65536; ++i) x.data<float>()[i] = static_cast<float>(i % 7);
      ASSERT_TRUE(s->run({{"x", x}}).ok());
    }
    void* p = pool->allocate(4096).value();
    ASSERT_TRUE(pool->release(p).ok());
    ASSERT_TRUE(__asan_address_is_poisoned(p));  // the check below can see poison
  }
  EXPECT_EQ(__asan_region_is_poisoned(const_cast<void*>(base), capacity), nullptr);
#endif
}

TEST(DevicePool, RunScopeThrowsOnlyOutsideOpenMpRegions) {
  auto pool = make_pool(256);  // one block
  BufferPool buffers;
  ASSERT_TRUE(buffers.bind(pool.get()).ok());
  BufferPool::RunScope scope(&buffers);
  Tensor held(DType::F32, {16});  // takes the only block
  EXPECT_TRUE(pool->owns(held.raw()));
  try {
    Tensor t(DType::F32, {16});
    ADD_FAILURE() << "an allocation from a full pool inside a run scope must throw";
  } catch (const BufferSourceError& e) {
    EXPECT_EQ(e.status().code(), ErrorCode::POOL_EXHAUSTED) << e.status().to_string();
  }
  // Inside a kernel's parallel region nothing may throw: the routed thread falls back to the
  // heap (worker threads are not routed at all).
  int heap_buffers = 0, team = 0;
#pragma omp parallel num_threads(2) reduction(+ : heap_buffers, team)
  {
    Tensor t(DType::F32, {16});
    t.data<float>()[0] = 1.0f;
    heap_buffers += pool->owns(t.raw()) ? 0 : 1;
    team += 1;
  }
  EXPECT_EQ(heap_buffers, team);
  EXPECT_EQ(buffers.stats().unrouted, 1u) << "only the thread that opened the scope is routed";
}

TEST(DevicePool, WithoutARunScopeAFullPoolIsOutOfMemory) {
  auto pool = make_pool(256);
  BufferPool buffers;
  ASSERT_TRUE(buffers.bind(pool.get()).ok());
  ScopedBufferSource scope(&buffers);
  auto first = Tensor::allocate(DType::F32, {16});
  ASSERT_TRUE(first.ok());
  auto second = Tensor::allocate(DType::F32, {16});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), ErrorCode::OUT_OF_MEMORY);
}

TEST(DevicePool, IdleBlocksOfOtherPlansAreGivenBack) {
  auto pool = make_pool(1 << 20);
  BufferPool a, b;
  ASSERT_TRUE(a.bind(pool.get()).ok());
  ASSERT_TRUE(b.bind(pool.get()).ok());
  EXPECT_FALSE(b.bind(make_pool(1 << 20).get()).ok()) << "a bound pool cannot move to another device pool";
  {
    BufferPool::RunScope scope(&a);
    Tensor t1(DType::U8, {512 << 10}), t2(DType::U8, {512 << 10});
  }
  EXPECT_EQ(a.stats().bytes_idle, 1u << 20);  // both cached: the whole device pool is a's
  EXPECT_EQ(pool->stats().used, 1u << 20);
  {
    BufferPool::RunScope scope(&b);
    Tensor t(DType::U8, {512 << 10});  // fits only once a's idle blocks are given back
    EXPECT_TRUE(pool->owns(t.raw()));
  }
  EXPECT_EQ(a.stats().bytes_idle, 0u);
  EXPECT_EQ(a.stats().trimmed, 2u);
  EXPECT_EQ(pool->stats().failed_count, 0u);
}

}  // namespace
}  // namespace gearbox
