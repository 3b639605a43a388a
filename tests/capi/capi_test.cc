// The C API (include/gearbox/gearbox.h) through libgearbox.so: results against values
// computed here by hand, every error path returns its catalogue code with a message,
// streams and events, and one model executed from 8 threads x 50 runs at once giving the
// same bytes as sequential runs.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gearbox/gearbox.h"
#include "gearbox/gearbox.hpp"
#include "graph/onnx_test_models.h"

namespace {

// y = Softmax(Relu(x @ W1 + b1) @ W2), x float [batch, 16], W1 [16, 32], W2 [32, 8].
constexpr int kIn = 16, kHidden = 32, kOut = 8;

std::vector<float> weights(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-0.5f, 0.5f);
  std::vector<float> w(static_cast<size_t>(n));
  for (auto& v : w) v = d(rng);
  return w;
}

onnx::TensorProto* add_init(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims,
                            const std::vector<float>& v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (auto d : dims) t->add_dims(d);
  for (float f : v) t->add_float_data(f);
  return t;
}

std::string mlp_model_bytes() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("mlp");
  gearbox::testing::add_tensor_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"batch", std::to_string(kIn)});
  gearbox::testing::add_tensor_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"batch", std::to_string(kOut)});
  add_init(g, "W1", {kIn, kHidden}, weights(kIn * kHidden, 1));
  add_init(g, "b1", {kHidden}, weights(kHidden, 2));
  add_init(g, "W2", {kHidden, kOut}, weights(kHidden * kOut, 3));
  auto node = [&](const char* op, std::vector<std::string> in, const char* out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (auto& i : in) n->add_input(i);
    n->add_output(out);
  };
  node("MatMul", {"x", "W1"}, "h0");
  node("Add", {"h0", "b1"}, "h1");
  node("Relu", {"h1"}, "h2");
  node("MatMul", {"h2", "W2"}, "logits");
  node("Softmax", {"logits"}, "y");
  return gearbox::testing::serialize(m);
}

// The same network written out in plain loops (double accumulation).
std::vector<float> mlp_reference(const std::vector<float>& x, int batch) {
  auto w1 = weights(kIn * kHidden, 1), b1 = weights(kHidden, 2), w2 = weights(kHidden * kOut, 3);
  std::vector<float> y(static_cast<size_t>(batch * kOut));
  for (int b = 0; b < batch; ++b) {
    double h[kHidden], l[kOut], mx = -1e30, sum = 0;
    for (int j = 0; j < kHidden; ++j) {
      double s = 0;
      for (int i = 0; i < kIn; ++i) s += double(x[b * kIn + i]) * w1[i * kHidden + j];
      h[j] = std::max(0.0, s + b1[j]);
    }
    for (int k = 0; k < kOut; ++k) {
      l[k] = 0;
      for (int j = 0; j < kHidden; ++j) l[k] += h[j] * w2[j * kOut + k];
      mx = std::max(mx, l[k]);
    }
    for (int k = 0; k < kOut; ++k) sum += std::exp(l[k] - mx);
    for (int k = 0; k < kOut; ++k) y[b * kOut + k] = static_cast<float>(std::exp(l[k] - mx) / sum);
  }
  return y;
}

std::vector<float> input_values(int batch, unsigned seed) { return weights(batch * kIn, 100 + seed); }

