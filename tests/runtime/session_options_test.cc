// SessionOptions resolved once (runtime/session_options.cc): engine names and numeric
// environment values validated, the session's own thread count restored after every run,
// the Winograd switch reaching cpu.dnnl as an option, and gearbox compile's path
// (optimize_and_partition) building the graph Session::create builds.
#include <gtest/gtest.h>
#include <omp.h>
#include <stdlib.h>

#include <optional>
#include <string>
#include <vector>

#include "graph/gbm/gbm_writer.h"
#include "graph/pass_test_util.h"
#include "kernels/cpu/dnnl/dnnl_util.h"
#include "runtime/node_observer.h"
#include "runtime/session.h"

namespace gearbox {
namespace {

using testing::GraphBuilder;
using testing::random_tensor;

// Sets (or unsets, with nullopt) an environment variable for a scope, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// y = Relu(Conv(x, W, b)): 64 channels, 3x3, stride 1, 14x14 (Winograd-eligible on cpu.dnnl).
Model conv_relu() {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {Dim(1), Dim(64), Dim(14), Dim(14)});
  Value* w = b.constant("w", random_tensor({64, 64, 3, 3}, 1));
  Value* bias = b.constant("b", random_tensor({64}, 2));
  AttributeMap a;
  Attribute pads;
  pads.type = AttrType::Ints;
  pads.ints = {1, 1, 1, 1};
  a["pads"] = pads;
  Node* conv = b.node("Conv", {x, w, bias}, 1, a);
  Node* relu = b.node("Relu", {conv->outputs[0]});
  Node* id = b.node("Identity", {relu->outputs[0]});
  b.graph().outputs.push_back(id->outputs[0]);
  return b.take();
}

std::map<std::string, Tensor> conv_feeds() { return {{"x", random_tensor({1, 64, 14, 14}, 3)}}; }

TEST(SessionOptions, MisspeltEngineIsEngineUnknownNotIgnored) {
  {
    ScopedEnv env("GEARBOX_ENGINES", "cpu.simd,cpu.dnn,cpu.ref");
    auto s = Session::create(conv_relu());
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), ErrorCode::ENGINE_UNKNOWN);
    EXPECT_NE(s.status().message().find("GEARBOX_ENGINES"), std::string::npos) << s.status().to_string();
    EXPECT_NE(s.status().message().find("'cpu.dnn'"), std::string::npos) << s.status().to_string();
  }
  ScopedEnv env("GEARBOX_ENGINES", std::nullopt);
  SessionOptions o;
  o.engine = "cpu.ref,cuda";
  auto s = Session::create(conv_relu(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::ENGINE_UNKNOWN);
  EXPECT_NE(s.status().message().find("'cuda'"), std::string::npos) << s.status().to_string();
  o.engine = " cpu.dnnl , cpu.ref ";  // spaces are trimmed, as everywhere lists are parsed
  auto ok = Session::create(conv_relu(), o);
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ((*ok)->engines(), "cpu.dnnl,cpu.ref");
}

TEST(SessionOptions, NumericEnvironmentValuesAreValidated) {
  for (const char* bad : {"abc", "0", "-2", "4x", " 4", "99999"}) {
    ScopedEnv env("GEARBOX_NUM_THREADS", bad);
    auto o = resolve_session_options({});
    ASSERT_FALSE(o.ok()) << "GEARBOX_NUM_THREADS=" << bad;
    EXPECT_EQ(o.status().code(), ErrorCode::ENV_VALUE_INVALID);
    EXPECT_NE(o.status().message().find(std::string("GEARBOX_NUM_THREADS='") + bad + "'"), std::string::npos)
        << o.status().to_string();
  }
  {
    ScopedEnv env("GEARBOX_NUM_THREADS", "3");
    auto s = Session::create(conv_relu());
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ((*s)->threads(), 3);
    SessionOptions explicit_count;
    explicit_count.threads = 2;  // an option beats the variable
    EXPECT_EQ(resolve_session_options(explicit_count)->threads, 2);
  }
  {
    ScopedEnv env("GEARBOX_PLAN_CACHE_SIZE", "lots");
    EXPECT_EQ(Session::create(conv_relu()).status().code(), ErrorCode::ENV_VALUE_INVALID);
  }
  {
    ScopedEnv env("GEARBOX_PLAN_CACHE_SIZE", "0");
    EXPECT_EQ(resolve_session_options({})->plan_cache_size, 0);
  }
  {
    ScopedEnv env("GEARBOX_CONV_WINOGRAD", "no");
    EXPECT_EQ(resolve_session_options({}).status().code(), ErrorCode::ENV_VALUE_INVALID);
  }
  SessionOptions bf16;
  bf16.precision = "bf16";  // not a mode's name (allow_mix_precision_bf16 is)
  EXPECT_EQ(resolve_session_options(bf16).status().code(), ErrorCode::PRECISION_MODE_UNKNOWN);
  {
    ScopedEnv env("GEARBOX_PRECISION_MODE", "mixed");
    EXPECT_EQ(resolve_session_options({}).status().code(), ErrorCode::PRECISION_MODE_UNKNOWN);
  }
  {
    ScopedEnv env("GEARBOX_PRECISION_MODE", "allow_mix_precision_bf16");
    EXPECT_EQ(resolve_session_options({})->precision, "allow_mix_precision_bf16");
  }
}

