// Every gradient builder against finite differences in float64 (gradcheck.h), including
// broadcasting (the gradient's reduction back to the input's shape).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "frontend/autodiff/gradient_registry.h"
#include "frontend/ops/internal.h"
#include "gradcheck.h"

namespace gbx::nn::testing {
namespace {

Tensor leaf(std::vector<int64_t> shape, double low = -1.0, double high = 1.0) {
  return random_f64(std::move(shape), low, high).set_requires_grad();
}

class Gradients : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(1234); }
};

TEST_F(Gradients, AddSubMulDivWithBroadcasting) {
  gradcheck("add", [](auto& x) { return add(x[0], x[1]); }, {leaf({2, 3, 4}), leaf({3, 1})});
  gradcheck("sub", [](auto& x) { return sub(x[0], x[1]); }, {leaf({4}), leaf({2, 3, 4})});
  gradcheck("mul", [](auto& x) { return mul(x[0], x[1]); }, {leaf({2, 1, 4}), leaf({3, 4})});
  gradcheck("div", [](auto& x) { return div(x[0], x[1]); }, {leaf({2, 3}), leaf({1, 3}, 0.5, 2.0)});
}

TEST_F(Gradients, UnaryMath) {
  gradcheck("neg", [](auto& x) { return neg(x[0]); }, {leaf({3, 2})});
  gradcheck("exp", [](auto& x) { return exp(x[0]); }, {leaf({3, 2})});
  gradcheck("erf", [](auto& x) { return erf(x[0]); }, {leaf({3, 4}, -2.5, 2.5)});
  gradcheck("log", [](auto& x) { return log(x[0]); }, {leaf({3, 2}, 0.2, 3.0)});
  gradcheck("pow", [](auto& x) { return pow(x[0], 3.0); }, {leaf({5})});
  gradcheck("pow_frac", [](auto& x) { return pow(x[0], 0.5); }, {leaf({5}, 0.3, 2.0)});
}

TEST_F(Gradients, Activations) {
  // Relu: values kept away from 0, where it has no derivative.
  Tensor r = Tensor::from_vector(std::vector<double>{-1.5, -0.3, 0.2, 0.9, 2.0, -0.7}, {2, 3}).set_requires_grad();
  gradcheck("relu", [](auto& x) { return relu(x[0]); }, {r});
  gradcheck("sigmoid", [](auto& x) { return sigmoid(x[0]); }, {leaf({3, 4}, -3, 3)});
  gradcheck("tanh", [](auto& x) { return tanh(x[0]); }, {leaf({3, 4}, -2, 2)});
  gradcheck("gelu", [](auto& x) { return gelu(x[0]); }, {leaf({3, 4}, -3, 3)});
  gradcheck("softmax", [](auto& x) { return softmax(x[0], 1); }, {leaf({3, 5}, -2, 2)});
  gradcheck("softmax_axis0", [](auto& x) { return softmax(x[0], 0); }, {leaf({3, 5}, -2, 2)});
  gradcheck("log_softmax", [](auto& x) { return log_softmax(x[0], -1); }, {leaf({2, 3, 4}, -2, 2)});
}

TEST_F(Gradients, MatMulAndLinear) {
  gradcheck("matmul", [](auto& x) { return matmul(x[0], x[1]); }, {leaf({3, 4}), leaf({4, 2})});
  gradcheck("matmul_batched_broadcast", [](auto& x) { return matmul(x[0], x[1]); }, {leaf({2, 3, 4}), leaf({4, 5})});
  gradcheck("linear", [](auto& x) { return linear(x[0], x[1], x[2]); }, {leaf({5, 4}), leaf({3, 4}), leaf({3})});
  gradcheck("linear_nobias", [](auto& x) { return linear(x[0], x[1]); }, {leaf({5, 4}), leaf({3, 4})});
}

// The ops only imported ONNX models record (gearbox train, autodiff/gradients/imported_ops.cc).
TEST_F(Gradients, ImportedModelOps) {
  gradcheck("flatten",
            [](auto& x) {
              return apply1({"Flatten"}, {x[0]}, {{"axis", gearbox::attr_int(2)}});
            },
            {leaf({2, 3, 2, 2})});
  gradcheck("squeeze", [](auto& x) { return apply1({"Squeeze"}, {x[0], int64s({1})}); }, {leaf({3, 1, 2})});
  gradcheck("unsqueeze", [](auto& x) { return apply1({"Unsqueeze"}, {x[0], int64s({0, 3})}); }, {leaf({3, 2})});
  gradcheck("identity", [](auto& x) { return mul(apply1({"Identity"}, {x[0]}), x[0]); }, {leaf({4})});
  gradcheck("dropout_inference", [](auto& x) { return mul(apply1({"Dropout"}, {x[0]}), x[0]); }, {leaf({2, 3})});
  // Pads of every size on two axes, then a product so each kept element's gradient differs.
  gradcheck("pad",
            [](auto& x) {
              return mul(apply1({"Pad"}, {x[0], int64s({0, 1, 2, 0, 3, 1})}), x[1]);
            },
            {leaf({2, 3, 2}), leaf({2, 7, 5})});
  // Where with all three operands broadcast: each branch's gradient summed back to its shape.
  const Tensor cond = apply1({"Less"}, {random_f64({2, 1, 3}), Tensor::scalar(0.0, DType::Float64)});
  gradcheck("where",
            [&cond](auto& x) {
              return mul(apply1({"Where"}, {cond, x[0], x[1]}), x[2]);
            },
            {leaf({2, 4, 3}), leaf({4, 1}), leaf({2, 4, 3})});
}

