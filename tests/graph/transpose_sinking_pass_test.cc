// Transpose sinking: a Transpose moves down through element-wise ops only when it then merges
// with the next Transpose; outputs equal the unoptimized graph's on the reference engine.
#include <gtest/gtest.h>

#include "graph/pass_test_util.h"
#include "graph/passes/passes.h"

namespace gearbox::testing {
namespace {

const OptimizerOptions kSinkOnly = only_passes({"transpose_sinking"});

AttributeMap perm(std::vector<int64_t> p) { return {{"perm", attr_ints(std::move(p))}}; }

// x[2,3,4] -> Transpose(p) -> Relu -> Mul(c[4,2]) -> Add(0.5) -> Transpose(q) -> y
Model chain(std::vector<int64_t> p, std::vector<int64_t> q) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {2, 3, 4});
  Value* t = b.op("Transpose", {x}, perm(p));
  Value* r = b.op("Relu", {t});
  Value* m = b.op("Mul", {r, b.constant("c", random_tensor({4, 2}, 7))});
  Value* a = b.op("Add", {b.constant("half", scalar_f(0.5f)), m});
  b.output(b.op("Transpose", {a}, perm(q)));
  return b.take();
}

const std::map<std::string, Tensor> kFeeds{{"x", random_tensor({2, 3, 4}, 71)}};

TEST(TransposeSinkingPass, InverseTransposesAroundAChainVanish) {
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  // {1,2,0} then {2,0,1} compose to the identity.
  expect_same_outputs([] { return chain({1, 2, 0}, {2, 0, 1}); }, kFeeds, kSinkOnly, 0, &rep, &g);
  EXPECT_EQ(rep.matches("transpose_sinking"), 1);
  EXPECT_EQ(count_op(*g, "Transpose"), 0u);
  EXPECT_EQ(count_op(*g, "Relu"), 1u);
  EXPECT_EQ(count_op(*g, "Mul"), 1u);
  // The graph output keeps its name; the last element-wise op produces it now.
  ASSERT_EQ(g->outputs.size(), 1u);
  ASSERT_NE(g->outputs[0]->producer, nullptr);
  EXPECT_EQ(g->outputs[0]->producer->op_type, "Add");
}

TEST(TransposeSinkingPass, ChainEndsInOneComposedTranspose) {
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs([] { return chain({1, 2, 0}, {0, 2, 1}); }, kFeeds, kSinkOnly, 0, &rep, &g);
  EXPECT_EQ(rep.matches("transpose_sinking"), 1);
  ASSERT_EQ(count_op(*g, "Transpose"), 1u);
  for (const auto& n : g->nodes)
    if (n->op_type == "Transpose") {
      EXPECT_EQ(n->attrs.at("perm").ints, (std::vector<int64_t>{1, 0, 2}));
      EXPECT_EQ(n, g->nodes.back());  // after the element-wise ops now
    }
}

TEST(TransposeSinkingPass, BinaryOfTwoEqualTransposesTakesOne) {
  auto build = [] {
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 3, 4});
    Value* y = b.input("y", DType::F32, {2, 3, 4});
    Value* s = b.op("Sub", {b.op("Transpose", {x}, perm({2, 0, 1})), b.op("Transpose", {y}, perm({2, 0, 1}))});
    b.output(b.op("Tanh", {s}));
    return b.take();
  };
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs(build, {{"x", random_tensor({2, 3, 4}, 72)}, {"y", random_tensor({2, 3, 4}, 73)}}, kSinkOnly, 0,
                      &rep, &g);
  EXPECT_EQ(rep.matches("transpose_sinking"), 1);
  EXPECT_EQ(count_op(*g, "Transpose"), 1u);
}

// Two layout regions joined by a residual Add, as layout_nhwc leaves them: the pair rule
// and then the chain rule remove all four boundary Transposes.
TEST(TransposeSinkingPass, ResidualJoinBetweenRegions) {
  auto build = [] {
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {1, 4, 3, 5});
    Value* y = b.input("y", DType::F32, {1, 4, 3, 5});
    const std::vector<int64_t> to_nchw{0, 3, 1, 2}, to_nhwc{0, 2, 3, 1};
    Value* a = b.op("Add", {b.op("Transpose", {x}, perm(to_nchw)), b.op("Transpose", {y}, perm(to_nchw))});
    Value* r = b.op("Relu", {a});
    b.output(b.op("Sigmoid", {b.op("Transpose", {r}, perm(to_nhwc))}));
    return b.take();
  };
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs(build, {{"x", random_tensor({1, 4, 3, 5}, 74)}, {"y", random_tensor({1, 4, 3, 5}, 75)}},
                      kSinkOnly, 0, &rep, &g);
  EXPECT_EQ(rep.matches("transpose_sinking"), 2);
  EXPECT_EQ(count_op(*g, "Transpose"), 0u);
}