struct Fixture : ::testing::Test {
  void SetUp() override {
    ASSERT_EQ(gbx_context_create(&ctx), GBX_OK) << gbx_last_error_message();
    std::string bytes = mlp_model_bytes();
    ASSERT_EQ(gbx_model_load_memory(ctx, bytes.data(), bytes.size(), &model), GBX_OK) << gbx_last_error_message();
  }
  void TearDown() override {
    gbx_model_destroy(model);
    gbx_context_destroy(ctx);
  }
  gbx_tensor make_input(int batch, unsigned seed) {
    auto v = input_values(batch, seed);
    int64_t dims[2] = {batch, kIn};
    gbx_tensor t = nullptr;
    EXPECT_EQ(gbx_tensor_create_copy(GBX_DTYPE_FLOAT32, dims, 2, v.data(), v.size() * sizeof(float), &t), GBX_OK);
    return t;
  }
  std::vector<float> values(gbx_tensor t) {
    void* p = nullptr;
    size_t bytes = 0;
    EXPECT_EQ(gbx_tensor_data(t, &p, &bytes), GBX_OK);
    auto* f = static_cast<float*>(p);
    return std::vector<float>(f, f + bytes / sizeof(float));
  }
  gbx_context ctx = nullptr;
  gbx_model model = nullptr;
};

TEST_F(Fixture, DescribesInputsAndOutputs) {
  size_t n_in = 0, n_out = 0;
  ASSERT_EQ(gbx_model_input_count(model, &n_in), GBX_OK);
  ASSERT_EQ(gbx_model_output_count(model, &n_out), GBX_OK);
  ASSERT_EQ(n_in, 1u);
  ASSERT_EQ(n_out, 1u);
  gbx_io_desc d{};
  ASSERT_EQ(gbx_model_input(model, 0, &d), GBX_OK);
  EXPECT_STREQ(d.name, "x");
  EXPECT_EQ(d.dtype, GBX_DTYPE_FLOAT32);
  ASSERT_EQ(d.rank, 2);
  EXPECT_EQ(d.dims[0], -1);
  EXPECT_STREQ(d.dim_names[0], "batch");
  EXPECT_EQ(d.dims[1], kIn);
  ASSERT_EQ(gbx_model_output(model, 0, &d), GBX_OK);
  EXPECT_STREQ(d.name, "y");
  EXPECT_EQ(d.dims[1], kOut);
  EXPECT_EQ(gbx_model_input(model, 1, &d), 7007);
  EXPECT_NE(std::string(gbx_last_error_message()).find("out of range"), std::string::npos);
}

TEST_F(Fixture, ExecuteMatchesHandComputedNetwork) {
  gbx_tensor x = make_input(3, 7), y = nullptr;
  const char* name = "x";
  ASSERT_EQ(gbx_execute(model, &name, &x, 1, &y, 1), GBX_OK) << gbx_last_error_message();
  int64_t dims[4];
  size_t rank = 0;
  ASSERT_EQ(gbx_tensor_shape(y, dims, 4, &rank), GBX_OK);
  ASSERT_EQ(rank, 2u);
  EXPECT_EQ(dims[0], 3);
  EXPECT_EQ(dims[1], kOut);
  auto got = values(y), want = mlp_reference(input_values(3, 7), 3);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  gbx_tensor_destroy(x);
  gbx_tensor_destroy(y);
}

