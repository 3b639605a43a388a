// The import-time rewrite of ONNX Runtime's contrib ops (graph/contrib_ops.h): what the rewrite
// leaves in the graph and how it refuses the forms it does not cover. Their numbers are judged
// against ONNX Runtime by the oracle suite (tests/conformance/oracle, ctest conformance.ort_oracle).
#include <gtest/gtest.h>

#include <set>

#include "graph/onnx_importer.h"
#include "graph/onnx_test_models.h"
#include "graph/passes/pass_util.h"

namespace gearbox {
namespace {

using testing::add_tensor_io;

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, const std::string& name,
                          std::vector<std::string> ins, std::vector<std::string> outs, const std::string& domain) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  n->set_domain(domain);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
  return n;
}

void add_int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// y = FusedMatMul(a, b; transB = 1, alpha = 0.5, extra) with a [2, 3, 4] and b [2, 5, 4].
onnx::ModelProto fused_matmul_model(const std::string& extra_attr = "") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(14);
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  auto* g = m.mutable_graph();
  g->set_name("g");
  add_tensor_io(g->add_input(), "a", onnx::TensorProto::FLOAT, {"2", "3", "4"});
  add_tensor_io(g->add_input(), "b", onnx::TensorProto::FLOAT, {"2", "5", "4"});
  add_tensor_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"2", "3", "5"});
  auto* n = add_node(g, "FusedMatMul", "proj", {"a", "b"}, {"y"}, "com.microsoft");
  add_int_attr(n, "transB", 1);
  auto* alpha = n->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(0.5f);
  if (!extra_attr.empty()) add_int_attr(n, extra_attr, 1);
  return m;
}

std::multiset<std::string> ops_of(const Graph& g) {
  std::multiset<std::string> ops;
  for (const auto& n : g.nodes) ops.insert(n->qualified_op());
  return ops;
}

TEST(ContribOps, FusedMatMulBecomesTransposeMatMulAndScale) {
  auto r = import_onnx_bytes(fused_matmul_model().SerializeAsString(), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Graph& g = *r->graph;
  // Transpose + MatMul + Mul, and the Cast-free scalar constant: no com.microsoft node is left.
  EXPECT_EQ(ops_of(g), (std::multiset<std::string>{"Transpose", "MatMul", "Mul"}));
  // The graph output is still the value `y`, now written by the Mul.
  ASSERT_EQ(g.outputs.size(), 1u);
  ASSERT_NE(g.outputs[0]->producer, nullptr);
  EXPECT_EQ(g.outputs[0]->name, "y");
  EXPECT_EQ(g.outputs[0]->producer->op_type, "Mul");
  EXPECT_EQ(g.nodes.back()->outputs[0], g.outputs[0]);
}

// transBatchA: ONNX Runtime keeps A as [M, batch..., K]; one Transpose (perm 1, 0, 2 for rank 3)
// makes it the [batch..., M, K] MatMul reads. (Its numbers: the oracle's ms_FusedMatMul_transBatch*.)
TEST(ContribOps, TransBatchMovesTheRowAxisBehindTheBatchAxes) {
  auto r = import_onnx_bytes(fused_matmul_model("transBatchA").SerializeAsString(), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Node* of_a = nullptr;
  for (const auto& n : r->graph->nodes)
    if (n->op_type == "Transpose" && n->inputs[0]->name == "a") of_a = n.get();
  ASSERT_NE(of_a, nullptr);
  EXPECT_EQ(passes::attr_ints(*of_a, "perm"), (std::vector<int64_t>{1, 0, 2}));
}

TEST(ContribOps, FormsWithoutARewriteAreRefusedNamingNodeAndAttribute) {
  // transBatchA on an input of unknown rank: which axes are batch axes is unknown.
  onnx::ModelProto m = fused_matmul_model("transBatchA");
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  auto r = import_onnx_bytes(m.SerializeAsString(), "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::OP_UNSUPPORTED);
  EXPECT_NE(r.status().message().find("'proj'"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("transBatchA"), std::string::npos) << r.status().to_string();
}

// SimplifiedLayerNormalization sits in the ONNX domain (ONNX Runtime registers it there) and
// inside an If branch: it is rewritten there too, into ONNX's RMS arithmetic.
TEST(ContribOps, OnnxDomainOpsInsideSubgraphsAreRewritten) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(14);
  auto* g = m.mutable_graph();
  g->set_name("g");
  add_tensor_io(g->add_input(), "c", onnx::TensorProto::BOOL, {});
  g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  add_tensor_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2", "4"});
  add_tensor_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"2", "4"});
  auto* scale = g->add_initializer();
  scale->set_name("scale");
  scale->set_data_type(onnx::TensorProto::FLOAT);
  scale->add_dims(4);
  for (int i = 0; i < 4; ++i) scale->add_float_data(1.0f);
  auto* iff = add_node(g, "If", "if", {"c"}, {"y"}, "");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = iff->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* b = a->mutable_g();
    b->set_name(branch);
    add_tensor_io(b->add_output(), std::string(branch) + "_y", onnx::TensorProto::FLOAT, {"2", "4"});
    add_node(b, std::string(branch) == "then_branch" ? "SimplifiedLayerNormalization" : "Identity",
             std::string(branch) + "_node", {"x", "scale"}, {std::string(branch) + "_y"}, "");
    if (std::string(branch) == "else_branch") b->mutable_node(0)->mutable_input()->RemoveLast();
  }
  auto r = import_onnx_bytes(m.SerializeAsString(), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Graph& then_branch = *r->graph->nodes[0]->attrs.at("then_branch").g;
  auto ops = ops_of(then_branch);
  EXPECT_EQ(ops.count("SimplifiedLayerNormalization"), 0u);
  EXPECT_EQ(ops.count("ReduceMean"), 1u);
  EXPECT_EQ(ops.count("Sqrt"), 1u);
  EXPECT_EQ(then_branch.outputs[0]->producer->op_type, "Mul");
}

// SimplifiedLayerNormalization's axis comes from the file: checked against the rank before it
// sizes the list of reduced axes (fuzz/onnx_import found axis = -1610612737 on an input of unknown
// rank allocating gigabytes; fuzz/regressions/onnx_import/contrib-rms-axis-huge-negative*).
TEST(ContribOps, AnRmsNormAxisOutsideTheRankIsRefusedBeforeItSizesAnything) {
  auto model = [](std::vector<std::string> dims, int64_t axis, bool ranked) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(14);
    auto* g = m.mutable_graph();
    g->set_name("g");
    add_tensor_io(g->add_input(), "x", onnx::TensorProto::FLOAT, dims);
    if (!ranked) g->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
    add_tensor_io(g->add_input(), "s", onnx::TensorProto::FLOAT, {"4"});
    add_tensor_io(g->add_output(), "y", onnx::TensorProto::FLOAT, dims);
    add_int_attr(add_node(g, "SimplifiedLayerNormalization", "rms", {"x", "s"}, {"y"}, ""), "axis", axis);
    return import_onnx_bytes(m.SerializeAsString(), "");
  };
  auto huge = model({"2", "4"}, -1610612737, false);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), ErrorCode::OP_UNSUPPORTED) << huge.status().to_string();
  auto outside = model({"2", "4"}, 2, true);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), ErrorCode::ATTRIBUTE_INVALID) << outside.status().to_string();
  EXPECT_NE(outside.status().message().find("axis 2"), std::string::npos) << outside.status().to_string();
  auto unranked_last = model({"2", "4"}, -1, false);
  EXPECT_TRUE(unranked_last.ok()) << unranked_last.status().to_string();
}