// SqueezeNet's fire module as layout_nhwc leaves it: two channels-last branches leave their
// region for a Concat over channels, whose result enters the next region. The Concat runs
// channels-last (axis 1 -> 3) and no Transpose is left; a negative axis maps the same way.
TEST(TransposeSinkingPass, ConcatOfBranchesLeavingARegionRunsChannelsLast) {
  for (int64_t axis : {1, -3}) {
    auto build = [axis] {
      GraphBuilder b;
      Value* x = b.input("x", DType::F32, {1, 3, 5, 4});
      Value* y = b.input("y", DType::F32, {1, 3, 5, 2});
      Value* w = b.input("w", DType::F32, {1, 3, 5, 7});
      const std::vector<int64_t> to_nchw{0, 3, 1, 2}, to_nhwc{0, 2, 3, 1};
      Value* c = b.op("Concat",
                      {b.op("Transpose", {x}, perm(to_nchw)), b.op("Transpose", {y}, perm(to_nchw)),
                       b.op("Transpose", {w}, perm(to_nchw))},
                      {{"axis", attr_int(axis)}});
      b.output(b.op("Relu", {b.op("Transpose", {c}, perm(to_nhwc))}));
      return b.take();
    };
    OptimizerReport rep;
    std::shared_ptr<Graph> g;
    expect_same_outputs(build,
                        {{"x", random_tensor({1, 3, 5, 4}, 76)},
                         {"y", random_tensor({1, 3, 5, 2}, 77)},
                         {"w", random_tensor({1, 3, 5, 7}, 78)}},
                        kSinkOnly, 0, &rep, &g);
    EXPECT_EQ(rep.matches("transpose_sinking"), 1) << axis;
    EXPECT_EQ(count_op(*g, "Transpose"), 0u) << axis;
    for (const auto& n : g->nodes)
      if (n->op_type == "Concat") EXPECT_EQ(n->attrs.at("axis").i, 3) << axis;
  }
}

// DenseNet's dense block: every feature (leaving a channels-last region through a Transpose)
// is concatenated by each later layer, and each Concat goes through the BatchNormalization's
// Mul/Add and a Relu into the next region. Each Concat runs channels-last, its Transpose meets
// the next region's, and the shared Transposes lose their last readers: none is left.
TEST(TransposeSinkingPass, ConcatsSharingTransposedFeaturesRunChannelsLast) {
  auto build = [] {
    GraphBuilder b;
    const std::vector<int64_t> to_nchw{0, 3, 1, 2}, to_nhwc{0, 2, 3, 1};
    std::vector<Value*> features;
    for (int i = 0; i < 3; ++i)
      features.push_back(
          b.op("Transpose", {b.input("f" + std::to_string(i), DType::F32, {1, 5, 4, 2 + i})}, perm(to_nchw)));
    int64_t channels = 2;
    for (size_t k = 2; k <= features.size(); ++k) {
      channels += static_cast<int64_t>(k) + 1;
      Value* cat = b.op("Concat", std::vector<Value*>(features.begin(), features.begin() + static_cast<long>(k)),
                        {{"axis", attr_int(1)}});
      Value* scaled = b.op("Mul", {cat, b.constant("s" + std::to_string(k), random_tensor({channels, 1, 1}, 80))});
      Value* shifted = b.op("Add", {scaled, b.constant("t" + std::to_string(k), random_tensor({channels, 1, 1}, 81))});
      b.output(b.op("Transpose", {b.op("Relu", {shifted})}, perm(to_nhwc)));
    }
    return b.take();
  };
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs(build,
                      {{"f0", random_tensor({1, 5, 4, 2}, 82)},
                       {"f1", random_tensor({1, 5, 4, 3}, 83)},
                       {"f2", random_tensor({1, 5, 4, 4}, 84)}},
                      only_passes({"transpose_sinking", "dead_node_elimination"}), 1e-6f, &rep, &g);
  EXPECT_EQ(count_op(*g, "Transpose"), 0u);
  EXPECT_EQ(count_op(*g, "Concat"), 2u);
}

