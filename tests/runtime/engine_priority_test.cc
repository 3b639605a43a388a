// Engine priority: SessionOptions::engine lists engines in order; a node runs on the first one
// with a kernel for its op, opset and input dtype, and falls through to the next otherwise.
#include <gtest/gtest.h>

#include "graph/onnx_importer.h"
#include "graph/onnx_test_models.h"
#include "runtime/session.h"

namespace gearbox {
namespace {

// A stand-in "fast engine" that serves Relu for float64 only and marks its output with 42, so
// the test can see which engine ran.
Status marker_relu(KernelContext& ctx) {
  Tensor y(ctx.input(0).dtype(), ctx.input(0).dims());
  for (int64_t i = 0; i < y.numel(); ++i) y.data<double>()[i] = 42.0;
  ctx.set_output(0, std::move(y));
  return Status::OK();
}
GBX_REGISTER_KERNEL({"", "Relu", 6, 17, "test.priority", {DType::F64}, marker_relu});

// y = Relu(x), x of the given ONNX element type, shape [2].
std::unique_ptr<Session> relu_session(int elem_type, const std::string& engines, Status* error = nullptr) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("relu");
  testing::add_tensor_io(g->add_input(), "x", elem_type, {"2"});
  testing::add_tensor_io(g->add_output(), "y", elem_type, {"2"});
  auto* n = g->add_node();
  n->set_op_type("Relu");
  n->set_name("relu");
  n->add_input("x");
  n->add_output("y");
  auto model = import_onnx_bytes(testing::serialize(m), "");
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  SessionOptions options;
  options.engine = engines;
  auto s = Session::create(std::move(model).value(), options);
  if (!s.ok()) {
    if (error) *error = s.status();
    return nullptr;
  }
  return std::move(s).value();
}

template <typename T>
std::vector<double> run_relu(const Session& s) {
  auto out = s.run({{"x", Tensor::from_vector<T>({-1, 3})}});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {};
  return {out.value()[0].at_double(0), out.value()[0].at_double(1)};
}

TEST(EnginePriority, FirstEngineWithTheDtypeWins) {
  auto s = relu_session(onnx::TensorProto::DOUBLE, "test.priority,cpu.ref");
  ASSERT_TRUE(s);
  EXPECT_EQ(run_relu<double>(*s), (std::vector<double>{42, 42}));
}

TEST(EnginePriority, DtypeTheFirstEngineLacksFallsThrough) {
  auto s = relu_session(onnx::TensorProto::FLOAT, "test.priority,cpu.ref");
  ASSERT_TRUE(s);
  EXPECT_EQ(run_relu<float>(*s), (std::vector<double>{0, 3}));
}

TEST(EnginePriority, OrderDecides) {
  auto s = relu_session(onnx::TensorProto::DOUBLE, "cpu.ref,test.priority");
  ASSERT_TRUE(s);
  EXPECT_EQ(run_relu<double>(*s), (std::vector<double>{0, 3}));
}

// A list naming an engine this gearbox does not have is refused as such (it used to be
// skipped, leaving an OP_UNSUPPORTED for the first node).
TEST(EnginePriority, UnknownEngineInTheListIsRefused) {
  Status error;
  auto s = relu_session(onnx::TensorProto::FLOAT, "cpu.none", &error);
  EXPECT_FALSE(s);
  EXPECT_EQ(error.code(), ErrorCode::ENGINE_UNKNOWN);
  EXPECT_NE(error.message().find("cpu.none"), std::string::npos) << error.message();
}

TEST(EnginePriority, DtypeNoEngineServes) {
  auto s = relu_session(onnx::TensorProto::DOUBLE, "test.priority");
  ASSERT_TRUE(s);
  EXPECT_EQ(run_relu<double>(*s), (std::vector<double>{42, 42}));
  auto f = relu_session(onnx::TensorProto::FLOAT, "test.priority");
  ASSERT_TRUE(f);
  auto out = f->run({{"x", Tensor::from_vector<float>({-1, 3})}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::DTYPE_UNSUPPORTED);
}

}  // namespace
}  // namespace gearbox