TEST_F(Fixture, ErrorsCarryCatalogueCodes) {
  gbx_tensor x = make_input(2, 1), y = nullptr;
  const char* bad = "nope";
  EXPECT_EQ(gbx_execute(model, &bad, &x, 1, &y, 1), 4002);  // INPUT_UNKNOWN
  EXPECT_EQ(gbx_last_error_code(), 4002);
  EXPECT_NE(std::string(gbx_last_error_message()).find("GBX-E4002 INPUT_UNKNOWN"), std::string::npos);
  EXPECT_EQ(gbx_execute(model, nullptr, nullptr, 0, &y, 1), 4001);  // INPUT_MISSING
  const char* name = "x";
  EXPECT_EQ(gbx_execute(model, &name, &x, 1, &y, 2), 7007);  // wrong output count
  EXPECT_EQ(gbx_execute(nullptr, &name, &x, 1, &y, 1), 7007);
  int64_t dims[2] = {2, kIn + 1};
  gbx_tensor wrong = nullptr;
  ASSERT_EQ(gbx_tensor_create(GBX_DTYPE_FLOAT32, dims, 2, &wrong), GBX_OK);
  EXPECT_EQ(gbx_execute(model, &name, &wrong, 1, &y, 1), 4004);  // INPUT_SHAPE_MISMATCH
  float four[4] = {};
  gbx_tensor t = nullptr;
  EXPECT_EQ(gbx_tensor_create_copy(GBX_DTYPE_FLOAT32, dims, 2, four, sizeof four, &t), 7007);
  EXPECT_NE(std::string(gbx_last_error_message()).find("16 were given"), std::string::npos) << gbx_last_error_message();
  EXPECT_EQ(gbx_tensor_create(8 /* string */, dims, 2, &t), 7007);
  EXPECT_EQ(gbx_tensor_create(99, dims, 2, &t), 7007);
  gbx_model m = nullptr;
  EXPECT_EQ(gbx_model_load_memory(ctx, "garbage!", 8, &m), 2001);  // MODEL_PARSE_FAILED
  EXPECT_EQ(gbx_model_load_memory(ctx, "x", 0, &m), 1002);         // FILE_EMPTY
  EXPECT_EQ(gbx_model_load_file(ctx, "/nonexistent/model.onnx", &m), 1001);
  EXPECT_EQ(gbx_model_load_file(nullptr, "a", &m), 7007);
  EXPECT_EQ(m, nullptr);
  gbx_tensor_destroy(wrong);
  gbx_tensor_destroy(x);
  gbx_tensor_destroy(nullptr);  // no-ops
  gbx_model_destroy(nullptr);
}

TEST(CApi, DevicesAndVersion) {
  EXPECT_EQ(gbx_api_version(), GBX_API_VERSION);
  EXPECT_STREQ(gbx_version(), GEARBOX_VERSION_STRING);  // the CMake project version
  int32_t n = -1;
  ASSERT_EQ(gbx_device_count(GBX_DEVICE_CPU, &n), GBX_OK);
  EXPECT_EQ(n, 1);
  ASSERT_EQ(gbx_device_count(GBX_DEVICE_CUDA, &n), GBX_OK);
  EXPECT_EQ(n, 0);
  EXPECT_EQ(gbx_device_set(GBX_DEVICE_CUDA, 0), 7006);  // DEVICE_NOT_FOUND
  EXPECT_NE(std::string(gbx_last_error_message()).find("GBX-E7006"), std::string::npos);
  EXPECT_EQ(gbx_device_set(GBX_DEVICE_CPU, 1), 7006);
  EXPECT_EQ(gbx_device_set(GBX_DEVICE_CPU, 0), GBX_OK);
  EXPECT_EQ(gbx_device_reset(), GBX_OK);
  size_t cap = 0, used = 1, largest = 0;
  double frag = -1;
  ASSERT_EQ(gbx_device_memory(&cap, &used, &largest, &frag), GBX_OK);
  EXPECT_GT(cap, 0u);
  // Session tensors come from this pool, but every model and tensor of the tests before this
  // one was destroyed, which gives their blocks back (plans' cached ones included): the API
  // overwrites the seeded 1 with 0, and the whole capacity is free.
  EXPECT_EQ(used, 0u);
  EXPECT_GT(largest, 0u);
  EXPECT_LE(largest, cap);
  EXPECT_GE(frag, 0.0);
}

