// Conv + BatchNormalization folding.
#include <gtest/gtest.h>

#include "graph/passes/passes.h"
#include "graph/pass_test_util.h"

namespace gearbox::testing {
namespace {

// Conv(3 -> 4 channels, 3x3, pad 1) then BatchNormalization; `with_bias` gives Conv a bias.
Model conv_bn(bool with_bias, bool conv_output_also_read) {
  GraphBuilder b(13);
  Value* x = b.input("x", DType::F32, {1, 3, 6, 6});
  std::vector<Value*> conv_in{x, b.constant("w", random_tensor({4, 3, 3, 3}, 10))};
  if (with_bias) conv_in.push_back(b.constant("b", random_tensor({4}, 11)));
  Value* c = b.op("Conv", conv_in, {{"pads", attr_ints({1, 1, 1, 1})}});
  Value* y = b.op("BatchNormalization",
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
  b.output(b.op("BatchNormalization", {c, gamma, b.constant("beta", random_tensor({4}, 13)),
                                       b.constant("mean", random_tensor({4}, 14)),
                                       b.constant("var", random_tensor({4}, 15, 0.1f, 2.f))}));
  Model m = b.take();
  auto rep = optimize(m, only_passes({"conv_bn_fold"}));
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->matches("conv_bn_fold"), 0);
}

}  // namespace
}  // namespace gearbox::testing