TEST_F(Gradients, Reductions) {
  gradcheck("sum_all", [](auto& x) { return sum(x[0]); }, {leaf({2, 3, 4})});
  gradcheck("sum_axes", [](auto& x) { return sum(x[0], {0, 2}); }, {leaf({2, 3, 4})});
  gradcheck("sum_keep", [](auto& x) { return sum(x[0], {-1}, true); }, {leaf({2, 3, 4})});
  gradcheck("mean_all", [](auto& x) { return mean(x[0]); }, {leaf({2, 3, 4})});
  gradcheck("mean_axis", [](auto& x) { return mean(x[0], {1}); }, {leaf({2, 3, 4})});
  gradcheck("mean_keep", [](auto& x) { return mean(x[0], {0, 1}, true); }, {leaf({2, 3, 4})});
}

TEST_F(Gradients, ShapeOps) {
  gradcheck("reshape", [](auto& x) { return reshape(x[0], {4, -1}); }, {leaf({2, 3, 2})});
  gradcheck("transpose", [](auto& x) { return transpose(x[0], {2, 0, 1}); }, {leaf({2, 3, 4})});
  gradcheck("transpose_rev", [](auto& x) { return transpose(x[0], {}); }, {leaf({2, 3})});
  gradcheck("concat",
            [](auto& x) {
              return concat({x[0], x[1], x[2]}, 1);
            },
            {leaf({2, 1}), leaf({2, 3}), leaf({2, 2})});
  gradcheck("slice", [](auto& x) { return slice(x[0], 1, 1, 3); }, {leaf({2, 4, 3})});
  gradcheck("slice_negative", [](auto& x) { return slice(x[0], -1, -2, 5); }, {leaf({3, 4})});
  // Every piece weighted differently, so a piece's gradient landing in another's place fails.
  gradcheck("split",
            [](auto& x) {
              std::vector<Tensor> p = split(x[0], 1, 3);
              return concat({p[2], mul(p[0], p[1]), p[1]}, 1);
            },
            {leaf({2, 6, 3})});
  // A piece nobody uses gets a zero gradient.
  gradcheck("split_unused_piece", [](auto& x) { return split(x[0], -1, 2)[1]; }, {leaf({3, 4})});
}

TEST_F(Gradients, FlattenAndDropout) {
  gradcheck("flatten", [](auto& x) { return flatten(x[0], 1); }, {leaf({2, 3, 2})});
  // The same seed before every call gives the same mask, so f is a fixed function of x.
  gradcheck("dropout",
            [](auto& x) {
              manual_seed(7);
              return dropout(x[0], 0.4, true);
            },
            {leaf({4, 5})});
}

TEST_F(Gradients, DropoutMaskAndScale) {
  Tensor x = Tensor::full({1000}, 1.0, DType::Float64);
  std::vector<double> y = dropout(x, 0.25, true).to_double_vector();
  int kept = 0;
  for (double v : y) {
    ASSERT_TRUE(v == 0.0 || std::abs(v - 1.0 / 0.75) < 1e-15) << v;
    kept += v != 0.0;
  }
  EXPECT_NEAR(kept, 750, 60);  // binomial(1000, 0.75): sd ~ 14
  EXPECT_EQ(dropout(x, 0.25, false).to_double_vector(), x.to_double_vector());
  EXPECT_EQ(flatten(Tensor::zeros({2, 3, 4}), 1).shape(), (std::vector<int64_t>{2, 12}));
  Dropout drop(0.25);
  drop.eval();
  EXPECT_EQ(drop(x).to_double_vector(), x.to_double_vector());
  EXPECT_EQ(Flatten()(Tensor::zeros({2, 3, 4})).shape(), (std::vector<int64_t>{2, 12}));
}

