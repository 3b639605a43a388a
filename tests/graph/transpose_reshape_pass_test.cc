// Transpose and Reshape cancellation.
#include <gtest/gtest.h>

#include "graph/pass_test_util.h"
#include "graph/passes/passes.h"

namespace gearbox::testing {
namespace {

const std::map<std::string, Tensor> kFeeds{{"x", random_tensor({2, 3, 4}, 70)}};

Model transposes(std::vector<int64_t> p1, std::vector<int64_t> p2) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {2, 3, 4});
  Value* t = b.op("Transpose", {b.op("Transpose", {x}, {{"perm", attr_ints(p1)}})}, {{"perm", attr_ints(p2)}});
  b.output(b.op("Relu", {t}));
  return b.take();
}

TEST(TransposeReshapePass, InverseTransposesCancel) {
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs([] { return transposes({1, 2, 0}, {2, 0, 1}); }, kFeeds, only_passes({"transpose_reshape_cancel"}),
                      0, &rep, &g);
  EXPECT_EQ(rep.matches("transpose_reshape_cancel"), 1);
  ASSERT_EQ(g->nodes.size(), 1u);
  EXPECT_EQ(g->nodes[0]->op_type, "Relu");
}

TEST(TransposeReshapePass, TwoTransposesBecomeOne) {
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs([] { return transposes({1, 0, 2}, {0, 2, 1}); }, kFeeds, only_passes({"transpose_reshape_cancel"}),
                      0, &rep, &g);
  EXPECT_EQ(count_op(*g, "Transpose"), 1u);
  EXPECT_EQ(g->nodes[0]->attrs.at("perm").ints, (std::vector<int64_t>{1, 2, 0}));
}

TEST(TransposeReshapePass, ReshapeChainsCollapse) {
  auto build = [] {
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 3, 4});
    Value* r = b.op("Reshape", {x, b.constant("s1", ints({6, 4}))});
    b.output(b.op("Reshape", {r, b.constant("s2", ints({4, -1}))}));
    return b.take();
  };
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs(build, kFeeds, only_passes({"transpose_reshape_cancel"}), 0, &rep, &g);
  EXPECT_EQ(rep.matches("transpose_reshape_cancel"), 1);
  EXPECT_EQ(count_op(*g, "Reshape"), 1u);
}

TEST(TransposeReshapePass, NearMisses) {
  {  // the inner Transpose's output is read elsewhere too
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 3, 4});
    Value* t1 = b.op("Transpose", {x}, {{"perm", attr_ints({1, 2, 0})}});
    b.output(b.op("Transpose", {t1}, {{"perm", attr_ints({2, 0, 1})}}));
    b.output(t1);
    Model m = b.take();
    auto rep = optimize(m, only_passes({"transpose_reshape_cancel"}));
    ASSERT_TRUE(rep.ok());
    EXPECT_EQ(rep->matches("transpose_reshape_cancel"), 0);
    EXPECT_EQ(count_op(*m.graph, "Transpose"), 2u);
  }
  {  // the outer Reshape's 0 copies a dim of the inner result: not collapsible
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 3, 4});
    Value* r = b.op("Reshape", {x, b.constant("s1", ints({6, 4}))});
    b.output(b.op("Reshape", {r, b.constant("s2", ints({0, 2, 2}))}));
    Model m = b.take();
    auto rep = optimize(m, only_passes({"transpose_reshape_cancel"}));
    ASSERT_TRUE(rep.ok());
    EXPECT_EQ(count_op(*m.graph, "Reshape"), 2u);
  }
}

}  // namespace
}  // namespace gearbox::testing