// Resolving is idempotent: what Session::options() reports re-resolves to itself, so a .gbm
// compiled with a session's options and that session see the same settings.
TEST(SessionOptions, ResolvedOptionsResolveToThemselves) {
  ScopedEnv passes("GEARBOX_DISABLE_PASSES", "cse");
  auto once = resolve_session_options({});
  ASSERT_TRUE(once.ok());
  EXPECT_GT(once->threads, 0);
  EXPECT_EQ(once->optimizer.disabled_passes, std::vector<std::string>{"cse"});
  auto twice = resolve_session_options(*once);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->optimizer.disabled_passes, std::vector<std::string>{"cse"});
  EXPECT_EQ(twice->engine, once->engine);
  EXPECT_EQ(twice->threads, once->threads);
  EXPECT_EQ(twice->plan_cache_size, once->plan_cache_size);
}

// Records the OpenMP thread count each node ran with.
class ThreadProbe : public NodeObserver {
 public:
  Status before_node(const Node&, int, const std::vector<const RuntimeValue*>&) override {
    seen.push_back(omp_get_max_threads());
    return Status::OK();
  }
  Status after_node(const Node&, int, const std::vector<RuntimeValue>&) override { return Status::OK(); }
  std::vector<int> seen;
};

// OpenMP's count is a per-thread setting: a session sets its own for its run and gives the
// calling thread its previous one back, so two sessions of different counts on one thread
// each run with their own, and a default session after a 1-thread one is not left at 1.
TEST(SessionOptions, ThreadCountIsTheSessionsOwnAndRestoredAfterARun) {
  ScopedEnv env("GEARBOX_NUM_THREADS", std::nullopt);
  const int before = omp_get_max_threads();
  SessionOptions one, two, dflt;
  one.threads = 1;
  two.threads = 2;
  auto s1 = Session::create(conv_relu(), one);
  auto s2 = Session::create(conv_relu(), two);
  auto s0 = Session::create(conv_relu(), dflt);
  ASSERT_TRUE(s1.ok() && s2.ok() && s0.ok());
  EXPECT_EQ(omp_get_max_threads(), before) << "creating a session changed the calling thread's count";
  EXPECT_EQ((*s1)->threads(), 1);
  EXPECT_EQ((*s2)->threads(), 2);
  EXPECT_GE((*s0)->threads(), 1);
  for (const auto* s : {&*s1, &*s2, &*s0, &*s1, &*s0}) {
    ThreadProbe probe;
    auto r = (**s).run(conv_feeds(), nullptr, &probe);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_FALSE(probe.seen.empty());
    for (int n : probe.seen) EXPECT_EQ(n, (**s).threads());
    EXPECT_EQ(omp_get_max_threads(), before) << "a run leaked its thread count to the calling thread";
  }
}