// A Concat whose inputs are not all transposed alike, or whose Transpose has another reader
// and no Transpose after it to meet, keeps its Transposes; one read by a graph output keeps it too.
TEST(TransposeSinkingPass, ConcatNearMissesAreLeftAlone) {
  const std::vector<int64_t> to_nchw{0, 3, 1, 2};
  auto run = [](Model m) {
    auto rep = optimize(m, kSinkOnly);
    EXPECT_TRUE(rep.ok()) << rep.status().to_string();
    return std::make_pair(rep.ok() ? rep->matches("transpose_sinking") : -1, count_op(*m.graph, "Transpose"));
  };
  {  // one input is not a Transpose
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {1, 3, 5, 4});
    Value* y = b.input("y", DType::F32, {1, 4, 3, 5});
    b.output(b.op("Concat", {b.op("Transpose", {x}, perm(to_nchw)), y}, {{"axis", attr_int(1)}}));
    EXPECT_EQ(run(b.take()), std::make_pair(0, size_t{1}));
  }
  {  // different perms
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {1, 3, 5, 4});
    Value* y = b.input("y", DType::F32, {1, 5, 3, 4});
    b.output(b.op("Concat", {b.op("Transpose", {x}, perm(to_nchw)), b.op("Transpose", {y}, perm({0, 3, 2, 1}))},
                  {{"axis", attr_int(1)}}));
    EXPECT_EQ(run(b.take()), std::make_pair(0, size_t{2}));
  }
  {  // a Transpose read twice
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {1, 3, 5, 4});
    Value* t = b.op("Transpose", {x}, perm(to_nchw));
    b.output(b.op("Concat", {t, t}, {{"axis", attr_int(1)}}));
    EXPECT_EQ(run(b.take()), std::make_pair(0, size_t{1}));
  }
}

TEST(TransposeSinkingPass, CastInTheChain) {
  auto build = [] {
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 3, 4});
    Value* c = b.op("Cast", {b.op("Transpose", {x}, perm({1, 0, 2}))}, {{"to", attr_int(11)}});  // double
    b.output(b.op("Transpose", {c}, perm({1, 0, 2})));
    return b.take();
  };
  std::shared_ptr<Graph> g;
  expect_same_outputs(build, kFeeds, kSinkOnly, 0, nullptr, &g);
  EXPECT_EQ(count_op(*g, "Transpose"), 0u);
}

TEST(TransposeSinkingPass, NearMissesAreLeftAlone) {
  auto expect_unchanged = [](Model m, size_t transposes) {
    auto rep = optimize(m, kSinkOnly);
    ASSERT_TRUE(rep.ok()) << rep.status().to_string();
    EXPECT_EQ(rep->matches("transpose_sinking"), 0);
    EXPECT_EQ(count_op(*m.graph, "Transpose"), transposes);
  };
  {  // the chain ends at a graph output, not at a Transpose
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 3, 4});
    b.output(b.op("Relu", {b.op("Transpose", {x}, perm({1, 2, 0}))}));
    expect_unchanged(b.take(), 1);
  }
  {  // a value in the chain is read by a second node
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 3, 4});
    Value* r = b.op("Relu", {b.op("Transpose", {x}, perm({1, 2, 0}))});
    b.output(b.op("Transpose", {r}, perm({2, 0, 1})));
    b.output(b.op("Exp", {r}));
    expect_unchanged(b.take(), 2);
  }
  {  // the other operand is not a constant
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 3, 4});
    Value* z = b.input("z", DType::F32, {3, 4, 2});
    Value* a = b.op("Add", {b.op("Transpose", {x}, perm({1, 2, 0})), z});
    b.output(b.op("Transpose", {a}, perm({2, 0, 1})));
    expect_unchanged(b.take(), 2);
  }
  {  // a constant of higher rank would broadcast the chain value up
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 3, 4});
    Value* a = b.op("Add", {b.op("Transpose", {x}, perm({1, 2, 0})), b.constant("c4", random_tensor({2, 3, 4, 2}, 9))});
    b.output(b.op("Transpose", {a}, perm({0, 1, 3, 2})));
    expect_unchanged(b.take(), 2);
  }
  {  // a binary op over Transposes with different perms
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 2, 2});
    Value* y = b.input("y", DType::F32, {2, 2, 2});
    b.output(b.op("Add", {b.op("Transpose", {x}, perm({1, 0, 2})), b.op("Transpose", {y}, perm({0, 2, 1}))}));
    expect_unchanged(b.take(), 2);
  }
  {  // a non-element-wise op (Softmax over an axis) stops the chain
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {2, 3, 4});
    Value* s = b.op("Softmax", {b.op("Transpose", {x}, perm({1, 2, 0}))});
    b.output(b.op("Transpose", {s}, perm({2, 0, 1})));
    expect_unchanged(b.take(), 2);
  }
}

}  // namespace
}  // namespace gearbox::testing
