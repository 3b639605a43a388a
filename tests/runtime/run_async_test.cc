// Session::run_async: runs enqueued on several streams at once give the same outputs as
// synchronous runs, errors arrive through the event, and one stream keeps its order.
#include <gtest/gtest.h>
#include <omp.h>

#include <thread>

#include "graph/onnx_importer.h"
#include "graph/onnx_test_models.h"
#include "runtime/node_observer.h"
#include "runtime/session.h"

namespace gearbox {
namespace {

std::unique_ptr<Session> add_relu_session() {
  auto model = import_onnx_bytes(testing::serialize(testing::add_relu_model()), "");
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  auto s = Session::create(std::move(model).value());
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return std::move(s).value();
}

std::map<std::string, Tensor> feeds(int k) {
  Tensor x(DType::F32, {k + 1, 3}), y(DType::F32, {k + 1, 3});
  for (int64_t i = 0; i < x.numel(); ++i) {
    x.data<float>()[i] = static_cast<float>((i * 7 + k) % 13) - 6.0f;
    y.data<float>()[i] = 0.25f * static_cast<float>(k);
  }
  return {{"x", x}, {"y", y}};
}

TEST(RunAsync, ConcurrentStreamsMatchSynchronousRuns) {
  auto s = add_relu_session();
  constexpr int kStreams = 3, kRunsPerStream = 20;
  std::vector<std::unique_ptr<device::Stream>> streams;
  for (int i = 0; i < kStreams; ++i) streams.push_back(std::make_unique<device::Stream>());
  std::vector<std::vector<Tensor>> outs(kStreams * kRunsPerStream);
  std::vector<device::Event> events;
  for (int r = 0; r < kRunsPerStream; ++r)
    for (int i = 0; i < kStreams; ++i) {
      int k = r * kStreams + i;
      events.push_back(s->run_async(feeds(k % 5), *streams[i], &outs[k]));
    }
  for (const auto& e : events) ASSERT_TRUE(e.wait().ok()) << e.wait().to_string();
  for (int k = 0; k < kStreams * kRunsPerStream; ++k) {
    auto sync = s->run(feeds(k % 5));
    ASSERT_TRUE(sync.ok());
    const Tensor& a = outs[k][0];
    const Tensor& b = sync.value()[0];
    ASSERT_EQ(a.dims(), b.dims());
    for (int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(a.data<float>()[i], b.data<float>()[i]) << "run " << k;
  }
}

TEST(RunAsync, ErrorArrivesThroughTheEvent) {
  auto s = add_relu_session();
  device::Stream stream;
  std::vector<Tensor> out;
  device::Event e = s->run_async({{"x", Tensor(DType::F32, {1, 3})}}, stream, &out);  // y missing
  Status st = e.wait();
  EXPECT_EQ(st.code(), ErrorCode::INPUT_MISSING) << st.to_string();
  EXPECT_TRUE(out.empty());
}

// OpenMP's thread count is per thread: a session created with threads=1 must run with one
// thread on any thread that calls it, not only on the thread that created it, and give that
// thread its own count back after the run.
class ThreadCountProbe : public NodeObserver {
 public:
  Status before_node(const Node&, int, const std::vector<const RuntimeValue*>&) override {
    during = omp_get_max_threads();
    return Status::OK();
  }
  Status after_node(const Node&, int, const std::vector<RuntimeValue>&) override { return Status::OK(); }
  int during = -1;
};

TEST(SessionThreads, AppliedOnEveryCallingThread) {
  auto model = import_onnx_bytes(testing::serialize(testing::add_relu_model()), "");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  SessionOptions options;
  options.threads = 1;
  auto s = Session::create(std::move(model).value(), options);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  int after = -1;
  bool ok = false;
  ThreadCountProbe probe;
  std::thread caller([&] {
    omp_set_num_threads(3);  // what this thread would otherwise use
    ok = (*s)->run(feeds(0), nullptr, &probe).ok();
    after = omp_get_max_threads();
  });
  caller.join();
  EXPECT_TRUE(ok);
  EXPECT_EQ(probe.during, 1);
  EXPECT_EQ(after, 3) << "the run leaked its thread count to the calling thread";
}

}  // namespace
}  // namespace gearbox
