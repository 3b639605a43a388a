// Dead-node elimination, no-op removal (Identity, inference Dropout, no-op Cast, Pad by zeros) and CSE.
#include <gtest/gtest.h>

#include "graph/pass_test_util.h"
#include "graph/passes/passes.h"

namespace gearbox::testing {
namespace {

const std::map<std::string, Tensor> kFeeds{{"x", random_tensor({2, 5}, 1)}};

TEST(RemoveNoopPass, IdentityDropoutAndSameTypeCastGo) {
  auto build = [] {
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 5});
    Value* y = b.op("Identity", {x});
    y = b.op("Relu", {y});
    y->type.dtype = DType::F32;  // as shape inference records it: the Cast below is a no-op
    y = b.node("Dropout", {y}, 1)->outputs[0];
    AttributeMap cast{{"to", attr_int(1)}};
    y = b.op("Cast", {y}, cast);
    y = b.op("Identity", {y});  // a graph output: Cast's producer (Relu) writes it instead
    b.output(y);
    return b.take();
  };
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs(build, kFeeds, only_passes({"remove_noop"}), 0, &rep, &g);
  EXPECT_EQ(rep.matches("remove_noop"), 4);
  ASSERT_EQ(g->nodes.size(), 1u);
  EXPECT_EQ(g->nodes[0]->op_type, "Relu");
  EXPECT_EQ(g->nodes[0]->outputs[0], g->outputs[0]);
}

// torch's AvgPool2d export: Pad(x, Constant(zeros)) before the pool; pads as an initializer too.
// A Pad by one element stays.
TEST(RemoveNoopPass, PadByZerosGoes) {
  auto build = [] {
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 5});
    Node* zeros = b.node("Constant", {}, 1, {{"value", {.type = AttrType::Tensor, .t = ints({0, 0, 0, 0})}}});
    Value* y = b.op("Pad", {x, zeros->outputs[0]});
    y = b.op("Pad", {b.op("Relu", {y}), b.constant("no_pads", ints({0, 0, 0, 0}))});
    b.output(b.op("Pad", {b.op("Relu", {y}), b.constant("one", ints({0, 1, 0, 0}))}));
    return b.take();
  };
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs(build, kFeeds, only_passes({"remove_noop", "dead_node_elimination"}), 0, &rep, &g);
  EXPECT_EQ(rep.matches("remove_noop"), 2);
  EXPECT_EQ(count_op(*g, "Pad"), 1u);
  EXPECT_EQ(count_op(*g, "Constant"), 0u);
}

TEST(RemoveNoopPass, NearMissesStay) {
  auto build = [] {
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 5});
    AttributeMap cast{{"to", attr_int(11)}};  // float32 -> float64 changes the type
    Value* y = b.op("Cast", {x}, cast);
    Node* d = b.node("Dropout", {x}, 2);  // its mask is a graph output
    b.output(y);
    b.output(d->outputs[1]);
    b.output(b.op("Identity", {x}));  // input straight to output: nothing to bypass
    return b.take();
  };
  Model m = build();
  auto rep = optimize(m, only_passes({"remove_noop"}));
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  EXPECT_EQ(rep->matches("remove_noop"), 0);
  EXPECT_EQ(m.graph->nodes.size(), 3u);
  EXPECT_EQ(count_op(*m.graph, "Cast"), 1u);
  EXPECT_EQ(count_op(*m.graph, "Dropout"), 1u);
}

TEST(DeadNodePass, UnreadNodesGoOutputsStay) {
  auto build = [] {
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 5});
    Value* dead1 = b.op("Sigmoid", {x});
    b.op("Neg", {dead1});  // dead chain of two
    b.output(b.op("Relu", {x}));
    return b.take();
  };
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs(build, kFeeds, only_passes({"dead_node_elimination"}), 0, &rep, &g);
  EXPECT_EQ(rep.matches("dead_node_elimination"), 2);
  ASSERT_EQ(g->nodes.size(), 1u);
  EXPECT_EQ(g->nodes[0]->op_type, "Relu");
}

TEST(DeadNodePass, UnusedInitializersAreDropped) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {2, 5});
  Value* w = b.constant("w", random_tensor({2, 5}, 2));
  b.op("Add", {x, w});
  b.output(b.op("Relu", {x}));
  Model m = b.take();
  auto rep = optimize(m, only_passes({"dead_node_elimination"}));
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(m.graph->initializers.empty());
}

TEST(CsePass, IdenticalNodesMerge) {
  auto build = [] {
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 5});
    AttributeMap alpha{{"alpha", attr_float(0.2f)}};
    Value* a = b.op("LeakyRelu", {x}, alpha);
    Value* c = b.op("LeakyRelu", {x}, alpha);
    Value* ea = b.op("Exp", {a});
    Value* ec = b.op("Exp", {c});  // merges once c is merged into a
    b.output(b.op("Add", {ea, ec}));
    return b.take();
  };
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs(build, kFeeds, only_passes({"cse", "dead_node_elimination"}), 0, &rep, &g);
  EXPECT_EQ(rep.matches("cse"), 2);
  EXPECT_EQ(count_op(*g, "LeakyRelu"), 1u);
  EXPECT_EQ(count_op(*g, "Exp"), 1u);
}

TEST(CsePass, DifferentAttributesOrInputsDoNotMerge) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {2, 5});
  Value* a = b.op("LeakyRelu", {x}, {{"alpha", attr_float(0.2f)}});
  Value* c = b.op("LeakyRelu", {x}, {{"alpha", attr_float(0.3f)}});
  Value* d = b.op("Sub", {a, c});
  Value* e = b.op("Sub", {c, a});  // same op, inputs swapped
  b.output(b.op("Add", {d, e}));
  Model m = b.take();
  auto rep = optimize(m, only_passes({"cse"}));
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->matches("cse"), 0);
  EXPECT_EQ(m.graph->nodes.size(), 5u);
}

}  // namespace
}  // namespace gearbox::testing
