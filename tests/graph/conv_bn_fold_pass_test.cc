// Conv + BatchNormalization folding, and the decomposition of a BatchNormalization no Conv absorbs.
#include <gtest/gtest.h>

#include "graph/pass_test_util.h"
#include "graph/passes/passes.h"

namespace gearbox::testing {
namespace {

// Conv(3 -> 4 channels, 3x3, pad 1) then BatchNormalization; `with_bias` gives Conv a bias.
Model conv_bn(bool with_bias, bool conv_output_also_read) {
  GraphBuilder b(13);
  Value* x = b.input("x", DType::F32, {1, 3, 6, 6});
  std::vector<Value*> conv_in{x, b.constant("w", random_tensor({4, 3, 3, 3}, 10))};
  if (with_bias) conv_in.push_back(b.constant("b", random_tensor({4}, 11)));
  Value* c = b.op("Conv", conv_in, {{"pads", attr_ints({1, 1, 1, 1})}});
  Value* y =
      b.op("BatchNormalization",
           {c, b.constant("gamma", random_tensor({4}, 12, 0.5f, 2.f)), b.constant("beta", random_tensor({4}, 13)),
            b.constant("mean", random_tensor({4}, 14)), b.constant("var", random_tensor({4}, 15, 0.1f, 2.f))},
           {{"epsilon", attr_float(1e-3f)}});
  b.output(y);
  if (conv_output_also_read) b.output(b.op("Relu", {c}));
  return b.take();
}

TEST(ConvBnFoldPass, FoldsWithAndWithoutBias) {
  for (bool bias : {false, true}) {
    OptimizerReport rep;
    std::shared_ptr<Graph> g;
    expect_same_outputs([&] { return conv_bn(bias, false); }, {{"x", random_tensor({1, 3, 6, 6}, 16)}},
                        only_passes({"conv_bn_fold"}), 1e-5f, &rep, &g);
    EXPECT_EQ(rep.matches("conv_bn_fold"), 1) << "bias " << bias;
    ASSERT_EQ(g->nodes.size(), 1u);
    EXPECT_EQ(g->nodes[0]->op_type, "Conv");
    EXPECT_EQ(g->nodes[0]->inputs.size(), 3u);
  }
}

TEST(ConvBnFoldPass, ConvOutputReadElsewhereIsNotFolded) {
  Model m = conv_bn(true, true);
  auto rep = optimize(m, only_passes({"conv_bn_fold"}));
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->matches("conv_bn_fold"), 0);
  EXPECT_EQ(count_op(*m.graph, "BatchNormalization"), 1u);
}

TEST(ConvBnFoldPass, NonConstantScaleIsNotFolded) {
  GraphBuilder b(13);
  Value* x = b.input("x", DType::F32, {1, 3, 6, 6});
  Value* gamma = b.input("gamma", DType::F32, {4});
  Value* c = b.op("Conv", {x, b.constant("w", random_tensor({4, 3, 3, 3}, 10))});
  b.output(b.op("BatchNormalization",
                {c, gamma, b.constant("beta", random_tensor({4}, 13)), b.constant("mean", random_tensor({4}, 14)),
                 b.constant("var", random_tensor({4}, 15, 0.1f, 2.f))}));
  Model m = b.take();
  auto rep = optimize(m, only_passes({"conv_bn_fold"}));
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->matches("conv_bn_fold"), 0);
}