TEST_F(Gradients, Losses) {
  Tensor targets = Tensor::from_vector(std::vector<int64_t>{2, 0, 1, 2});
  gradcheck("cross_entropy", [&](auto& x) { return cross_entropy(x[0], targets); }, {leaf({4, 3}, -2, 2)});
  // An ignored row (id -100) and label smoothing: GatherElements's gradient and the smoothing sum.
  Tensor with_ignored = Tensor::from_vector(std::vector<int64_t>{2, -100, 1, 2});
  gradcheck("cross_entropy_smoothed_ignore",
            [&](auto& x) {
              return cross_entropy(x[0], with_ignored,
                                   CrossEntropyOptions{.ignore_index = -100, .label_smoothing = 0.1});
            },
            {leaf({4, 3}, -2, 2)});
  gradcheck("mse", [](auto& x) { return mse_loss(x[0], x[1]); }, {leaf({3, 2}), leaf({3, 2})});
}

TEST_F(Gradients, Composite) {
  // A tensor used twice (its gradients summed) through a small MLP.
  gradcheck("mlp",
            [](auto& x) {
              Tensor h = tanh(linear(x[0], x[1], x[2]));
              return mul(sum(mul(h, h), {1}), sum(h, {1}));
            },
            {leaf({4, 3}), leaf({5, 3}), leaf({5})});
}

TEST_F(Gradients, Conv2d) {
  gradcheck("conv2d", [](auto& x) { return conv2d(x[0], x[1], x[2]); },
            {leaf({2, 3, 5, 4}), leaf({4, 3, 3, 2}), leaf({4})});
  // Stride 2 on odd sizes (rows the forward never reads), padding, dilation.
  gradcheck("conv2d_strided", [](auto& x) { return conv2d(x[0], x[1], x[2], {2}, {1}, {2}); },
            {leaf({2, 2, 7, 8}), leaf({3, 2, 3, 2}), leaf({3})});
  gradcheck("conv2d_groups",
            [](auto& x) {
              return conv2d(x[0], x[1], Tensor(), {2, 1}, {1, 0}, {1}, 2);
            },
            {leaf({1, 4, 5, 5}), leaf({6, 2, 3, 3})});
  gradcheck("conv2d_depthwise", [](auto& x) { return conv2d(x[0], x[1], x[2], {1}, {1}, {1}, 3); },
            {leaf({2, 3, 4, 4}), leaf({3, 1, 3, 3}), leaf({3})});
  gradcheck("conv1d_strided_groups", [](auto& x) { return conv1d(x[0], x[1], x[2], 2, 1, 2, 2); },
            {leaf({2, 4, 9}), leaf({6, 2, 3}), leaf({6})});
  gradcheck("conv_transpose2d_output_padding",
            [](auto& x) { return conv_transpose2d(x[0], x[1], x[2], {2}, {1}, {1}); },
            {leaf({1, 3, 3, 4}), leaf({3, 2, 3, 3}), leaf({2})});
  gradcheck("conv_transpose2d_groups_dilation",
            [](auto& x) {
              return conv_transpose2d(x[0], x[1], Tensor(), {2, 1}, {0, 1}, {0}, 2, {1, 2});
            },
            {leaf({1, 4, 3, 4}), leaf({4, 3, 3, 2})});
}

TEST_F(Gradients, Pools) {
  gradcheck("max_pool2d", [](auto& x) { return max_pool2d(x[0], {2}); }, {leaf({2, 3, 4, 6})});
  gradcheck("max_pool2d_overlap_pad", [](auto& x) { return max_pool2d(x[0], {3}, {2}, {1}); }, {leaf({2, 2, 7, 6})});
  gradcheck("avg_pool2d", [](auto& x) { return avg_pool2d(x[0], {2}); }, {leaf({2, 3, 4, 6})});
  gradcheck("avg_pool2d_pad", [](auto& x) { return avg_pool2d(x[0], {3}, {2}, {1}); }, {leaf({2, 2, 7, 6})});
  gradcheck("avg_pool2d_pad_exclude",
            [](auto& x) {
              return avg_pool2d(x[0], {3, 2}, {2, 1}, {1}, false);
            },
            {leaf({1, 2, 7, 5})});
  gradcheck("adaptive_global", [](auto& x) { return adaptive_avg_pool2d(x[0], {1}); }, {leaf({2, 3, 5, 4})});
  gradcheck("adaptive_uneven", [](auto& x) { return adaptive_avg_pool2d(x[0], {3, 2}); }, {leaf({2, 2, 7, 5})});
}

