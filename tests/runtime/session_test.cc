// Session: input validation against the model's signature, and running a small model with
// results checked against values computed by hand.
#include "runtime/session.h"

#include <gtest/gtest.h>

#include "graph/onnx_importer.h"
#include "graph/onnx_test_models.h"

namespace gearbox {
namespace {

std::unique_ptr<Session> make_session() {
  auto model = import_onnx_bytes(testing::serialize(testing::add_relu_model()), "");
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  auto s = Session::create(std::move(model).value());
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return std::move(s).value();
}

TEST(Session, RunsAndComputesRelu) {
  auto s = make_session();
  Tensor x = Tensor::from_vector<float>({1, -2, 3, -4, 5, -6}, {2, 3});
  Tensor y = Tensor::from_vector<float>({1, 1, 1, 1, 1, 1}, {2, 3});
  auto out = s->run({{"x", x}, {"y", y}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const float expected[6] = {2, 0, 4, 0, 6, 0};  // relu(x + 1)
  ASSERT_EQ(out.value()[0].dims(), (Dims{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(out.value()[0].data<float>()[i], expected[i]);
}

TEST(Session, SymbolicBatchAcceptsAnySize) {
  auto s = make_session();
  Tensor x(DType::F32, {5, 3}), y(DType::F32, {5, 3});
  EXPECT_TRUE(s->run({{"x", x}, {"y", y}}).ok());
}

TEST(Session, ValidatesInputs) {
  auto s = make_session();
  Tensor good(DType::F32, {1, 3});
  EXPECT_EQ(s->run({{"x", good}}).status().code(), ErrorCode::INPUT_MISSING);
  auto unknown = s->run({{"x", good}, {"y", good}, {"w", good}});
  EXPECT_EQ(unknown.status().code(), ErrorCode::INPUT_UNKNOWN);
  EXPECT_NE(unknown.status().message().find("'x'"), std::string::npos);  // lists the real inputs
  EXPECT_EQ(s->run({{"x", Tensor(DType::F64, {1, 3})}, {"y", good}}).status().code(), ErrorCode::INPUT_DTYPE_MISMATCH);
  EXPECT_EQ(s->run({{"x", Tensor(DType::F32, {1, 4})}, {"y", good}}).status().code(), ErrorCode::INPUT_SHAPE_MISMATCH);
  EXPECT_EQ(s->run({{"x", Tensor(DType::F32, {3})}, {"y", good}}).status().code(), ErrorCode::INPUT_SHAPE_MISMATCH);
}

// ONNX Runtime's leniency: a declared scalar takes a one-element 1-D array and a declared [1]
// a scalar; y = s * v is then s * v with the declared [1] shape. Anything else is refused.
TEST(Session, AcceptsOneElementArraysForScalarsAndBack) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("scalar_inputs");
  testing::add_tensor_io(g->add_input(), "s", onnx::TensorProto::FLOAT, {});
  g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();  // [], not unranked
  testing::add_tensor_io(g->add_input(), "v", onnx::TensorProto::FLOAT, {"1"});
  testing::add_tensor_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"1"});
  auto* mul = g->add_node();
  mul->set_op_type("Mul");
  mul->set_name("mul");
  mul->add_input("s");
  mul->add_input("v");
  mul->add_output("y");
  auto model = import_onnx_bytes(testing::serialize(m), "");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto s = Session::create(std::move(model).value());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Tensor s1 = Tensor::from_vector<float>({2.5f}, {1});
  Tensor v0 = Tensor::scalar<float>(4.f);
  auto out = (*s)->run({{"s", s1}, {"v", v0}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out.value()[0].dims(), (Dims{1}));
  EXPECT_EQ(out.value()[0].data<float>()[0], 10.f);
  EXPECT_TRUE((*s)->validate(std::map<std::string, Tensor>{{"s", s1}, {"v", v0}}).ok());
  // The caller's tensors keep their own shapes.
  EXPECT_EQ(s1.dims(), (Dims{1}));
  EXPECT_EQ(v0.dims(), (Dims{}));
  // Not one element, or not rank 1 / rank 0: today's check.
  EXPECT_EQ((*s)->run({{"s", Tensor(DType::F32, {2})}, {"v", v0}}).status().code(), ErrorCode::INPUT_SHAPE_MISMATCH);
  EXPECT_EQ((*s)->run({{"s", Tensor(DType::F32, {1, 1})}, {"v", v0}}).status().code(), ErrorCode::INPUT_SHAPE_MISMATCH);
  EXPECT_EQ((*s)->run({{"s", s1}, {"v", Tensor(DType::F32, {1, 1})}}).status().code(), ErrorCode::INPUT_SHAPE_MISMATCH);
  EXPECT_EQ((*s)->run({{"s", s1}, {"v", Tensor(DType::F32, {2})}}).status().code(), ErrorCode::INPUT_SHAPE_MISMATCH);
  EXPECT_EQ((*s)->run({{"s", Tensor(DType::F64, {1})}, {"v", v0}}).status().code(), ErrorCode::INPUT_DTYPE_MISMATCH);
}

// An op no ONNX schema knows, in the default domain: the import goes on and the session says
// which node, which op in which domain at which opset, and which engines it tried.
TEST(Session, UnknownDefaultDomainOpNamesNodeOpsetAndEngines) {
  onnx::ModelProto m = testing::add_relu_model(13);
  m.mutable_graph()->mutable_node(1)->set_op_type("NoSuchRelu");
  auto model = import_onnx_bytes(testing::serialize(m), "");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  ASSERT_EQ(model->graph->nodes[1]->domain, "");  // the checker's rewrite is undone
  auto s = Session::create(std::move(model).value());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::OP_UNSUPPORTED) << s.status().to_string();
  const std::string msg = s.status().message();
  for (const char* part : {"node 'relu'", "NoSuchRelu", "domain ai.onnx", "opset 13", "cpu.ref"})
    EXPECT_NE(msg.find(part), std::string::npos) << part << " missing from: " << msg;
}

TEST(Session, BroadcastMismatchIsAnErrorNotACrash) {
  auto model = import_onnx_bytes(testing::serialize(testing::add_relu_model()), "");
  ASSERT_TRUE(model.ok());
  // Loosen the declared shapes so the mismatch reaches the kernel.
  for (Value* v : model->graph->inputs) v->type.shape = Shape();
  auto s = Session::create(std::move(model).value());
  ASSERT_TRUE(s.ok());
  auto r = (*s)->run({{"x", Tensor(DType::F32, {2, 3})}, {"y", Tensor(DType::F32, {4, 5})}});
  EXPECT_EQ(r.status().code(), ErrorCode::SHAPE_MISMATCH) << r.status().to_string();
  EXPECT_NE(r.status().message().find("add"), std::string::npos);  // names the node
}

}  // namespace
}  // namespace gearbox