// Concat -> BatchNormalization -> Relu, DenseNet's pre-activation: no Conv to fold into.
Model concat_bn_relu(Dims a_dims, Dims b_dims, bool training_outputs) {
  GraphBuilder b(training_outputs ? 9 : 15);
  Value* a = b.input("a", DType::F32, std::vector<Dim>(a_dims.begin(), a_dims.end()));
  Value* c = b.input("c", DType::F32, std::vector<Dim>(b_dims.begin(), b_dims.end()));
  Value* cat = b.op("Concat", {a, c}, {{"axis", attr_int(1)}});
  const int64_t ch = a_dims[1] + b_dims[1];
  Dims cat_dims = a_dims;
  cat_dims[1] = ch;
  typed(cat, cat_dims);  // as the importer's shape inference types it: the pass needs the channel count
  std::vector<Value*> params{b.constant("gamma", random_tensor({ch}, 12, 0.5f, 2.f)),
                             b.constant("beta", random_tensor({ch}, 13)), b.constant("mean", random_tensor({ch}, 14)),
                             b.constant("var", random_tensor({ch}, 15, 0.1f, 2.f))};
  std::vector<Value*> ins{cat};
  ins.insert(ins.end(), params.begin(), params.end());
  Value* y = b.op("BatchNormalization", ins, {{"epsilon", attr_float(1e-3f)}});
  b.output(b.op("Relu", {y}));
  return b.take();
}

TEST(BatchNormDecomposePass, StandaloneBatchNormBecomesMulAndAddAtAnyRankAndBatch) {
  struct Case {
    Dims a, c;
  };
  for (const Case& k : {Case{{1, 3, 5, 6}, {1, 4, 5, 6}}, Case{{4, 3, 5, 6}, {4, 5, 5, 6}}, Case{{2, 3, 7}, {2, 2, 7}},
                        Case{{3, 6}, {3, 2}}}) {
    OptimizerReport rep;
    std::shared_ptr<Graph> g;
    Dims a = k.a, c = k.c;
    expect_same_outputs([&] { return concat_bn_relu(a, c, false); },
                        {{"a", random_tensor(a, 16)}, {"c", random_tensor(c, 17)}},
                        only_passes({"conv_bn_fold", "batchnorm_decompose"}), 1e-5f, &rep, &g);
    EXPECT_EQ(rep.matches("batchnorm_decompose"), 1) << to_string(a);
    EXPECT_EQ(count_op(*g, "BatchNormalization"), 0u);
    EXPECT_EQ(count_op(*g, "Mul"), 1u);
    EXPECT_EQ(count_op(*g, "Add"), 1u);
  }
}

TEST(BatchNormDecomposePass, ABatchNormAConvAbsorbsIsFoldedNotDecomposed) {
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs([&] { return conv_bn(true, false); }, {{"x", random_tensor({1, 3, 6, 6}, 16)}},
                      only_passes({"conv_bn_fold", "batchnorm_decompose"}), 1e-5f, &rep, &g);
  EXPECT_EQ(rep.matches("conv_bn_fold"), 1);
  EXPECT_EQ(rep.matches("batchnorm_decompose"), 0);
}

TEST(BatchNormDecomposePass, TrainingModeAndNonConstantParametersStay) {
  GraphBuilder b(15);
  Value* x = b.input("x", DType::F32, {2, 4, 3, 3});
  Value* gamma = b.input("gamma", DType::F32, {4});
  b.output(b.op("BatchNormalization",
                {x, gamma, b.constant("beta", random_tensor({4}, 13)), b.constant("mean", random_tensor({4}, 14)),
                 b.constant("var", random_tensor({4}, 15, 0.1f, 2.f))}));
  Model m = b.take();
  auto rep = optimize(m, only_passes({"batchnorm_decompose"}));
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->matches("batchnorm_decompose"), 0);

  GraphBuilder t(15);
  Value* tx = t.input("x", DType::F32, {2, 4, 3, 3});
  t.output(t.op("BatchNormalization",
                {tx, t.constant("gamma", random_tensor({4}, 12)), t.constant("beta", random_tensor({4}, 13)),
                 t.constant("mean", random_tensor({4}, 14)), t.constant("var", random_tensor({4}, 15, 0.1f, 2.f))},
                {{"training_mode", attr_int(1)}}));
  Model tm = t.take();
  rep = optimize(tm, only_passes({"batchnorm_decompose"}));
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->matches("batchnorm_decompose"), 0);
}

}  // namespace
}  // namespace gearbox::testing