TEST_F(Fixture, StreamsAndEvents) {
  gbx_stream streams[3];
  for (auto& s : streams) ASSERT_EQ(gbx_stream_create(ctx, &s), GBX_OK);
  const char* name = "x";
  std::vector<gbx_event> events;
  for (int i = 0; i < 12; ++i) {
    gbx_tensor x = make_input(2, static_cast<unsigned>(i));
    gbx_event e = nullptr;
    ASSERT_EQ(gbx_execute_async(model, &name, &x, 1, streams[i % 3], &e), GBX_OK) << gbx_last_error_message();
    // The input was captured: overwriting (and freeing) it now must not change the result.
    void* p = nullptr;
    size_t bytes = 0;
    ASSERT_EQ(gbx_tensor_data(x, &p, &bytes), GBX_OK);
    std::memset(p, 0, bytes);
    gbx_tensor_destroy(x);
    events.push_back(e);
  }
  for (int i = 0; i < 12; ++i) {
    ASSERT_EQ(gbx_event_wait(events[i]), GBX_OK) << gbx_last_error_message();
    int32_t done = 0;
    ASSERT_EQ(gbx_event_query(events[i], &done), GBX_OK);
    EXPECT_EQ(done, 1);
    size_t n = 0;
    ASSERT_EQ(gbx_event_output_count(events[i], &n), GBX_OK);
    ASSERT_EQ(n, 1u);
    gbx_tensor y = nullptr;
    ASSERT_EQ(gbx_event_output(events[i], 0, &y), GBX_OK);
    auto got = values(y), want = mlp_reference(input_values(2, static_cast<unsigned>(i)), 2);
    for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-5);
    EXPECT_EQ(gbx_event_output(events[i], 1, &y), 7007);
    gbx_tensor_destroy(y);
    gbx_event_destroy(events[i]);
  }
  // A failing execution reports through its event.
  gbx_tensor wrong = nullptr;
  int64_t dims[1] = {3};
  ASSERT_EQ(gbx_tensor_create(GBX_DTYPE_FLOAT32, dims, 1, &wrong), GBX_OK);
  gbx_event e = nullptr;
  ASSERT_EQ(gbx_execute_async(model, &name, &wrong, 1, streams[0], &e), GBX_OK);
  EXPECT_EQ(gbx_event_wait(e), 4004);
  gbx_tensor y = nullptr;
  EXPECT_EQ(gbx_event_output(e, 0, &y), 4004);
  gbx_event_destroy(e);
  // An event destroyed before its run finishes, and a stream destroyed with work queued.
  gbx_tensor x = make_input(4, 99);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(gbx_execute_async(model, &name, &x, 1, streams[1], &e), GBX_OK);
    gbx_event_destroy(e);
  }
  ASSERT_EQ(gbx_stream_synchronize(streams[1]), GBX_OK);
  for (auto& s : streams) gbx_stream_destroy(s);
  gbx_tensor_destroy(x);
  gbx_tensor_destroy(wrong);
}

TEST_F(Fixture, ModelDestroyedWhileRunsAreQueued) {
  std::string bytes = mlp_model_bytes();
  gbx_model second = nullptr;
  ASSERT_EQ(gbx_model_load_memory(ctx, bytes.data(), bytes.size(), &second), GBX_OK);
  gbx_stream stream = nullptr;
  ASSERT_EQ(gbx_stream_create(ctx, &stream), GBX_OK);
  const char* name = "x";
  gbx_tensor x = make_input(2, 5);
  std::vector<gbx_event> events(5);
  for (auto& e : events) ASSERT_EQ(gbx_execute_async(second, &name, &x, 1, stream, &e), GBX_OK);
  gbx_model_destroy(second);  // the queued runs keep what they need
  auto want = mlp_reference(input_values(2, 5), 2);
  for (auto& e : events) {
    ASSERT_EQ(gbx_event_wait(e), GBX_OK) << gbx_last_error_message();
    gbx_tensor y = nullptr;
    ASSERT_EQ(gbx_event_output(e, 0, &y), GBX_OK);
    auto got = values(y);
    for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-5);
    gbx_tensor_destroy(y);
    gbx_event_destroy(e);
  }
  gbx_stream_destroy(stream);
  gbx_tensor_destroy(x);
}

