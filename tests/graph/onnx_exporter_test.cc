// ONNX export (graph/onnx_exporter.h): an imported model written back and read again keeps its
// graph (names, dims, attributes of every kind, initializers) and its results; subgraphs are
// refused. The framework's traced exports are tested in tests/frontend/graph_mode_test.cc.
#include "graph/onnx_exporter.h"

#include <gtest/gtest.h>

#include "graph/onnx_importer.h"
#include "graph/onnx_test_models.h"
#include "runtime/session.h"

namespace gearbox {
namespace {

Model import_bytes(const std::string& bytes, bool check = true) {
  ImportOptions io;
  io.check_model = check;
  auto m = import_onnx_bytes(bytes, "", io);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return std::move(m.value());
}

Model round_trip(const Model& model, bool check = true) {
  auto bytes = export_onnx_bytes(model);
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  return import_bytes(bytes.value(), check);
}

TEST(OnnxExporter, RoundTripKeepsGraphAndResults) {
  onnx::ModelProto proto = testing::add_relu_model(13);
  auto* w = proto.mutable_graph()->add_initializer();  // y becomes a constant: [[1, -2, 3]]
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (float v : {1.f, -2.f, 3.f}) w->add_float_data(v);
  w->add_dims(1);
  w->add_dims(3);
  proto.mutable_graph()->mutable_node(0)->set_input(1, "w");
  proto.mutable_graph()->mutable_input()->RemoveLast();
  Model original = import_bytes(testing::serialize(proto));
  Model again = round_trip(original);

  const Graph& g = *again.graph;
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.inputs[0]->name, "x");
  EXPECT_EQ(to_string(g.inputs[0]->type), to_string(original.graph->inputs[0]->type));  // the symbolic "batch"
  ASSERT_EQ(g.initializers.size(), 1u);
  EXPECT_EQ(g.initializers[0]->name, "w");
  EXPECT_EQ(g.initializers[0]->initializer.dims(), (Dims{1, 3}));
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0]->name, "add");
  EXPECT_EQ(g.nodes[1]->op_type, "Relu");
  EXPECT_EQ(again.opsets.at(""), 13);

  Tensor x = Tensor::from_vector<float>({-1, 1, -4, 2, 3, 0}, {2, 3});
  auto want = Session::create(std::move(original));
  auto got = Session::create(std::move(again));
  ASSERT_TRUE(want.ok() && got.ok());
  auto a = want.value()->run({{"x", x}}), b = got.value()->run({{"x", x}});
  ASSERT_TRUE(a.ok() && b.ok());
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(b.value()[0].at_double(i), a.value()[0].at_double(i)) << i;
  EXPECT_EQ(b.value()[0].at_double(0), 0.0);  // relu(-1 + 1)
  EXPECT_EQ(b.value()[0].at_double(2), 0.0);  // relu(-4 + 3)
  EXPECT_EQ(b.value()[0].at_double(3), 3.0);  // relu(2 + 1)
}

TEST(OnnxExporter, WritesEveryAttributeKind) {
  onnx::ModelProto proto = testing::add_relu_model(13);
  auto* op = proto.mutable_opset_import()->Add();
  op->set_domain("test.domain");
  op->set_version(1);
  auto* n = proto.mutable_graph()->mutable_node(1);
  n->set_domain("test.domain");  // an op no schema checks, to carry any attribute
  using AP = onnx::AttributeProto;
  auto attr = [&](const char* name, AP::AttributeType type) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(type);
    return a;
  };
  attr("f", AP::FLOAT)->set_f(0.25f);
  attr("i", AP::INT)->set_i(-7);
  attr("s", AP::STRING)->set_s("text");
  auto* fs = attr("fs", AP::FLOATS);
  fs->add_floats(1.5f), fs->add_floats(-2.f);
  auto* is = attr("is", AP::INTS);
  is->add_ints(3), is->add_ints(4);
  auto* ss = attr("ss", AP::STRINGS);
  ss->add_strings("a"), ss->add_strings("b");
  auto* t = attr("t", AP::TENSOR)->mutable_t();
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(2);
  t->add_int64_data(5), t->add_int64_data(-6);
  Model original = import_bytes(testing::serialize(proto), /*check=*/false);
  Model again = round_trip(original, /*check=*/false);

  const AttributeMap& got = again.graph->nodes[1]->attrs;
  EXPECT_EQ(again.graph->nodes[1]->domain, "test.domain");
  EXPECT_EQ(got.at("f").f, 0.25f);
  EXPECT_EQ(got.at("i").i, -7);
  EXPECT_EQ(got.at("s").s, "text");
  EXPECT_EQ(got.at("fs").floats, (std::vector<float>{1.5f, -2.f}));
  EXPECT_EQ(got.at("is").ints, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(got.at("ss").strings, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(got.at("t").t.dims(), (Dims{2}));
  EXPECT_EQ(got.at("t").t.data<int64_t>()[1], -6);
}

TEST(OnnxExporter, RefusesSubgraphs) {
  Model loop = import_bytes(testing::serialize(testing::tanh_loop_model()));
  auto bytes = export_onnx_bytes(loop);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), ErrorCode::GBM_UNSUPPORTED);
  EXPECT_NE(bytes.status().to_string().find("loop"), std::string::npos) << bytes.status().to_string();
}

}  // namespace
}  // namespace gearbox
