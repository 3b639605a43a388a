// Constant folding and static shape folding.
#include <gtest/gtest.h>

#include "graph/passes/passes.h"
#include "graph/pass_test_util.h"

namespace gearbox::testing {
namespace {

TEST(ConstantFoldingPass, ConstantSubgraphBecomesAnInitializer) {
  auto build = [] {
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 3});
    Value* c1 = b.constant("c1", random_tensor({2, 3}, 3));
    Value* c2 = b.constant("c2", random_tensor({2, 3}, 4));
    Value* k = b.op("Mul", {b.op("Add", {c1, c2}), b.op("Constant", {}, {{"value_float", attr_float(2.f)}})});
    b.output(b.op("Add", {x, k}));  // reads x: stays
    return b.take();
  };
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs(build, {{"x", random_tensor({2, 3}, 5)}}, only_passes({"constant_folding"}), 0, &rep, &g);
  EXPECT_EQ(rep.matches("constant_folding"), 3);  // Add, Constant, Mul
  ASSERT_EQ(g->nodes.size(), 1u);
  EXPECT_EQ(g->nodes[0]->op_type, "Add");
  EXPECT_TRUE(g->nodes[0]->inputs[1]->is_initializer);
}

TEST(ConstantFoldingPass, SizeCapAndRandomOpsStay) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {1});
  // 1M float32 = 4 MB > the 1 MB cap set below.
  Value* big = b.op("ConstantOfShape", {b.constant("shape", ints({1024, 1024}))});
  Value* rnd = b.op("RandomUniform", {}, {{"shape", attr_ints({2})}});
  b.output(b.op("Add", {x, b.op("ReduceSum", {big})}));
  b.output(rnd);
  Model m = b.take();
  OptimizerOptions o = only_passes({"constant_folding"});
  o.constant_fold_max_bytes = 1 << 20;
  auto rep = optimize(m, o);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(count_op(*m.graph, "ConstantOfShape"), 1u);
  EXPECT_EQ(count_op(*m.graph, "RandomUniform"), 1u);
  EXPECT_EQ(rep->matches("constant_folding"), 0);
}

// The chain exporters emit for x.view(x.size(0), -1): Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
Model shape_chain(std::vector<Dim> dims) {
  GraphBuilder b(13);
  Value* x = b.input("x", DType::F32, dims);
  Value* shape = b.op("Shape", {x});
  Value* d0 = b.op("Gather", {shape, b.constant("zero", Tensor::scalar<int64_t>(0))}, {{"axis", attr_int(0)}});
  Value* u = b.op("Unsqueeze", {d0, b.constant("axes", ints({0}))});
  Value* cat = b.op("Concat", {u, b.constant("minus1", ints({-1}))}, {{"axis", attr_int(0)}});
  b.output(b.op("Reshape", {x, cat}));
  return b.take();
}

TEST(ShapeFoldingPass, StaticShapeChainFolds) {
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs([] { return shape_chain({2, 3, 4}); }, {{"x", random_tensor({2, 3, 4}, 6)}},
                      only_passes({"shape_folding", "constant_folding"}), 0, &rep, &g);
  EXPECT_EQ(rep.matches("shape_folding"), 1);
  EXPECT_EQ(rep.matches("constant_folding"), 3);
  ASSERT_EQ(g->nodes.size(), 1u);
  EXPECT_EQ(g->nodes[0]->op_type, "Reshape");
  auto target = g->nodes[0]->inputs[1];
  ASSERT_TRUE(target->is_initializer);
  EXPECT_EQ(target->initializer.data<int64_t>()[0], 2);
  EXPECT_EQ(target->initializer.data<int64_t>()[1], -1);
}

TEST(ShapeFoldingPass, SymbolicDimsStay) {
  Model m = shape_chain({Dim::symbolic("batch"), 3, 4});
  auto rep = optimize(m, only_passes({"shape_folding", "constant_folding"}));
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->matches("shape_folding"), 0);
  EXPECT_EQ(count_op(*m.graph, "Shape"), 1u);
  EXPECT_EQ(m.graph->nodes.size(), 5u);
}

}  // namespace
}  // namespace gearbox::testing
