// RunOptions (base/run_options.h): a run given a deadline or a terminate flag stops with
// RUN_DEADLINE_EXCEEDED / RUN_CANCELLED -- a Loop of 10^12 trips included -- and the same
// Session then runs normally: results equal to values computed here by hand, no buffer left
// behind in the device pool, no fresh allocations for the next run of the same plan.
// No timing is asserted: ctest's timeout is the guard against a run that does not stop.
#include "base/run_options.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "device/memory_pool.h"
#include "graph/onnx_importer.h"
#include "graph/onnx_test_models.h"
#include "kernels/kernel.h"
#include "runtime/control_flow.h"
#include "runtime/node_observer.h"
#include "runtime/plan_cache.h"
#include "runtime/session.h"

namespace gearbox {
namespace {

constexpr int64_t kHugeTrips = 1'000'000'000'000;  // 10^12: hours of Loop iterations

std::unique_ptr<Session> load_loop() {
  auto model = import_onnx_bytes(testing::serialize(testing::tanh_loop_model()), "");
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  auto s = Session::create(std::move(model).value());
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return std::move(s).value();
}

Tensor loop_input() {
  Tensor x0(DType::F32, {8, 3});
  for (int64_t i = 0; i < 24; ++i) x0.data<float>()[i] = static_cast<float>(i % 11) * 0.3f - 1.5f;
  return x0;
}

// Runs the loop `trips` times with `options` and checks x_final against the hand-computed
// x = tanh(x * 0.5 + 1) iterated `trips` times.
void expect_loop_result(const Session& s, int64_t trips, const RunOptions* options = nullptr) {
  const Tensor x0 = loop_input();
  auto out = s.run({{"M", Tensor::scalar<int64_t>(trips)}, {"x0", x0}}, nullptr, nullptr, options);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = out.value()[0];
  ASSERT_EQ(y.dims(), (Dims{8, 3}));
  for (int64_t i = 0; i < 24; ++i) {
    float x = x0.data<float>()[i];
    for (int64_t t = 0; t < trips; ++t) x = std::tanh(x * 0.5f + 1.0f);
    EXPECT_NEAR(y.data<float>()[i], x, 1e-6f) << "element " << i << " after " << trips << " iterations";
  }
}

Status run_huge(const Session& s, const RunOptions& options) {
  auto out = s.run({{"M", Tensor::scalar<int64_t>(kHugeTrips)}, {"x0", loop_input()}}, options);
  return out.status();
}

TEST(RunOptions, DeadlineStopsHugeLoopAndSessionStaysUsable) {
  auto s = load_loop();
  ASSERT_TRUE(s);
  expect_loop_result(*s, 7);
  const uint64_t fresh = s->plan_cache_stats().fresh_buffers;
  const size_t pool_used = s->device_pool()->stats().used;

  RunOptions options;
  options.deadline = RunOptions::after(0.3);
  Status st = run_huge(*s, options);
  EXPECT_EQ(st.code(), ErrorCode::RUN_DEADLINE_EXCEEDED) << st.to_string();
  EXPECT_NE(st.message().find("node 'loop' (Loop"), std::string::npos) << st.message();

  // What the stopped run held went back: the device pool is as before it, and the next run of
  // the same shape signature reuses the plan's buffers without a fresh allocation.
  EXPECT_EQ(s->device_pool()->stats().used, pool_used);
  expect_loop_result(*s, 7);
  EXPECT_EQ(s->plan_cache_stats().fresh_buffers, fresh);
}

TEST(RunOptions, ExpiredDeadlineStopsBeforeTheFirstNode) {
  auto s = load_loop();
  ASSERT_TRUE(s);
  RunOptions options;
  options.deadline = RunOptions::Clock::now() - std::chrono::seconds(1);
  auto out = s->run({{"M", Tensor::scalar<int64_t>(3)}, {"x0", loop_input()}}, options);
  EXPECT_EQ(out.status().code(), ErrorCode::RUN_DEADLINE_EXCEEDED);
  EXPECT_NE(out.status().message().find("stopped before node 'loop'"), std::string::npos) << out.status().message();
  expect_loop_result(*s, 3);
}

TEST(RunOptions, TerminateFromAnotherThreadCancelsHugeLoop) {
  auto s = load_loop();
  ASSERT_TRUE(s);
  RunOptions options;
  std::thread canceller([t = options.terminate] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    t.cancel();
  });
  Status st = run_huge(*s, options);
  canceller.join();
  EXPECT_EQ(st.code(), ErrorCode::RUN_CANCELLED) << st.to_string();
  // The flag stays set until reset (as ORT's terminate): a run given it stops at once ...
  auto again = s->run({{"M", Tensor::scalar<int64_t>(3)}, {"x0", loop_input()}}, options);
  EXPECT_EQ(again.status().code(), ErrorCode::RUN_CANCELLED);
  // ... and once reset, the same options run to the right result on the same session.
  options.terminate.reset();
  expect_loop_result(*s, 5, &options);
}

// Counts the nodes a run has begun (thread-safe): proves the huge run is in flight.
class NodesBegun : public NodeObserver {
 public:
  Status before_node(const Node&, int, const std::vector<const RuntimeValue*>&) override {
    ++count;
    return Status::OK();
  }
  Status after_node(const Node&, int, const std::vector<RuntimeValue>&) override { return Status::OK(); }
  std::atomic<int64_t> count{0};
};

TEST(RunOptions, CancelOneRunWhileAnotherRunsOnTheSameSession) {
  auto s = load_loop();
  ASSERT_TRUE(s);
  RunOptions doomed;
  NodesBegun begun;
  std::atomic<bool> finished{false};
  Status st;
  std::thread huge([&] {
    st = s->run({{"M", Tensor::scalar<int64_t>(kHugeTrips)}, {"x0", loop_input()}}, nullptr, &begun, &doomed).status();
    finished = true;
  });
  while (begun.count < 100) std::this_thread::yield();  // inside the Loop's iterations
  // Runs on the same session while the huge one is in flight: unaffected by its flag.
  for (int i = 0; i < 3; ++i) expect_loop_result(*s, 4);
  EXPECT_FALSE(finished) << "the huge run ended before the others: they did not overlap";
  doomed.terminate.cancel();
  huge.join();
  EXPECT_EQ(st.code(), ErrorCode::RUN_CANCELLED) << st.to_string();
  expect_loop_result(*s, 4);
}

TEST(RunOptions, RunAsyncHonoursTheDeadline) {
  auto s = load_loop();
  ASSERT_TRUE(s);
  device::Stream stream;
  std::vector<Tensor> outputs;
  RunOptions options;
  options.deadline = RunOptions::after(0.2);
  device::Event e =
      s->run_async({{"M", Tensor::scalar<int64_t>(kHugeTrips)}, {"x0", loop_input()}}, stream, &outputs, options);
  EXPECT_EQ(e.wait().code(), ErrorCode::RUN_DEADLINE_EXCEEDED);
  expect_loop_result(*s, 2);
}

// The Loop kernel checks every iteration itself (a body the executor checks node by node may
// be empty): driven directly, with a stand-in body that sets the flag on its 4th call.
TEST(RunOptions, LoopKernelChecksEveryIteration) {
  register_control_flow_kernels();
  const KernelDef* def = KernelRegistry::global().find("", "Loop", 16, kEngineRef, DType::Undefined);
  ASSERT_NE(def, nullptr);
  auto body = std::make_shared<Graph>();
  body->name = "body";
  for (const char* n : {"i", "cond", "x"}) body->inputs.push_back(body->add_value(n));
  for (const char* n : {"cond_out", "x_out"}) body->outputs.push_back(body->add_value(n));
  AttributeMap attrs;
  attrs["body"].type = AttrType::Graph;
  attrs["body"].g = body;
  RunOptions options;
  int calls = 0;
  SubgraphRunner runner = [&](const Graph&, std::vector<RuntimeValue> in) -> Result<std::vector<RuntimeValue>> {
    if (++calls == 4) options.terminate.cancel();
    return std::vector<RuntimeValue>{RuntimeValue(Tensor::scalar<bool>(true)), in[2]};
  };
  RuntimeValue m(Tensor::scalar<int64_t>(kHugeTrips)), x(Tensor::scalar<float>(1.f));
  std::vector<RuntimeValue> outs(1);
  KernelContext ctx(OpInfo{"loop", "Loop", "", 16, &attrs}, {&m, nullptr, &x}, &outs, {true}, runner);
  Status st;
  {
    RunOptionsScope scope(&options);
    st = def->fn(ctx);
  }
  EXPECT_EQ(st.code(), ErrorCode::RUN_CANCELLED) << st.to_string();
  EXPECT_EQ(calls, 4);  // iterations 0..3 ran; the check before iteration 4 stopped it
  EXPECT_NE(st.message().find("iteration 4"), std::string::npos) << st.message();
  // Outside a scope nothing stops: the same kernel runs its 2 trips.
  RuntimeValue two(Tensor::scalar<int64_t>(2));
  calls = 0;
  KernelContext ctx2(OpInfo{"loop", "Loop", "", 16, &attrs}, {&two, nullptr, &x}, &outs, {true}, runner);
  ASSERT_TRUE(def->fn(ctx2).ok());
  EXPECT_EQ(calls, 2);
}

TEST(RunOptions, ScopesNestAndRestore) {
  EXPECT_EQ(current_run_options(), nullptr);
  RunOptions a, b;
  {
    RunOptionsScope sa(&a);
    EXPECT_EQ(current_run_options(), &a);
    {
      RunOptionsScope sb(&b);
      EXPECT_EQ(current_run_options(), &b);
    }
    EXPECT_EQ(current_run_options(), &a);
  }
  EXPECT_EQ(current_run_options(), nullptr);
  EXPECT_TRUE(check_run_stop().ok());
}

}  // namespace
}  // namespace gearbox
