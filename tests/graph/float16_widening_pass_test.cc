// float16 widening: a float16 model computes in float32 inside with its float16 I/O kept; its
// outputs match the float16 graph run as it is (on the reference, which rounds every
// intermediate to float16) within float16's rounding; graphs with an explicit rounding step
// or an op outside the list are left alone.
#include <gtest/gtest.h>

#include "base/half.h"
#include "graph/pass_test_util.h"
#include "graph/passes/passes.h"

namespace gearbox::testing {
namespace {

const OptimizerOptions kWidenOnly = only_passes({"float16_widening"});

Tensor half_tensor(const Dims& d, uint32_t seed) {
  Tensor f = random_tensor(d, seed);
  Tensor h(DType::F16, d);
  for (int64_t i = 0; i < f.numel(); ++i) h.data<Half>()[i] = Half(f.data<float>()[i]);
  return h;
}

Value* typed(Value* v) {
  v->type.dtype = DType::F16;
  return v;
}

// x -> Conv(W, B) -> Relu -> Clip -> MaxPool -> y, and y + 1 -> z (y is both an output and read).
Model conv_model(bool explicit_rounding) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F16, {1, 3, 8, 8});
  Value* c =
      typed(b.op("Conv", {x, b.constant("W", half_tensor({4, 3, 3, 3}, 1)), b.constant("B", half_tensor({4}, 2))},
                 {{"pads", attr_ints({1, 1, 1, 1})}}));
  // Clip's bounds from Constant nodes, as torch's float16 exports write them.
  auto constant_node = [&](float v) {
    Attribute a;
    a.type = AttrType::Tensor;
    a.t = Tensor(DType::F16, {});
    a.t.data<Half>()[0] = Half(v);
    return typed(b.op("Constant", {}, {{"value", a}}));
  };
  Value* r = typed(b.op("Clip", {typed(b.op("Relu", {c})), constant_node(0.f), constant_node(0.75f)}));
  if (explicit_rounding) r = typed(b.op("Cast", {r}, {{"to", attr_int(10)}}));
  Value* y = typed(b.op("MaxPool", {r}, {{"kernel_shape", attr_ints({2, 2})}, {"strides", attr_ints({2, 2})}}));
  Value* one = b.constant("one", half_tensor({1}, 3));
  Value* z = typed(b.op("Add", {y, one}));
  b.output(y);
  b.output(z);
  return b.take();
}

TEST(Float16WideningPass, ComputesInFloat32WithFloat16Io) {
  OptimizerReport rep;
  std::shared_ptr<Graph> g;
  expect_same_outputs([] { return conv_model(false); }, {{"x", half_tensor({1, 3, 8, 8}, 4)}}, kWidenOnly, 4e-3f, &rep,
                      &g);
  EXPECT_GT(rep.matches("float16_widening"), 0);
  for (const Value* v : g->initializers) EXPECT_EQ(v->type.dtype, DType::F32) << v->name;
  // One Cast in (x), two out (y, z); the graph's I/O keep their names and float16.
  EXPECT_EQ(count_op(*g, "Cast"), 3u);
  EXPECT_EQ(g->inputs[0]->type.dtype, DType::F16);
  for (const Value* out : g->outputs) {
    EXPECT_EQ(out->type.dtype, DType::F16) << out->name;
    ASSERT_NE(out->producer, nullptr);
    EXPECT_EQ(out->producer->op_type, "Cast");
  }
  for (const auto& n : g->nodes)
    if (n->op_type == "Conv") EXPECT_EQ(n->inputs[0]->type.dtype, DType::F32);
}

TEST(Float16WideningPass, AnExplicitRoundingStepLeavesTheGraphAlone) {
  Model m = conv_model(true);
  auto rep = optimize(m, kWidenOnly);
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  EXPECT_EQ(rep->matches("float16_widening"), 0);
  for (const Value* v : m.graph->initializers) EXPECT_EQ(v->type.dtype, DType::F16);
}

TEST(Float16WideningPass, Float32ModelsAreUntouched) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {2, 3});
  b.output(b.op("Relu", {x}));
  Model m = b.take();
  auto rep = optimize(m, kWidenOnly);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->matches("float16_widening"), 0);
  EXPECT_EQ(count_op(*m.graph, "Cast"), 0u);
}

}  // namespace
}  // namespace gearbox::testing
