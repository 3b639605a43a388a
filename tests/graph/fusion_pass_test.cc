// The fusion passes: each pattern fuses into its com.gearbox operator and the fused graph
// computes what the unfused one did (reference kernels both times); near-misses stay.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/pass_test_util.h"
#include "graph/passes/passes.h"

namespace gearbox::testing {
namespace {

size_t count_fused(const Graph& g, const std::string& op) {
  size_t n = 0;
  for (const auto& node : g.nodes)
    if (node->domain == "com.gearbox" && node->op_type == op) ++n;
  return n;
}

// ---- Conv ------------------------------------------------------------------------------

// Conv(+bias) [+ residual] -> activation `act` (the nodes it needs are built here).
Model conv_pattern(const std::string& act, bool residual, bool bias = true) {
  GraphBuilder b(14);
  Value* x = b.input("x", DType::F32, {1, 3, 5, 5});
  std::vector<Value*> in{x, b.constant("w", random_tensor({4, 3, 3, 3}, 20))};
  if (bias) in.push_back(b.constant("b", random_tensor({4}, 21)));
  Value* y = b.op("Conv", in, {{"pads", attr_ints({1, 1, 1, 1})}});
  if (residual) y = b.op("Add", {b.input("z", DType::F32, {1, 4, 5, 5}), y});
  if (act == "Relu" || act == "Sigmoid" || act == "Tanh" || act == "HardSwish") {
    y = b.op(act, {y});
  } else if (act == "LeakyRelu") {
    y = b.op(act, {y}, {{"alpha", attr_float(0.3f)}});
  } else if (act == "HardSigmoid") {
    y = b.op(act, {y}, {{"alpha", attr_float(0.25f)}, {"beta", attr_float(0.4f)}});
  } else if (act == "Clip") {
    y = b.op("Clip", {y, b.constant("lo", scalar_f(0.f)), b.constant("hi", scalar_f(0.6f))});
  } else if (act == "Silu") {
    y = b.op("Mul", {y, b.op("Sigmoid", {y})});
  }
  b.output(y);
  return b.take();
}

std::map<std::string, Tensor> conv_feeds(bool residual) {
  std::map<std::string, Tensor> f{{"x", random_tensor({1, 3, 5, 5}, 22, -2.f, 2.f)}};
  if (residual) f["z"] = random_tensor({1, 4, 5, 5}, 23);
  return f;
}

TEST(ConvFusionPass, EveryActivationWithAndWithoutResidual) {
  for (const std::string act : {"Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu", "Tanh", "Silu"})
    for (bool residual : {false, true}) {
      SCOPED_TRACE(act + (residual ? " + residual" : ""));
      OptimizerReport rep;
      std::shared_ptr<Graph> g;
      expect_same_outputs([&] { return conv_pattern(act, residual); }, conv_feeds(residual),
                          only_passes({"conv_fusion"}), 1e-6f, &rep, &g);
      EXPECT_EQ(rep.matches("conv_fusion"), 1);
      ASSERT_EQ(g->nodes.size(), 1u);
      EXPECT_EQ(count_fused(*g, "FusedConv"), 1u);
      EXPECT_EQ(g->nodes[0]->attrs.at("activation").s, act);
      EXPECT_EQ(g->nodes[0]->inputs.size(), residual ? 4u : 3u);
    }
}

TEST(ConvFusionPass, ResidualWithoutActivationAndNoBias) {
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs([] { return conv_pattern("", true, false); }, conv_feeds(true), only_passes({"conv_fusion"}),
                      1e-6f, &rep, &g);
  EXPECT_EQ(rep.matches("conv_fusion"), 1);
  ASSERT_EQ(g->nodes.size(), 1u);
  EXPECT_EQ(g->nodes[0]->inputs[2], nullptr);  // no bias: an omitted input
}

TEST(ConvFusionPass, NearMisses) {
  {  // plain Conv: nothing to absorb
    Model m = conv_pattern("", false);
    ASSERT_TRUE(optimize(m, only_passes({"conv_fusion"})).ok());
    EXPECT_EQ(count_op(*m.graph, "Conv"), 1u);
  }
  {  // Conv output also read elsewhere: the Relu cannot be absorbed
    GraphBuilder b(13);
    Value* x = b.input("x", DType::F32, {1, 3, 5, 5});
    Value* c = b.op("Conv", {x, b.constant("w", random_tensor({4, 3, 3, 3}, 20))});
    b.output(b.op("Relu", {c}));
    b.output(c);
    Model m = b.take();
    auto rep = optimize(m, only_passes({"conv_fusion"}));
    ASSERT_TRUE(rep.ok());
    EXPECT_EQ(rep->matches("conv_fusion"), 0);
  }
  {  // an activation not in the list (Elu)
    GraphBuilder b(13);
    Value* x = b.input("x", DType::F32, {1, 3, 5, 5});
    b.output(b.op("Elu", {b.op("Conv", {x, b.constant("w", random_tensor({4, 3, 3, 3}, 20))})}));
    Model m = b.take();
    ASSERT_TRUE(optimize(m, only_passes({"conv_fusion"})).ok());
    EXPECT_EQ(count_op(*m.graph, "Elu"), 1u);
  }
}

// ---- GELU and MatMul --------------------------------------------------------------------

enum class GeluForm { ErfXThenHalf, ErfHalfThenX, ErfHalfXFirst, ErfMulRsqrt2, Tanh };

// x [2, 8] -> MatMul(W [8, 6]) + bias -> GELU in the given form.
Model matmul_gelu(GeluForm form, bool with_bias = true) {
  GraphBuilder b(14);
  Value* x = b.input("x", DType::F32, {2, 8});
  Value* h = b.op("MatMul", {x, b.constant("w", random_tensor({8, 6}, 30))});
  if (with_bias) h = b.op("Add", {b.constant("bias", random_tensor({6}, 31)), h});
  auto c = [&](float v) { return b.constant("c" + std::to_string(v), scalar_f(v)); };
  Value* inner;
  if (form == GeluForm::Tanh) {
    Value* cube = b.op("Mul", {b.op("Pow", {h, c(3.f)}), c(0.044715f)});
    inner = b.op("Tanh", {b.op("Mul", {b.op("Add", {h, cube}), c(0.7978845608f)})});
  } else if (form == GeluForm::ErfMulRsqrt2) {
    inner = b.op("Erf", {b.op("Mul", {h, c(0.70710678f)})});
  } else {
    inner = b.op("Erf", {b.op("Div", {h, c(1.4142135f)})});
  }
  Value* t = b.op("Add", {inner, c(1.f)});
  Value* y;
  if (form == GeluForm::ErfHalfThenX) y = b.op("Mul", {b.op("Mul", {t, c(0.5f)}), h});
  else if (form == GeluForm::ErfHalfXFirst) y = b.op("Mul", {b.op("Mul", {h, c(0.5f)}), t});
  else y = b.op("Mul", {b.op("Mul", {h, t}), c(0.5f)});
  b.output(y);
  return b.take();
}

TEST(GeluFusionPass, AllForms) {
  for (GeluForm form : {GeluForm::ErfXThenHalf, GeluForm::ErfHalfThenX, GeluForm::ErfHalfXFirst, GeluForm::ErfMulRsqrt2,
                        GeluForm::Tanh}) {
    SCOPED_TRACE(static_cast<int>(form));
    OptimizerReport rep;
    std::shared_ptr<Graph> g;
    expect_same_outputs([&] { return matmul_gelu(form); }, {{"x", random_tensor({2, 8}, 32, -2.f, 2.f)}},
                        only_passes({"gelu_fusion"}), 1e-5f, &rep, &g);
    EXPECT_EQ(rep.matches("gelu_fusion"), 1);
    EXPECT_EQ(count_fused(*g, "Gelu"), 1u);
    EXPECT_EQ(g->nodes.size(), 3u);  // MatMul, Add, Gelu
  }
}

TEST(GeluFusionPass, WrongConstantIsNotGelu) {
  GraphBuilder b(14);
  Value* x = b.input("x", DType::F32, {4});
  Value* t =
      b.op("Add", {b.op("Erf", {b.op("Div", {x, b.constant("c", scalar_f(2.f))})}), b.constant("one", scalar_f(1.f))});
  b.output(b.op("Mul", {b.op("Mul", {x, t}), b.constant("half", scalar_f(0.5f))}));
  Model m = b.take();
  auto rep = optimize(m, only_passes({"gelu_fusion"}));
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->matches("gelu_fusion"), 0);
  EXPECT_EQ(m.graph->nodes.size(), 5u);
}

TEST(MatMulFusionPass, BiasAndGelu) {
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs([] { return matmul_gelu(GeluForm::ErfXThenHalf); }, {{"x", random_tensor({2, 8}, 33)}},
                      only_passes({"gelu_fusion", "matmul_fusion"}), 1e-5f, &rep, &g);
  EXPECT_EQ(rep.matches("matmul_fusion"), 1);
  ASSERT_EQ(g->nodes.size(), 1u);
  EXPECT_EQ(count_fused(*g, "FusedMatMul"), 1u);
  EXPECT_EQ(g->nodes[0]->attrs.at("activation").s, "Gelu");
  EXPECT_EQ(g->nodes[0]->inputs.size(), 3u);
}

TEST(MatMulFusionPass, GemmWithActivationAndBiasOnly) {
  auto gemm = [] {
    GraphBuilder b(13);
    Value* x = b.input("x", DType::F32, {3, 5});
    Value* y = b.op("Gemm", {x, b.constant("w", random_tensor({4, 5}, 34)), b.constant("c", random_tensor({4}, 35))},
                    {{"transB", attr_int(1)}, {"alpha", attr_float(0.5f)}});
    b.output(b.op("Relu", {y}));
    return b.take();
  };
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs(gemm, {{"x", random_tensor({3, 5}, 36)}}, only_passes({"matmul_fusion"}), 1e-6f, &rep, &g);
  EXPECT_EQ(count_fused(*g, "FusedGemm"), 1u);
  expect_same_outputs([] { return matmul_gelu(GeluForm::ErfXThenHalf); }, {{"x", random_tensor({2, 8}, 37)}},
                      only_passes({"matmul_fusion"}), 1e-6f, &rep, &g);
  EXPECT_EQ(rep.matches("matmul_fusion"), 1);  // MatMul + bias; the unfused GELU stays
  EXPECT_EQ(count_fused(*g, "FusedMatMul"), 1u);
  EXPECT_EQ(count_op(*g, "Erf"), 1u);
}

TEST(MatMulFusionPass, NonConstantAddIsNotABias) {
  GraphBuilder b(14);
  Value* x = b.input("x", DType::F32, {2, 8});
  Value* h = b.op("MatMul", {x, b.constant("w", random_tensor({8, 6}, 30))});
  b.output(b.op("Add", {h, b.input("r", DType::F32, {2, 6})}));
  Model m = b.take();
  auto rep = optimize(m, only_passes({"matmul_fusion"}));
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->matches("matmul_fusion"), 0);
}

