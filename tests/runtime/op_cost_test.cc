// FLOP counts the profiler records (runtime/op_cost.h), checked against hand-computed values
// for the forms a convolution takes after the optimizer: plain Conv, com.gearbox.FusedConv and
// the layout passes' channels-last com.gearbox.NhwcConv and blocked com.gearbox.Nchw16cConv.
#include <gtest/gtest.h>

#include "device/device.h"
#include "graph/pass_test_util.h"
#include "kernels/op_descriptor.h"
#include "runtime/op_cost.h"
#include "runtime/profiler.h"

namespace gearbox {
namespace {

using testing::attr_ints;
using testing::GraphBuilder;
using testing::random_tensor;

// Two 3x3 convolutions (pads 1) with a Relu between: conv_fusion makes the first a FusedConv,
// and with cpu.dnnl first the layout pass turns both into NhwcConv.
Model two_convs() {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {1, 4, 9, 7});
  auto conv = [&](Value* in, int64_t c, int64_t m, uint32_t seed) {
    Value* y = b.op("Conv", {in, b.constant("w" + std::to_string(seed), random_tensor({m, c, 3, 3}, seed))},
                    {{"pads", attr_ints({1, 1, 1, 1})}});
    y->type.dtype = DType::F32;
    y->type.shape = Shape::from_dims({1, m, 9, 7});
    return y;
  };
  Value* r = b.op("Relu", {conv(x, 4, 6, 1)});
  r->type.dtype = DType::F32;
  r->type.shape = Shape::from_dims({1, 6, 9, 7});
  b.output(conv(r, 6, 5, 2));
  return b.take();
}

// 2 * output elements * (input channels * kernel area) for each conv.
constexpr double kFirstConvFlops = 2.0 * (6 * 9 * 7) * (4 * 3 * 3);
constexpr double kSecondConvFlops = 2.0 * (5 * 9 * 7) * (6 * 3 * 3);

void expect_conv_flops(const std::string& engines, const std::vector<std::string>& want_ops) {
  SessionOptions o;
  o.engine = engines;
  o.optimizer.use_env = false;
  auto s = Session::create(two_convs(), o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Profiler prof;
  auto r = (*s)->run({{"x", random_tensor({1, 4, 9, 7}, 3)}}, &prof);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<double> flops;
  std::vector<std::string> ops;
  for (const OpRecord& rec : prof.ops())
    if (op_descriptor_qualified(rec.op_type).kind == OpKind::Contraction) {
      ops.push_back(rec.op_type);
      flops.push_back(rec.flops);
    }
  ASSERT_EQ(ops, want_ops) << engines;
  EXPECT_DOUBLE_EQ(flops[0], kFirstConvFlops) << engines;
  EXPECT_DOUBLE_EQ(flops[1], kSecondConvFlops) << engines;
}

TEST(OpCost, ConvFlopsInEveryFormTheOptimizerLeaves) {
  // cpu.ref: no layout pass; the first conv takes the Relu (FusedConv), the second stays Conv.
  expect_conv_flops("cpu.ref", {"com.gearbox.FusedConv", "Conv"});
  // cpu.dnnl first: the layout pass rewrites the region to channels-last.
  expect_conv_flops("cpu.dnnl,cpu.ref", {"com.gearbox.NhwcConv", "com.gearbox.NhwcConv"});
}

// Three 3x3 convolutions of 128 channels at 14x14 (Winograd-shaped, enough work per converted
// byte): with cpu.dnnl first the blocked layout pass makes them Nchw16cConv, whose tensors are
// [N, C/16, H, W, 16] and whose FLOPs must still be 2 * N*M*OH*OW * C*KH*KW.
TEST(OpCost, BlockedConvFlops) {
  // The convolutions are rewritten to nChw16c only on AVX-512 CPUs (graph/passes/layout_blocked.cc).
  if (!device::detect_cpu_capabilities().has("avx512f")) GTEST_SKIP() << "nChw16c is rewritten only on AVX-512 CPUs";
  GraphBuilder b;
  Value* v = b.input("x", DType::F32, {1, 128, 14, 14});
  for (uint32_t i = 0; i < 3; ++i) {
    v = b.op("Conv", {v, b.constant("w" + std::to_string(i), random_tensor({128, 128, 3, 3}, i, -0.05f, 0.05f))},
             {{"pads", attr_ints({1, 1, 1, 1})}});
    v->type.dtype = DType::F32;
    v->type.shape = Shape::from_dims({1, 128, 14, 14});
  }
  b.output(v);
  SessionOptions o;
  o.engine = "cpu.dnnl,cpu.ref";
  o.optimizer.use_env = false;
  auto s = Session::create(b.take(), o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Profiler prof;
  auto r = (*s)->run({{"x", random_tensor({1, 128, 14, 14}, 9)}}, &prof);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  int blocked = 0;
  for (const OpRecord& rec : prof.ops()) {
    if (rec.op_type != "com.gearbox.Nchw16cConv") continue;
    ++blocked;
    EXPECT_EQ(op_descriptor_qualified(rec.op_type).kind, OpKind::Contraction);
    EXPECT_DOUBLE_EQ(rec.flops, 2.0 * (128 * 14 * 14) * (128 * 3 * 3));
  }
  EXPECT_EQ(blocked, 3);
}

TEST(OpCost, QualifiedOpTypesFindTheirDescriptor) {
  EXPECT_EQ(op_descriptor_qualified("Conv").kind, OpKind::Contraction);
  EXPECT_EQ(op_descriptor_qualified("com.gearbox.NhwcConv").kind, OpKind::Contraction);
  EXPECT_EQ(op_descriptor_qualified("com.gearbox.FusedGemm").kind, OpKind::Contraction);
  EXPECT_EQ(op_descriptor_qualified("Transpose").kind, OpKind::DataMovement);
  EXPECT_EQ(op_descriptor_qualified("Relu").kind, OpKind::ElementwiseUnary);
  // A domain matters: ai.onnx has no NhwcConv.
  EXPECT_EQ(find_op_descriptor("", "NhwcConv"), nullptr);
}

}  // namespace
}  // namespace gearbox