TEST_F(Gradients, Normalizations) {
  gradcheck("batch_norm_train", [](auto& x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true); },
            {leaf({4, 3, 3, 2}), leaf({3}), leaf({3})});
  // Training with running buffers: the update must not change the function's value.
  Tensor rm = Tensor::zeros({3}, DType::Float64), rv = Tensor::full({3}, 1.0, DType::Float64);
  gradcheck("batch_norm_train_running", [&](auto& x) { return batch_norm(x[0], rm, rv, x[1], x[2], true, 0.3); },
            {leaf({4, 3, 2, 2}), leaf({3}), leaf({3})});
  Tensor em = random_f64({3}), ev = random_f64({3}, 0.5, 2.0);
  gradcheck("batch_norm_eval", [&](auto& x) { return batch_norm(x[0], em, ev, x[1], x[2], false); },
            {leaf({4, 3, 3, 2}), leaf({3}), leaf({3})});
  gradcheck("layer_norm", [](auto& x) { return layer_norm(x[0], {4}, x[1], x[2]); },
            {leaf({3, 2, 4}), leaf({4}), leaf({4})});
  gradcheck("layer_norm_2d_noaffine", [](auto& x) { return layer_norm(x[0], {3, 4}); }, {leaf({2, 3, 4})});
  gradcheck("group_norm", [](auto& x) { return group_norm(x[0], 2, x[1], x[2]); },
            {leaf({2, 4, 3, 2}), leaf({4}), leaf({4})});
}

TEST_F(Gradients, Embedding) {
  // Repeated ids: their rows' gradients add up.
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 3, 0, 3, 4, 1}, {3, 2});
  gradcheck("embedding", [&](auto& x) { return embedding(ids, x[0]); }, {leaf({5, 3})});
}

// Gather on inner axes, as imported models use it (torch exports x[:, -1] as Gather(axis 1, -1)):
// repeated and negative ids, a scalar id that drops the axis, and the last axis.
TEST_F(Gradients, GatherOnAnyAxis) {
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{2, -1, 0, 2}, {2, 2});
  gradcheck("gather_axis1",
            [&](auto& x) {
              return apply1({"Gather"}, {x[0], ids}, {{"axis", gearbox::attr_int(1)}});
            },
            {leaf({2, 4, 3})});
  const Tensor last = Tensor::from_vector(std::vector<int64_t>{-1}, {});
  gradcheck("gather_scalar_id",
            [&](auto& x) {
              return apply1({"Gather"}, {x[0], last}, {{"axis", gearbox::attr_int(1)}});
            },
            {leaf({3, 5, 2})});
  gradcheck("gather_last_axis",
            [&](auto& x) {
              return apply1({"Gather"}, {x[0], ids}, {{"axis", gearbox::attr_int(-1)}});
            },
            {leaf({2, 3, 4})});
}

TEST_F(Gradients, GatherElements) {
  // Repeated and negative indices on axis 1: repeated picks' gradients add up.
  Tensor idx = Tensor::from_vector(std::vector<int64_t>{0, 0, 2, -1, 1, 1}, {2, 3});
  gradcheck("gather_elements",
            [&](auto& x) {
              return apply1({"GatherElements"}, {x[0], idx}, {{"axis", gearbox::attr_int(1)}});
            },
            {leaf({2, 3})});
}

// The checker itself fails on a wrong builder (here a deliberately wrong one for Softsign,
// an op the frontend does not use).
TEST(Gradcheck, CatchesAWrongGradient) {
  GradientRegistry::global().add("", "Softsign", [](const TapeNode&, const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0]};  // d softsign/dx is 1/(1+|x|)^2, not 1
  });
  manual_seed(7);
  Tensor x = leaf({1});  // one element: exactly one mismatch
  EXPECT_NONFATAL_FAILURE(gradcheck("softsign", [](auto& v) { return apply1({"Softsign"}, {v[0]}); }, {x}), "softsign");
}

TEST(GradientRegistry, EveryRecordedOpHasABuilder) {
  for (const char* op : {"Add",
                         "Sub",
                         "Mul",
                         "Div",
                         "Neg",
                         "Exp",
                         "Log",
                         "Pow",
                         "Relu",
                         "Sigmoid",
                         "Tanh",
                         "Softmax",
                         "LogSoftmax",
                         "MatMul",
                         "Gemm",
                         "ReduceSum",
                         "ReduceMean",
                         "Reshape",
                         "Transpose",
                         "Concat",
                         "Slice",
                         "Split",
                         "Expand",
                         "Conv",
                         "ConvTranspose",
                         "MaxPool",
                         "AveragePool",
                         "GlobalAveragePool",
                         "BatchNormalization",
                         "LayerNormalization",
                         "Gather",
                         "GatherElements"})
    EXPECT_NE(GradientRegistry::global().find("", op), nullptr) << op;
  EXPECT_NE(GradientRegistry::global().find("com.gearbox", "Gelu"), nullptr);
}

}  // namespace
}  // namespace gbx::nn::testing