// ai.onnx Gelu-20 becomes com.gearbox.Gelu with its approximate form; a form ONNX does not
// define is an attribute error naming the node, and before opset 20 Gelu is no ONNX op.
onnx::ModelProto onnx_gelu_model(int opset, const std::string& approximate) {
  onnx::ModelProto m;
  m.set_ir_version(opset >= 20 ? 9 : 8);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  add_tensor_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2", "3"});
  add_tensor_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"2", "3"});
  auto* n = add_node(g, "Gelu", "act", {"x"}, {"y"}, "");
  auto* a = n->add_attribute();
  a->set_name("approximate");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(approximate);
  return m;
}

TEST(ContribOps, OnnxGelu20RunsAsGearboxGelu) {
  auto r = import_onnx_bytes(onnx_gelu_model(20, "tanh").SerializeAsString(), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->graph->nodes.size(), 1u);
  const Node& n = *r->graph->nodes[0];
  EXPECT_EQ(n.qualified_op(), "com.gearbox.Gelu");
  EXPECT_EQ(n.attrs.at("approximate").s, "tanh");
  auto bad = import_onnx_bytes(onnx_gelu_model(21, "sigmoid").SerializeAsString(), "");
  EXPECT_EQ(bad.status().code(), ErrorCode::ATTRIBUTE_INVALID) << bad.status().to_string();
  EXPECT_NE(bad.status().message().find("'act'"), std::string::npos) << bad.status().to_string();
  // At opset 19 no schema knows Gelu: the import keeps it for the registry, which has no kernel.
  auto early = import_onnx_bytes(onnx_gelu_model(19, "none").SerializeAsString(), "");
  ASSERT_TRUE(early.ok()) << early.status().to_string();
  EXPECT_EQ(early->graph->nodes[0]->qualified_op(), "Gelu");
}

}  // namespace
}  // namespace gearbox
