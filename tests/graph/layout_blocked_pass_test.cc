// The layout_blocked pass: which channels-last convolutions it turns into blocked
// com.gearbox.Nchw16cConv ops (1x1 and Winograd-shaped 3x3 ones with channel counts that are
// multiples of 16, in regions whose convolutions outweigh their conversions), where it puts
// the Reshape + Transpose conversions, and that the rewritten graph computes what the
// unrewritten one does: on cpu.ref (the rearranging reference kernel), on cpu.dnnl (the
// blocked oneDNN kernels) and after a .gbm round trip.
#include <gtest/gtest.h>

#include "runtime/partitioner.h"

#include "device/device.h"
#include "graph/pass_test_util.h"
#include "kernels/cpu/dnnl/dnnl_util.h"

namespace gearbox {
namespace {

using testing::attr_int;
using testing::attr_ints;
using testing::count_op;
using testing::expect_same_outputs;
using testing::expect_same_outputs_as_unoptimized;
using testing::gbm_round_trip;
using testing::GraphBuilder;
using testing::only_passes;
using testing::random_tensor;
using testing::typed;

// Conv (+ residual Add) + Relu with OIHW weights of `group` groups, `k` x `k`, padded to keep
// the size at stride 1.
Value* conv_relu(GraphBuilder& b, Value* x, int64_t c, int64_t m, int64_t k, int64_t stride, Dims out, uint32_t seed,
                 Value* residual = nullptr, int64_t group = 1) {
  const float scale = 1.f / static_cast<float>(c / group * k * k);
  Value* y = b.op("Conv", {x, b.constant("w" + std::to_string(seed), random_tensor({m, c / group, k, k}, seed, -scale, scale)),
                           b.constant("b" + std::to_string(seed), random_tensor({m}, seed + 1))},
                  {{"pads", attr_ints({k / 2, k / 2, k / 2, k / 2})},
                   {"strides", attr_ints({stride, stride})},
                   {"group", attr_int(group)}});
  typed(y, out);
  if (residual) {
    y = b.op("Add", {y, residual});
    typed(y, out);
  }
  Value* r = b.op("Relu", {y});
  typed(r, out);
  return r;
}

// Three 128-channel 3x3 convolutions at 14x14 (Winograd-shaped: blocked), the second with a
// residual, then a stride-2 3x3 (oneDNN's blocked direct kernel is slower: it stays
// channels-last). Read outside the blocked region: x (in), the second conv's output (a global
// pool) and the third's (the strided conv).
Model winograd_chain() {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {1, 128, 14, 14});
  const Dims d{1, 128, 14, 14};
  Value* a = conv_relu(b, x, 128, 128, 3, 1, d, 10);
  Value* s = conv_relu(b, a, 128, 128, 3, 1, d, 20, x);
  Value* c = conv_relu(b, s, 128, 128, 3, 1, d, 30);
  Value* e = conv_relu(b, c, 128, 128, 3, 2, {1, 128, 7, 7}, 40);
  Value* gap = b.op("GlobalAveragePool", {s});
  typed(gap, {1, 128, 1, 1});
  b.output(e);
  b.output(gap);
  return b.take();
}

OptimizerOptions layout_passes(const std::string& engines = "cpu.dnnl,cpu.ref") {
  OptimizerOptions o = only_passes({"conv_fusion", "layout_nhwc", "layout_blocked", "dead_node_elimination"});
  o.engines = engines;
  return o;
}

std::map<std::string, Tensor> feeds() { return {{"x", random_tensor({1, 128, 14, 14}, 7)}}; }

TEST(LayoutBlockedPass, RewritesTheRegionWithConversionsAtItsBoundaries) {
  if (!device::detect_cpu_capabilities().has("avx512f")) GTEST_SKIP() << "nChw16c is rewritten only on AVX-512 CPUs";
  Model m = winograd_chain();
  auto rep = optimize(m, layout_passes());
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  const Graph& g = *m.graph;
  EXPECT_EQ(rep->matches("layout_blocked"), 3);
  EXPECT_EQ(count_op(g, "Nchw16cConv"), 3u);
  EXPECT_EQ(count_op(g, "NhwcConv"), 1u);  // the strided 3x3
  // Into the blocked layout: x (the first conv's X and the second's residual, converted
  // once). Out of it: the second conv's output (the pool) and the third's (the strided conv).
  int into = 0, out_of = 0;
  for (const auto& n : g.nodes) {
    if (n->op_type != "Transpose" || n->attrs.at("perm").ints.size() != 5) continue;
    const auto perm = n->attrs.at("perm").ints;
    if (perm == std::vector<int64_t>{0, 3, 1, 2, 4}) {
      ++into;
      EXPECT_EQ(n->inputs[0]->type.shape.dims[3].value, 8);  // [N, H, W, C/16, 16]
      EXPECT_EQ(n->inputs[0]->producer->op_type, "Reshape");
    } else {
      EXPECT_EQ(perm, (std::vector<int64_t>{0, 2, 3, 1, 4}));
      ++out_of;
    }
  }
  EXPECT_EQ(into, 1);
  EXPECT_EQ(out_of, 2);
  EXPECT_EQ(count_op(g, "Reshape"), 3u);
  for (const auto& n : g.nodes)
    if (n->op_type == "Nchw16cConv") {
      EXPECT_EQ(n->domain, "com.gearbox");
      const Shape& s = n->outputs[0]->type.shape;
      ASSERT_EQ(s.rank(), 5u);
      EXPECT_EQ(s.dims[1].value, 8);
      EXPECT_EQ(s.dims[4].value, 16);
    }
}

TEST(LayoutBlockedPass, SameOutputsOnTheReferenceEngine) {
  if (!device::detect_cpu_capabilities().has("avx512f")) GTEST_SKIP() << "nChw16c is rewritten only on AVX-512 CPUs";
  OptimizerReport rep;
  expect_same_outputs(winograd_chain, feeds(), layout_passes(), 1e-4f, &rep);
  EXPECT_EQ(rep.matches("layout_blocked"), 3);
}

// The rewritten graph on cpu.dnnl (blocked oneDNN kernels, Winograd without reorders)
// against the unrewritten one on cpu.ref.
TEST(LayoutBlockedPass, SameOutputsOnOneDnn) {
  if (!device::detect_cpu_capabilities().has("avx512f")) GTEST_SKIP() << "nChw16c is rewritten only on AVX-512 CPUs";
  Model m = winograd_chain();
  auto rep = optimize(m, layout_passes());
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  EXPECT_EQ(rep->matches("layout_blocked"), 3);
  // Every blocked node goes to oneDNN's kernels (none refused, none left to the run).
  auto part = partition(m, {"cpu.dnnl", "cpu.ref"});
  ASSERT_TRUE(part.ok()) << part.status().to_string();
  EXPECT_TRUE(part->decided_at_run_time.empty());
  for (const auto& n : m.graph->nodes)
    if (n->op_type.rfind("Nchw16c", 0) == 0) EXPECT_EQ(n->engine, "cpu.dnnl") << n->name << " (" << n->op_type << ")";
  const int64_t winograd = dnnl_engine::winograd_conv_runs();
  expect_same_outputs_as_unoptimized(winograd_chain, std::move(m), "cpu.dnnl,cpu.ref", feeds(), 1e-4f);
  EXPECT_EQ(dnnl_engine::winograd_conv_runs() - winograd, dnnl_engine::winograd_available() ? 3 : 0);
}

// Without AVX-512 the pass leaves the graph alone (oneDNN has no fast nChw16c kernel there).
TEST(LayoutBlockedPass, OffWithoutAvx512) {
  if (device::detect_cpu_capabilities().has("avx512f")) GTEST_SKIP() << "this CPU has AVX-512";
  Model m = winograd_chain();
  auto rep = optimize(m, layout_passes());
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  EXPECT_EQ(rep->matches("layout_blocked"), 0);
}

TEST(LayoutBlockedPass, OffUnlessTheEnginesPreferOneDnnOrWhenDisabled) {
  for (const std::string engines : {"cpu.ref", "cpu.ref,cpu.dnnl"}) {
    Model m = winograd_chain();
    ASSERT_TRUE(optimize(m, layout_passes(engines)).ok());
    EXPECT_EQ(count_op(*m.graph, "Nchw16cConv"), 0u) << engines;
  }
  OptimizerOptions off = layout_passes();
  off.disabled_passes.push_back("layout_blocked");
  Model m = winograd_chain();
  ASSERT_TRUE(optimize(m, off).ok());
  EXPECT_EQ(count_op(*m.graph, "Nchw16cConv"), 0u);
  EXPECT_EQ(count_op(*m.graph, "NhwcConv"), 4u);
}

TEST(LayoutBlockedPass, LeavesCheapRegionsAndUnblockableChannelsAlone) {
  if (!device::detect_cpu_capabilities().has("avx512f")) GTEST_SKIP() << "nChw16c is rewritten only on AVX-512 CPUs";
  {  // MobileNetV2-like: 1x1 expand, depthwise 3x3 (stays channels-last), 1x1 project: each
     // 1x1 would need its own conversions, which would cost more than blocking gains
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {1, 32, 14, 14});
    Value* e = conv_relu(b, x, 32, 192, 1, 1, {1, 192, 14, 14}, 1);
    Value* dw = conv_relu(b, e, 192, 192, 3, 1, {1, 192, 14, 14}, 2, nullptr, 192);
    b.output(conv_relu(b, dw, 192, 32, 1, 1, {1, 32, 14, 14}, 3));
    Model m = b.take();
    auto rep = optimize(m, layout_passes());
    ASSERT_TRUE(rep.ok());
    EXPECT_EQ(rep->matches("layout_nhwc"), 3);
    EXPECT_EQ(count_op(*m.graph, "Nchw16cConv"), 0u);
  }
  {  // 120 channels are not whole blocks of 16
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {1, 120, 14, 14});
    const Dims d{1, 120, 14, 14};
    Value* a = conv_relu(b, x, 120, 120, 3, 1, d, 1);
    Value* s = conv_relu(b, a, 120, 120, 3, 1, d, 2, x);
    b.output(conv_relu(b, s, 120, 120, 3, 1, d, 3));
    Model m = b.take();
    ASSERT_TRUE(optimize(m, layout_passes()).ok());
    EXPECT_EQ(count_op(*m.graph, "NhwcConv"), 3u);
    EXPECT_EQ(count_op(*m.graph, "Nchw16cConv"), 0u);
  }
}

// The rewritten graph through the .gbm format (what `gearbox compile` writes), then run on
// the reference engine.
TEST(LayoutBlockedPass, SurvivesAGbmRoundTrip) {
  if (!device::detect_cpu_capabilities().has("avx512f")) GTEST_SKIP() << "nChw16c is rewritten only on AVX-512 CPUs";
  Model m = winograd_chain();
  ASSERT_TRUE(optimize(m, layout_passes()).ok());
  Model loaded;
  ASSERT_NO_FATAL_FAILURE(gbm_round_trip(m, &loaded));
  EXPECT_EQ(count_op(*loaded.graph, "Nchw16cConv"), 3u);
  expect_same_outputs_as_unoptimized(winograd_chain, std::move(loaded), std::string(kEngineRef), feeds(), 1e-4f);
}

}  // namespace
}  // namespace gearbox