// ---- LayerNorm and SkipLayerNorm -----------------------------------------------------------

// [residual Add] -> the exporter's LayerNorm decomposition over the last axis (width 6).
// At opset 18 ReduceMean's axes are a constant input instead of the attribute.
Model layer_norm(bool skip, float pow_exponent = 2.f, int opset = 14) {
  GraphBuilder b(opset);
  Value* x = b.input("x", DType::F32, {2, 3, 6});
  if (skip) x = b.op("Add", {x, b.input("r", DType::F32, {2, 3, 6})});
  const bool axes_input = opset >= 18;
  AttributeMap last;
  if (!axes_input) last["axes"] = attr_ints({-1});
  Value* axes = axes_input ? b.constant("axes", Tensor::from_vector<int64_t>({-1}, {1})) : nullptr;
  auto mean = [&](Value* v) { return axes_input ? b.op("ReduceMean", {v, axes}) : b.op("ReduceMean", {v}, last); };
  Value* d = b.op("Sub", {x, mean(x)});
  Value* var = mean(b.op("Pow", {d, b.constant("two", scalar_f(pow_exponent))}));
  Value* sd = b.op("Sqrt", {b.op("Add", {var, b.constant("eps", scalar_f(1e-5f))})});
  Value* y = b.op("Mul", {b.op("Div", {d, sd}), b.constant("gamma", random_tensor({6}, 40, 0.5f, 1.5f))});
  b.output(b.op("Add", {y, b.constant("beta", random_tensor({6}, 41))}));
  return b.take();
}