// One model (one Session) run from 8 threads x 50 runs at once: each run's output must be
// byte-identical to the same input run sequentially.
TEST_F(Fixture, ConcurrentExecuteOnOneModelIsDeterministic) {
  constexpr int kThreads = 8, kRuns = 50, kBatch = 4;
  const char* name = "x";
  std::vector<std::vector<float>> expected(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    gbx_tensor x = make_input(kBatch, static_cast<unsigned>(t)), y = nullptr;
    ASSERT_EQ(gbx_execute(model, &name, &x, 1, &y, 1), GBX_OK);
    expected[t] = values(y);
    auto want = mlp_reference(input_values(kBatch, static_cast<unsigned>(t)), kBatch);
    for (size_t k = 0; k < want.size(); ++k) ASSERT_NEAR(expected[t][k], want[k], 1e-5);
    gbx_tensor_destroy(x);
    gbx_tensor_destroy(y);
  }
  std::vector<int> mismatches(kThreads, 0), failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      gbx_tensor x = make_input(kBatch, static_cast<unsigned>(t));
      for (int r = 0; r < kRuns; ++r) {
        gbx_tensor y = nullptr;
        if (gbx_execute(model, &name, &x, 1, &y, 1) != GBX_OK) {
          ++failures[t];
          continue;
        }
        void* p = nullptr;
        size_t bytes = 0;
        gbx_tensor_data(y, &p, &bytes);
        if (bytes != expected[t].size() * sizeof(float) || std::memcmp(p, expected[t].data(), bytes) != 0)
          ++mismatches[t];
        gbx_tensor_destroy(y);
      }
      gbx_tensor_destroy(x);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[t], 0) << "thread " << t;
    EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  }
}

// ---- run options: a Loop of 10^12 trips stopped by a timeout or the terminate flag ----------

// x_final = Loop M times x = tanh(x * 0.5 + 1) (tests/graph/onnx_test_models.h), x0 [2, 3].
struct LoopFixture : ::testing::Test {
  void SetUp() override {
    ASSERT_EQ(gbx_context_create(&ctx), GBX_OK);
    const std::string bytes = gearbox::testing::serialize(gearbox::testing::tanh_loop_model());
    ASSERT_EQ(gbx_model_load_memory(ctx, bytes.data(), bytes.size(), &model), GBX_OK) << gbx_last_error_message();
    ASSERT_EQ(gbx_run_options_create(&options), GBX_OK);
    const int64_t dims[2] = {2, 3};
    for (int i = 0; i < 6; ++i) x0[i] = 0.25f * static_cast<float>(i) - 0.5f;
    ASSERT_EQ(gbx_tensor_create_copy(GBX_DTYPE_FLOAT32, dims, 2, x0, sizeof(x0), &x), GBX_OK);
  }
  void TearDown() override {
    gbx_tensor_destroy(x);
    gbx_run_options_destroy(options);
    gbx_model_destroy(model);
    gbx_context_destroy(ctx);
  }
  // Executes M trips with `opts`; on success checks x_final against the loop computed here.
  gbx_status run(int64_t trips, gbx_run_options opts) {
    gbx_tensor m = nullptr, y = nullptr;
    EXPECT_EQ(gbx_tensor_create_copy(GBX_DTYPE_INT64, nullptr, 0, &trips, sizeof(trips), &m), GBX_OK);
    const char* names[2] = {"M", "x0"};
    gbx_tensor in[2] = {m, x};
    gbx_status st = gbx_execute_with_options(model, names, in, 2, &y, 1, opts);
    if (st == GBX_OK) {
      void* p = nullptr;
      size_t bytes = 0;
      EXPECT_EQ(gbx_tensor_data(y, &p, &bytes), GBX_OK);
      EXPECT_EQ(bytes, sizeof(x0));
      for (int i = 0; i < 6 && bytes == sizeof(x0); ++i) {
        float want = x0[i];
        for (int64_t t = 0; t < trips; ++t) want = std::tanh(want * 0.5f + 1.0f);
        EXPECT_NEAR(static_cast<float*>(p)[i], want, 1e-6f) << i;
      }
    }
    gbx_tensor_destroy(y);
    gbx_tensor_destroy(m);
    return st;
  }
  static constexpr int64_t kHuge = 1'000'000'000'000;
  gbx_context ctx = nullptr;
  gbx_model model = nullptr;
  gbx_run_options options = nullptr;
  gbx_tensor x = nullptr;
  float x0[6];
};