// GEARBOX_CONV_WINOGRAD is an option now (SessionOptions::conv_winograd): the kernel reads
// the session's value, not the environment at run time.
TEST(SessionOptions, WinogradSwitchReachesTheConvolutionAsAnOption) {
  ScopedEnv env("GEARBOX_CONV_WINOGRAD", std::nullopt);
  SessionOptions on, off;
  on.engine = off.engine = "cpu.dnnl,cpu.ref";
  on.optimizer.enabled = off.optimizer.enabled = false;  // the plain Conv, on cpu.dnnl
  off.conv_winograd = 0;
  auto s_on = Session::create(conv_relu(), on);
  auto s_off = Session::create(conv_relu(), off);
  ASSERT_TRUE(s_on.ok() && s_off.ok());
  int64_t runs = dnnl_engine::winograd_conv_runs();
  auto y_on = (*s_on)->run(conv_feeds());
  ASSERT_TRUE(y_on.ok());
  // Where oneDNN has Winograd, "on" must have used it.
  const bool cpu_has_winograd = dnnl_engine::winograd_available();
  if (cpu_has_winograd)
    EXPECT_EQ(dnnl_engine::winograd_conv_runs(), runs + 1) << "conv_winograd = 1 did not run Winograd";
  runs = dnnl_engine::winograd_conv_runs();
  {
    // Set after the session was created: not read by the run any more.
    ScopedEnv late("GEARBOX_CONV_WINOGRAD", "1");
    auto y_off = (*s_off)->run(conv_feeds());
    ASSERT_TRUE(y_off.ok());
    EXPECT_EQ(dnnl_engine::winograd_conv_runs(), runs) << "conv_winograd = 0 still ran Winograd";
    // Both algorithms compute the same convolution (within Winograd's rounding).
    ASSERT_EQ((*y_on)[0].numel(), (*y_off)[0].numel());
    for (int64_t i = 0; i < (*y_on)[0].numel(); ++i)
      ASSERT_NEAR((*y_on)[0].at_double(i), (*y_off)[0].at_double(i), 1e-3) << i;
  }
  // oneDNN 2.6 implements Winograd only with AVX-512: elsewhere "on" cannot be told from "off".
  if (!cpu_has_winograd) GTEST_SKIP() << "oneDNN has no Winograd convolution on this CPU (needs AVX-512)";
}

std::string describe_graph(const Graph& g) {
  std::string s;
  for (const auto& n : g.nodes) {
    s += n->qualified_op() + " '" + n->name + "' on " + n->engine + " (";
    for (const Value* v : n->inputs) s += (v ? v->name : std::string("-")) + ",";
    s += ") -> (";
    for (const Value* v : n->outputs) s += v->name + ",";
    s += ") attrs " + std::to_string(n->attrs.size()) + "\n";
  }
  return s;
}

// gearbox compile (resolve_session_options + optimize_and_partition, then the .gbm) and
// Session::create with equal options build equal graphs: same nodes, ops, engines, wiring.
TEST(SessionOptions, CompiledAndInMemorySessionsWithEqualOptionsHaveEqualGraphs) {
  for (const char* engines : {"cpu.dnnl,cpu.ref", "cpu.simd,cpu.ref"}) {
    SessionOptions o;
    o.engine = engines;
    o.optimizer.disabled_passes = {"cse"};
    o.optimizer.use_env = false;
    auto resolved = resolve_session_options(o);
    ASSERT_TRUE(resolved.ok());
    Model compiled = conv_relu();
    auto optimized = optimize_and_partition(compiled, *resolved);
    ASSERT_TRUE(optimized.ok()) << optimized.status().to_string();
    auto bytes = gbm::serialize(compiled, {});
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    auto from_gbm = Session::load_bytes(*bytes, o);
    auto in_memory = Session::create(conv_relu(), o);
    ASSERT_TRUE(from_gbm.ok() && in_memory.ok());
    const std::string a = describe_graph(*(*from_gbm)->model().graph);
    const std::string b = describe_graph(*(*in_memory)->model().graph);
    EXPECT_EQ(a, b) << engines;
    // Not vacuous: the passes changed the graph (Identity removed, Relu fused into the conv).
    for (const auto& n : (*in_memory)->model().graph->nodes) {
      EXPECT_NE(n->op_type, "Identity") << b;
      EXPECT_NE(n->op_type, "Relu") << b;
    }
    EXPECT_EQ(optimized->partition.summary(), (*in_memory)->partition().summary());
  }
}

}  // namespace
}  // namespace gearbox