TEST(LayerNormFusionPass, DecompositionFuses) {
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs([] { return layer_norm(false); }, {{"x", random_tensor({2, 3, 6}, 42, -3.f, 3.f)}},
                      only_passes({"layer_norm_fusion"}), 1e-5f, &rep, &g);
  EXPECT_EQ(rep.matches("layer_norm_fusion"), 1);
  ASSERT_EQ(g->nodes.size(), 1u);
  EXPECT_EQ(count_fused(*g, "LayerNormalization"), 1u);
  EXPECT_FLOAT_EQ(g->nodes[0]->attrs.at("epsilon").f, 1e-5f);
}

TEST(LayerNormFusionPass, Opset18DecompositionFuses) {
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs([] { return layer_norm(false, 2.f, 18); }, {{"x", random_tensor({2, 3, 6}, 42, -3.f, 3.f)}},
                      only_passes({"layer_norm_fusion"}), 1e-5f, &rep, &g);
  EXPECT_EQ(rep.matches("layer_norm_fusion"), 1);
  EXPECT_EQ(count_fused(*g, "LayerNormalization"), 1u);
}

TEST(LayerNormFusionPass, SkipLayerNormFuses) {
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs([] { return layer_norm(true); },
                      {{"x", random_tensor({2, 3, 6}, 43)}, {"r", random_tensor({2, 3, 6}, 44)}},
                      only_passes({"layer_norm_fusion", "skip_layer_norm_fusion"}), 1e-5f, &rep, &g);
  EXPECT_EQ(rep.matches("skip_layer_norm_fusion"), 1);
  ASSERT_EQ(g->nodes.size(), 1u);
  EXPECT_EQ(count_fused(*g, "SkipLayerNormalization"), 1u);
}