TEST_F(LoopFixture, TimeoutStopsHugeLoopAndModelRunsAgain) {
  ASSERT_EQ(gbx_run_options_set_timeout(options, 0.3), GBX_OK);
  EXPECT_EQ(run(kHuge, options), 4008) << gbx_last_error_message();  // RUN_DEADLINE_EXCEEDED
  EXPECT_NE(std::string(gbx_last_error_message()).find("RUN_DEADLINE_EXCEEDED"), std::string::npos);
  EXPECT_EQ(run(6, options), GBX_OK) << gbx_last_error_message();  // same options, a short run
  EXPECT_EQ(run(6, nullptr), GBX_OK) << gbx_last_error_message();
  EXPECT_EQ(gbx_run_options_set_timeout(options, -1), 7007);
  EXPECT_EQ(gbx_run_options_set_timeout(options, NAN), 7007);
  EXPECT_EQ(gbx_run_options_set_timeout(nullptr, 1), 7007);
}

TEST_F(LoopFixture, TerminateFromAnotherThreadCancels) {
  std::thread canceller([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    gbx_run_options_set_terminate(options, 1);
  });
  EXPECT_EQ(run(kHuge, options), 4007) << gbx_last_error_message();  // RUN_CANCELLED
  canceller.join();
  EXPECT_EQ(run(2, options), 4007);  // the flag stays set until cleared
  ASSERT_EQ(gbx_run_options_set_terminate(options, 0), GBX_OK);
  EXPECT_EQ(run(2, options), GBX_OK) << gbx_last_error_message();
}

TEST_F(LoopFixture, AsyncRunStopsAtItsTimeout) {
  gbx_stream stream = nullptr;
  ASSERT_EQ(gbx_stream_create(ctx, &stream), GBX_OK);
  ASSERT_EQ(gbx_run_options_set_timeout(options, 0.2), GBX_OK);
  int64_t trips = kHuge;
  gbx_tensor m = nullptr;
  ASSERT_EQ(gbx_tensor_create_copy(GBX_DTYPE_INT64, nullptr, 0, &trips, sizeof(trips), &m), GBX_OK);
  const char* names[2] = {"M", "x0"};
  gbx_tensor in[2] = {m, x};
  gbx_event e = nullptr;
  ASSERT_EQ(gbx_execute_async_with_options(model, names, in, 2, stream, options, &e), GBX_OK);
  gbx_run_options_destroy(options);  // the queued run keeps what it needs
  options = nullptr;
  EXPECT_EQ(gbx_event_wait(e), 4008) << gbx_last_error_message();
  size_t n = 0;
  EXPECT_EQ(gbx_event_output_count(e, &n), 4008);  // no outputs: the run's status
  gbx_event_destroy(e);
  gbx_tensor_destroy(m);
  gbx_stream_destroy(stream);
  EXPECT_EQ(run(3, nullptr), GBX_OK) << gbx_last_error_message();
}

