// Capability-based partitioning (kernels/kernel_support.h, runtime/partitioner.h): a node runs
// on the first engine of the priority list whose kernel's declarations accept it; a predicate
// that refuses passes the node to the next engine, and one that needs run-time shapes has the
// executor make the same choice per shape. The partition, the profiler and the output (a
// marker kernel) agree on the engine whose code ran.
#include <gtest/gtest.h>

#include "graph/onnx_importer.h"
#include "graph/onnx_test_models.h"
#include "kernels/kernel_support.h"
#include "runtime/profiler.h"
#include "runtime/session.h"

namespace gearbox {
namespace {

constexpr std::string_view kEngineCaps = "test.caps";

// A stand-in fast engine's Relu that handles inputs of at most 2 elements along dim 0 and
// writes 42 everywhere, so a test sees which engine ran.
Status marker_relu(KernelContext& ctx) {
  Tensor y(DType::F32, ctx.input(0).dims());
  for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = 42.f;
  ctx.set_output(0, std::move(y));
  return Status::OK();
}
Verdict small_rows_only(const KernelQuery& q) {
  const Dims* d = q.dims(0);
  if (!d) return later();
  if (d->empty() || (*d)[0] > 2) return refuse("dim 0 is above 2");
  return accept();
}
GBX_REGISTER_KERNEL({"", "Relu", 6, 17, kEngineCaps, {DType::F32}, marker_relu});
GBX_KERNEL_SUPPORT(marker_relu, {.supports = small_rows_only});

// y = Relu(x), float32, x of shape [dim0] ("n": symbolic).
std::unique_ptr<Session> relu_session(const std::string& dim0, const std::string& engines,
                                      std::vector<std::string> overrides = {}, Status* error = nullptr) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("relu");
  testing::add_tensor_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {dim0});
  testing::add_tensor_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {dim0});
  auto* n = g->add_node();
  n->set_op_type("Relu");
  n->set_name("relu");
  n->add_input("x");
  n->add_output("y");
  auto model = import_onnx_bytes(testing::serialize(m), "");
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  SessionOptions options;
  options.engine = engines;
  options.engine_overrides = std::move(overrides);
  auto s = Session::create(std::move(model).value(), options);
  if (!s.ok()) {
    if (error) *error = s.status();
    return nullptr;
  }
  return std::move(s).value();
}

const Node& relu_node(const Session& s) { return *s.model().graph->nodes.at(0); }

// The first output element of a run on n elements -1, 1, -1, ...; and the engine the
// profiler recorded for the node.
std::pair<float, std::string> run_on(const Session& s, int64_t n) {
  Tensor x(DType::F32, {n});
  for (int64_t i = 0; i < n; ++i) x.data<float>()[i] = i % 2 ? 1.f : -1.f;
  Profiler prof;
  auto out = s.run({{"x", x}}, &prof);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {-1.f, ""};
  const auto ops = prof.ops();
  EXPECT_EQ(ops.size(), 1u);
  return {out.value()[0].data<float>()[0], ops.empty() ? "" : ops[0].engine};
}

TEST(CapabilityPartition, AcceptedStaticallyRunsOnTheFirstEngine) {
  auto s = relu_session("2", "test.caps,cpu.ref");
  ASSERT_TRUE(s);
  EXPECT_EQ(relu_node(*s).engine, kEngineCaps);
  EXPECT_TRUE(s->partition().decided_at_run_time.empty());
  EXPECT_EQ(run_on(*s, 2), (std::pair<float, std::string>{42.f, "test.caps"}));
}

TEST(CapabilityPartition, RefusedStaticallyGoesToTheNextEngineWithTheReason) {
  auto s = relu_session("3", "test.caps,cpu.ref");
  ASSERT_TRUE(s);
  EXPECT_EQ(relu_node(*s).engine, kEngineRef);
  ASSERT_EQ(s->partition().refusals.size(), 1u);
  EXPECT_NE(s->partition().refusals[0].find("dim 0 is above 2"), std::string::npos) << s->partition().refusals[0];
  EXPECT_EQ(run_on(*s, 3), (std::pair<float, std::string>{0.f, "cpu.ref"}));  // Relu(-1)
}

TEST(CapabilityPartition, RunTimeShapeDecidesPerShape) {
  auto s = relu_session("n", "test.caps,cpu.ref");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->partition().decided_at_run_time.count(&relu_node(*s)), 1u);
  EXPECT_NE(s->partition().summary().find("1 decided at run time"), std::string::npos) << s->partition().summary();
  // Alternating shapes: each run takes the engine its shape allows (plans are per shape).
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(run_on(*s, 2), (std::pair<float, std::string>{42.f, "test.caps"})) << round;
    EXPECT_EQ(run_on(*s, 5), (std::pair<float, std::string>{0.f, "cpu.ref"})) << round;
  }
}

TEST(CapabilityPartition, ForcedEngineThatRefusesIsAnError) {
  Status error;
  EXPECT_FALSE(relu_session("3", "test.caps,cpu.ref", {"relu=test.caps"}, &error));
  EXPECT_EQ(error.code(), ErrorCode::ENGINE_LACKS_KERNEL);
  EXPECT_NE(error.message().find("dim 0 is above 2"), std::string::npos) << error.message();
}

TEST(CapabilityPartition, ForcedEngineRefusingAtRunTimeFailsTheRunNotSilently) {
  auto s = relu_session("n", "test.caps,cpu.ref", {"relu=test.caps"});
  ASSERT_TRUE(s);
  EXPECT_EQ(run_on(*s, 1).second, "test.caps");
  auto out = s->run({{"x", Tensor(DType::F32, {4})}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::ENGINE_LACKS_KERNEL);
  EXPECT_NE(out.status().message().find("dim 0 is above 2"), std::string::npos) << out.status().message();
}

}  // namespace
}  // namespace gearbox