TEST(LayerNormFusionPass, CubeIsNotVariance) {
  Model m = layer_norm(false, 3.f);
  auto rep = optimize(m, only_passes({"layer_norm_fusion"}));
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->matches("layer_norm_fusion"), 0);
  EXPECT_EQ(m.graph->nodes.size(), 9u);
}

// ---- Attention ---------------------------------------------------------------------------

// BERT-style self-attention on x [1, S=4, 8] with 2 heads of 4, mask added before Softmax.
Model attention(bool with_mask, bool scores_read_elsewhere = false) {
  GraphBuilder b(14);
  const int64_t s = 4, heads = 2, dh = 4;
  Value* x = b.input("x", DType::F32, {1, s, heads * dh});
  auto proj = [&](const char* name, uint32_t seed, std::vector<int64_t> perm) {
    Value* p = b.op("Add", {b.constant(std::string(name) + "_b", random_tensor({heads * dh}, seed + 1)),
                            b.op("MatMul", {x, b.constant(std::string(name) + "_w", random_tensor({8, 8}, seed))})});
    Value* r = b.op("Reshape", {p, b.constant(std::string(name) + "_shape", ints({1, s, heads, dh}))});
    return b.op("Transpose", {r}, {{"perm", attr_ints(perm)}});
  };
  Value* q = proj("q", 50, {0, 2, 1, 3});
  Value* v = proj("v", 52, {0, 2, 1, 3});
  Value* k = proj("k", 54, {0, 2, 3, 1});
  Value* scores = b.op("Div", {b.op("MatMul", {q, k}), b.constant("scale", scalar_f(2.f))});
  if (with_mask) scores = b.op("Add", {scores, b.input("mask", DType::F32, {1, 1, 1, s})});
  Value* p = b.op("Softmax", {scores}, {{"axis", attr_int(-1)}});
  Value* ctx = b.op("Transpose", {b.op("MatMul", {p, v})}, {{"perm", attr_ints({0, 2, 1, 3})}});
  b.output(b.op("Reshape", {ctx, b.constant("out_shape", ints({1, s, heads * dh}))}));
  if (scores_read_elsewhere) b.output(scores);
  return b.take();
}

TEST(AttentionFusionPass, BertStyleBlockFuses) {
  for (bool mask : {true, false}) {
    SCOPED_TRACE(mask);
    Tensor m(DType::F32, {1, 1, 1, 4});
    m.data<float>()[3] = -10000.f;  // mask the last token
    std::map<std::string, Tensor> feeds{{"x", random_tensor({1, 4, 8}, 56)}};
    if (mask) feeds["mask"] = m;
    OptimizerReport rep;
    std::shared_ptr<Graph> g;
    expect_same_outputs([&] { return attention(mask); }, feeds, only_passes({"attention_fusion"}), 1e-6f, &rep, &g);
    EXPECT_EQ(rep.matches("attention_fusion"), 1);
    EXPECT_EQ(count_fused(*g, "Attention"), 1u);
    EXPECT_EQ(g->nodes.size(), 7u);  // 3 x (MatMul, Add) + Attention
    const Node* att = nullptr;
    for (const auto& n : g->nodes)
      if (n->op_type == "Attention") att = n.get();
    ASSERT_NE(att, nullptr);
    EXPECT_EQ(att->attrs.at("num_heads").i, 2);
  }
}

TEST(AttentionFusionPass, ScoresReadElsewhereDoNotFuse) {
  Model m = attention(true, true);
  auto rep = optimize(m, only_passes({"attention_fusion"}));
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->matches("attention_fusion"), 0);
  EXPECT_EQ(count_op(*m.graph, "Softmax"), 1u);
}

TEST(FusionPipeline, AttentionBlockWithEveryPass) {
  std::map<std::string, Tensor> feeds{{"x", random_tensor({1, 4, 8}, 57)}, {"mask", Tensor(DType::F32, {1, 1, 1, 4})}};
  OptimizerOptions all;
  all.use_env = false;
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs([] { return attention(true); }, feeds, all, 1e-6f, &rep, &g);
  EXPECT_EQ(rep.matches("attention_fusion"), 1);
  EXPECT_EQ(rep.matches("matmul_fusion"), 3);
  EXPECT_EQ(g->nodes.size(), 4u);
}

}  // namespace
}  // namespace gearbox::testing