// The C++ wrapper (gearbox.hpp) over the same calls.
TEST_F(LoopFixture, CppRunOptions) {
  auto cctx = gbx::Context::create();
  ASSERT_TRUE(cctx.ok());
  const std::string bytes = gearbox::testing::serialize(gearbox::testing::tanh_loop_model());
  auto cmodel = gbx::Model::load_memory(*cctx, bytes.data(), bytes.size());
  ASSERT_TRUE(cmodel.ok()) << cmodel.status().message();
  auto opts = gbx::RunOptions::create();
  ASSERT_TRUE(opts.ok());
  ASSERT_TRUE(opts->set_timeout(0.3).ok());
  auto m = gbx::Tensor::from_data<int64_t>({}, {kHuge});
  auto xt = gbx::Tensor::from_data<float>({2, 3}, std::vector<float>(x0, x0 + 6));
  auto r = cmodel->run({{"M", &*m}, {"x0", &*xt}}, *opts);
  EXPECT_EQ(r.status().code(), 4008) << r.status().message();
  ASSERT_TRUE(opts->terminate().ok());
  auto m2 = gbx::Tensor::from_data<int64_t>({}, {1});
  EXPECT_EQ(cmodel->run({{"M", &*m2}, {"x0", &*xt}}, *opts).status().code(), 4007);
  ASSERT_TRUE(opts->unset_terminate().ok());
  auto ok = cmodel->run({{"M", &*m2}, {"x0", &*xt}}, *opts);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  auto y = (*ok)[0].to_vector<float>();
  ASSERT_EQ(y.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(y[static_cast<size_t>(i)], std::tanh(x0[i] * 0.5f + 1.0f), 1e-6f) << i;
}

}  // namespace

// gbx_context_set_op_path: the context's models load the plugins of its op path. The SwiGLU
// test plugin (tests/plugins/swiglu_plugin.c) against the formula computed here; a missing op
// path entry is USAGE (5001) naming it; a NULL context is INVALID_ARGUMENT.
TEST(CApi, ContextOpPathLoadsPlugins) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* example = m.add_opset_import();
  example->set_domain("com.example");
  example->set_version(1);
  auto* g = m.mutable_graph();
  g->set_name("swiglu");
  gearbox::testing::add_tensor_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2", "6"});
  gearbox::testing::add_tensor_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"2", "3"});
  auto* n = g->add_node();
  n->set_op_type("SwiGLU");
  n->set_domain("com.example");
  n->set_name("swiglu_0");
  n->add_input("x");
  n->add_output("y");
  const std::string bytes = gearbox::testing::serialize(m);

  gbx_context ctx = nullptr;
  ASSERT_EQ(gbx_context_create(&ctx), GBX_OK);
  gbx_model model = nullptr;
  EXPECT_EQ(gbx_context_set_op_path(nullptr, "x"), 7007);
  ASSERT_EQ(gbx_context_set_op_path(ctx, "/nonexistent/plugins"), GBX_OK);
  EXPECT_EQ(gbx_model_load_memory(ctx, bytes.data(), bytes.size(), &model), 5001);
  EXPECT_NE(std::string(gbx_last_error_message()).find("/nonexistent/plugins"), std::string::npos)
      << gbx_last_error_message();
  ASSERT_EQ(gbx_context_set_op_path(ctx, GEARBOX_TEST_SWIGLU_PLUGIN), GBX_OK);
  ASSERT_EQ(gbx_model_load_memory(ctx, bytes.data(), bytes.size(), &model), GBX_OK) << gbx_last_error_message();

  const std::vector<float> xv = weights(12, 9);
  int64_t dims[2] = {2, 6};
  gbx_tensor x = nullptr, y = nullptr;
  ASSERT_EQ(gbx_tensor_create_copy(GBX_DTYPE_FLOAT32, dims, 2, xv.data(), xv.size() * sizeof(float), &x), GBX_OK);
  const char* name = "x";
  ASSERT_EQ(gbx_execute(model, &name, &x, 1, &y, 1), GBX_OK) << gbx_last_error_message();
  void* p = nullptr;
  size_t nbytes = 0;
  ASSERT_EQ(gbx_tensor_data(y, &p, &nbytes), GBX_OK);
  ASSERT_EQ(nbytes, 6 * sizeof(float));
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 3; ++j) {
      const double a = xv[r * 6 + j], b = xv[r * 6 + 3 + j];
      EXPECT_NEAR(static_cast<float*>(p)[r * 3 + j], a / (1 + std::exp(-a)) * b, 1e-6) << r << "," << j;
    }
  gbx_tensor_destroy(x);
  gbx_tensor_destroy(y);
  gbx_model_destroy(model);
  gbx_context_destroy(ctx);
}
