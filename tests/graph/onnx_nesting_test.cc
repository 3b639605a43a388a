// onnx_graph_nesting_depth against models whose nesting is known by construction (built with
// protobuf's own classes), and its behaviour on bytes that are not such a model.
#include "graph/onnx_nesting.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <random>
#include <string>

namespace gearbox {
namespace {

// An output of shape [2, 3] on `g`: the deepest messages a plain graph holds (ValueInfo, Type,
// Tensor type, Shape, Dimension), as exporters write them.
void add_shaped_output(onnx::GraphProto* g) {
  onnx::ValueInfoProto* out = g->add_output();
  out->set_name("y");
  onnx::TypeProto_Tensor* t = out->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_value(2);
  t->mutable_shape()->add_dim()->set_dim_value(3);
}

// A model whose main graph holds an If whose then-branch holds an If ... `depth` graph levels,
// each graph with a shaped output. With `in_function`, the chain of `depth` graphs sits in a
// model-local function's body instead (under a main graph of its own: depth + 0 still).
std::string nested_model(int depth, bool in_function = false) {
  onnx::ModelProto m;
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("main");
  add_shaped_output(g);
  onnx::NodeProto* holder = nullptr;
  if (in_function) {
    onnx::FunctionProto* f = m.add_functions();
    f->set_name("f");
    holder = f->add_node();
  } else {
    holder = g->add_node();
  }
  for (int level = in_function ? 1 : 2; level <= depth; ++level) {
    holder->set_op_type("If");
    onnx::AttributeProto* a = holder->add_attribute();
    a->set_name("then_branch");
    a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* body = a->mutable_g();
    body->set_name("then" + std::to_string(level));
    add_shaped_output(body);
    holder = body->add_node();
  }
  holder->set_op_type("Identity");
  // Fields the walk must skip: varints, strings and a float (fixed32) on the way.
  m.set_ir_version(8);
  m.set_producer_name("test");
  onnx::AttributeProto* alpha = holder->add_attribute();
  alpha->set_name("alpha");
  alpha->set_f(0.5f);
  return m.SerializeAsString();
}

TEST(OnnxNesting, DepthOfModelsBuiltToKnownDepths) {
  for (int depth : {1, 2, 3, 10, 32, 33, 200}) EXPECT_EQ(onnx_graph_nesting_depth(nested_model(depth)), depth);
  // A chain of 5 graphs in a function body: 5 levels (the function is not a graph itself).
  EXPECT_EQ(onnx_graph_nesting_depth(nested_model(5, /*in_function=*/true)), 5);
}

// Protobuf's own parser is the oracle for the limit: a model kMaxGraphNesting levels deep with
// shaped outputs parses, and at 34 levels even the graphs themselves are past 100 messages.
TEST(OnnxNesting, LimitIsWhereProtobufStops) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(nested_model(kMaxGraphNesting)));
  EXPECT_FALSE(m.ParseFromString(nested_model(34)));
}

TEST(OnnxNesting, MalformedBytesGiveNoDepthAndNeverCrash) {
  const std::string good = nested_model(40);
  for (size_t n : {size_t(1), good.size() / 3, good.size() / 2, good.size() - 1})
    EXPECT_FALSE(onnx_graph_nesting_depth(good.substr(0, n)).has_value()) << n;
  EXPECT_EQ(onnx_graph_nesting_depth(""), 0);  // an empty message: no graph
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {  // a flipped byte: any answer (ASan checks the reads), but
    std::string b = good;           // each graph level costs at least a tag and a length byte
    b[rng() % b.size()] = static_cast<char>(rng());
    auto d = onnx_graph_nesting_depth(b);
    if (d) EXPECT_LE(*d, static_cast<int>(b.size() / 2));
  }
}

}  // namespace
}  // namespace gearbox
