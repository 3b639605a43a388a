// The layout_nhwc pass: which nodes it rewrites into channels-last com.gearbox.Nhwc* ops, where
// it puts the Transposes, that it stays off unless the engines prefer cpu.dnnl, and that the
// rewritten graph computes what the unrewritten one does: on cpu.ref (the transposing
// reference kernels), on cpu.dnnl (the channels-last oneDNN kernels) and after a .gbm round
// trip.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "runtime/partitioner.h"

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

Value* conv(GraphBuilder& b, Value* x, int64_t c, int64_t m, int64_t k, Dims out, uint32_t seed) {
  Value* y = b.op("Conv", {x, b.constant("w" + std::to_string(seed), random_tensor({m, c, k, k}, seed, -0.3f, 0.3f)),
                           b.constant("b" + std::to_string(seed), random_tensor({m}, seed + 1))},
                  {{"pads", attr_ints({k / 2, k / 2, k / 2, k / 2})}});
  typed(y, out);
  return y;
}

Value* relu(GraphBuilder& b, Value* x, Dims d) {
  Value* y = b.op("Relu", {x});
  typed(y, d);
  return y;
}

// A ResNet-like block: conv-relu-maxpool, two convs with a residual add, then three readers
// of the block's output: GlobalAveragePool -> Flatten, AveragePool (ceil_mode) and the graph
// output itself.
Model resnet_like() {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {1, 3, 15, 15});
  Value* c1 = relu(b, conv(b, x, 3, 8, 3, {1, 8, 15, 15}, 10), {1, 8, 15, 15});
  Value* p = b.op("MaxPool", {c1},
                  {{"kernel_shape", attr_ints({3, 3})}, {"strides", attr_ints({2, 2})}, {"pads", attr_ints({1, 1, 1, 1})}});
  typed(p, {1, 8, 8, 8});
  Value* c2 = relu(b, conv(b, p, 8, 8, 3, {1, 8, 8, 8}, 20), {1, 8, 8, 8});
  Value* c3 = conv(b, c2, 8, 8, 1, {1, 8, 8, 8}, 30);
  Value* sum = b.op("Add", {c3, p});
  typed(sum, {1, 8, 8, 8});
  Value* r = relu(b, sum, {1, 8, 8, 8});
  Value* gap = b.op("GlobalAveragePool", {r});
  typed(gap, {1, 8, 1, 1});
  Value* flat = b.op("Flatten", {gap});
  typed(flat, {1, 8});
  Value* avg = b.op("AveragePool", {r},
                    {{"kernel_shape", attr_ints({3, 3})}, {"strides", attr_ints({2, 2})}, {"ceil_mode", attr_int(1)}});
  typed(avg, {1, 8, 4, 4});
  b.output(flat);
  b.output(avg);
  b.output(r);
  return b.take();
}

OptimizerOptions fusion_and_layout(const std::string& engines = "cpu.dnnl,cpu.ref") {
  OptimizerOptions o = only_passes({"conv_fusion", "layout_nhwc", "dead_node_elimination"});
  o.engines = engines;
  return o;
}

std::map<std::string, Tensor> feeds() { return {{"x", random_tensor({1, 3, 15, 15}, 7)}}; }

// The optimizer's own record (PassReport::replaced / twins), which --dump-tensors reads:
// every Conv of the model leads, through conv_fusion then layout_nhwc, to the NhwcConv that
// runs in its place (never to a boundary Transpose), and every channels-last value names the
// model value it re-makes.
TEST(LayoutNhwcPass, RecordsWhatReplacedEachNodeAndEachValue) {
  Model m = resnet_like();
  std::vector<std::string> convs;
  for (const auto& n : m.graph->nodes)
    if (n->op_type == "Conv") convs.push_back(n->name);
  ASSERT_EQ(convs.size(), 3u);
  std::set<std::string> values_before;
  for (const auto& n : m.graph->nodes)
    for (const Value* o : n->outputs) values_before.insert(o->name);
  auto rep = optimize(m, fusion_and_layout());
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  std::map<std::string, const Node*> running;
  for (const auto& n : m.graph->nodes) running[n->name] = n.get();
  std::map<std::string, NodeReplacement> replaced;
  for (const PassReport& p : rep->passes)
    for (const NodeReplacement& r : p.replaced) replaced.emplace(r.node, r);
  for (const std::string& c : convs) {
    std::string at = c;
    std::vector<std::string> chain;
    while (!running.count(at) && replaced.count(at) && chain.size() < 8) {
      chain.push_back(replaced.at(at).by_op);
      at = replaced.at(at).by;
    }
    ASSERT_TRUE(running.count(at)) << c << " leads to '" << at << "', which does not run";
    EXPECT_EQ(running.at(at)->op_type, "NhwcConv") << c;
    EXPECT_EQ(chain.back(), "com.gearbox.NhwcConv") << c;
  }
  size_t twins = 0;
  for (const PassReport& p : rep->passes)
    for (const LayoutTwin& t : p.twins) {
      ++twins;
      EXPECT_EQ(p.name, "layout_nhwc");
      EXPECT_EQ(t.layout, "nhwc");
      EXPECT_EQ(t.perm, (std::vector<int64_t>{0, 3, 1, 2}));
      EXPECT_TRUE(values_before.count(t.of) || t.of == "x") << t.of;
      const Value* v = m.graph->find_value(t.value);
      ASSERT_NE(v, nullptr) << t.value;
      EXPECT_EQ(v->type.shape.dims.size(), 4u);
    }
  EXPECT_GE(twins, 6u);  // one per region output at least
}

TEST(LayoutNhwcPass, RewritesARegionWithTransposesAtItsBoundaries) {
  Model m = resnet_like();
  auto rep = optimize(m, fusion_and_layout());
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  const Graph& g = *m.graph;
  EXPECT_EQ(rep->matches("layout_nhwc"), 6);
  EXPECT_EQ(count_op(g, "NhwcConv"), 3u);
  EXPECT_EQ(count_op(g, "NhwcMaxPool"), 1u);
  EXPECT_EQ(count_op(g, "NhwcGlobalAveragePool"), 1u);
  EXPECT_EQ(count_op(g, "NhwcAveragePool"), 1u);
  EXPECT_EQ(count_op(g, "Conv") + count_op(g, "FusedConv") + count_op(g, "MaxPool") + count_op(g, "AveragePool") +
                count_op(g, "GlobalAveragePool"),
            0u);
  // One Transpose into the region (x), one out of it per value read outside: the pooled
  // average and the block output (graph outputs) and the global pool (read by Flatten). The
  // max pool's output feeds only region nodes (a conv and the residual) and stays NHWC.
  int to_nhwc = 0, to_nchw = 0;
  for (const auto& n : g.nodes) {
    if (n->op_type != "Transpose") continue;
    const auto perm = n->attrs.at("perm").ints;
    if (perm == std::vector<int64_t>{0, 2, 3, 1}) {
      ++to_nhwc;
      EXPECT_EQ(n->inputs[0]->name, "x");
    } else {
      EXPECT_EQ(perm, (std::vector<int64_t>{0, 3, 1, 2}));
      ++to_nchw;
    }
  }
  EXPECT_EQ(to_nhwc, 1);
  EXPECT_EQ(to_nchw, 3);
  // The graph's interface is unchanged; the channels-last values have permuted shapes.
  ASSERT_EQ(g.outputs.size(), 3u);
  for (const auto& n : g.nodes)
    if (n->op_type == "NhwcConv") {
      EXPECT_EQ(n->domain, "com.gearbox");
      const Shape& s = n->outputs[0]->type.shape;
      ASSERT_EQ(s.rank(), 4u);
      EXPECT_EQ(s.dims[3].value, 8);  // channels last
    }
}

TEST(LayoutNhwcPass, SameOutputsOnTheReferenceEngine) {
  OptimizerReport rep;
  expect_same_outputs(resnet_like, feeds(), fusion_and_layout(), 1e-5f, &rep);
  EXPECT_EQ(rep.matches("layout_nhwc"), 6);
}

// The rewritten graph on cpu.dnnl (channels-last oneDNN kernels) against the unrewritten one
// on cpu.ref.
TEST(LayoutNhwcPass, SameOutputsOnOneDnn) {
  Model m = resnet_like();
  auto rep = optimize(m, fusion_and_layout());
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  EXPECT_EQ(rep->matches("layout_nhwc"), 6);
  // Every channels-last node goes to oneDNN's kernels (none refused, none left to the run).
  auto part = partition(m, {"cpu.dnnl", "cpu.ref"});
  ASSERT_TRUE(part.ok()) << part.status().to_string();
  EXPECT_TRUE(part->decided_at_run_time.empty());
  for (const auto& n : m.graph->nodes)
    if (n->op_type.rfind("Nhwc", 0) == 0) EXPECT_EQ(n->engine, "cpu.dnnl") << n->name << " (" << n->op_type << ")";
  expect_same_outputs_as_unoptimized(resnet_like, std::move(m), "cpu.dnnl,cpu.ref", feeds(), 1e-4f);
}

TEST(LayoutNhwcPass, OffUnlessTheEnginesPreferOneDnn) {
  for (const std::string engines : {"cpu.ref", "cpu.ref,cpu.dnnl", "cpu.simd,cpu.ref"}) {
    Model m = resnet_like();
    auto rep = optimize(m, fusion_and_layout(engines));
    ASSERT_TRUE(rep.ok());
    EXPECT_EQ(count_op(*m.graph, "NhwcConv"), 0u) << engines;
    EXPECT_EQ(count_op(*m.graph, "Transpose"), 0u) << engines;
  }
  // On when cpu.dnnl serves the channels-last ops, wherever it stands before cpu.ref (the
  // default list puts cpu.simd, which has none, first).
  for (const std::string engines : {"cpu.dnnl,cpu.ref", "cpu.simd,cpu.dnnl,cpu.ref"}) {
    Model m = resnet_like();
    ASSERT_TRUE(optimize(m, fusion_and_layout(engines)).ok());
    EXPECT_GT(count_op(*m.graph, "NhwcConv"), 0u) << engines;
  }
  // Switchable by name like every pass.
  OptimizerOptions off = fusion_and_layout();
  off.disabled_passes.push_back("layout_nhwc");
  Model m = resnet_like();
  ASSERT_TRUE(optimize(m, off).ok());
  EXPECT_EQ(count_op(*m.graph, "NhwcConv"), 0u);
}

TEST(LayoutNhwcPass, LeavesLoneNodesAndUnsupportedFormsAlone) {
  {  // one conv between non-layout ops: two Transposes would buy nothing
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {1, 3, 9, 9});
    Value* s = b.op("Elu", {x});
    typed(s, {1, 3, 9, 9});
    b.output(b.op("Elu", {conv(b, s, 3, 4, 3, {1, 4, 9, 9}, 1)}));  // Elu: not absorbed by conv_fusion
    Model m = b.take();
    ASSERT_TRUE(optimize(m, fusion_and_layout()).ok());
    EXPECT_EQ(count_op(*m.graph, "Conv"), 1u);
    EXPECT_EQ(count_op(*m.graph, "Transpose"), 0u);
  }
  {  // MaxPool with Indices (NCHW offsets), a residual that broadcasts, a 1-D conv: all stay
    GraphBuilder b;
    Value* x = b.input("x", DType::F32, {1, 4, 9, 9});
    Node* mp = b.node("MaxPool", {conv(b, x, 4, 4, 3, {1, 4, 9, 9}, 1)}, 2, {{"kernel_shape", attr_ints({2, 2})}});
    typed(mp->outputs[0], {1, 4, 8, 8});
    mp->outputs[1]->type.dtype = DType::I64;
    Value* c = conv(b, mp->outputs[0], 4, 4, 3, {1, 4, 8, 8}, 2);
    Value* bias = b.constant("z", random_tensor({4, 1, 1}, 3));
    Value* add = b.op("Add", {c, bias});
    typed(add, {1, 4, 8, 8});
    Value* y1 = b.input("y1", DType::F32, {1, 2, 9});
    Value* c1 = b.op("Conv", {y1, b.constant("w1", random_tensor({2, 2, 3}, 4))});
    c1->type.dtype = DType::F32;
    c1->type.shape = Shape::from_dims({1, 2, 7});
    b.output(add);
    b.output(mp->outputs[1]);
    b.output(c1);
    Model m = b.take();
    ASSERT_TRUE(optimize(m, fusion_and_layout()).ok());
    EXPECT_EQ(count_op(*m.graph, "NhwcConv") + count_op(*m.graph, "NhwcMaxPool"), 0u);
    EXPECT_EQ(count_op(*m.graph, "Transpose"), 0u);
  }
}

// The rewritten graph through the .gbm format (what `gearbox compile` writes), then run.
TEST(LayoutNhwcPass, SurvivesAGbmRoundTrip) {
  Model m = resnet_like();
  auto rep = optimize(m, fusion_and_layout());
  ASSERT_TRUE(rep.ok());
  Model loaded;
  ASSERT_NO_FATAL_FAILURE(gbm_round_trip(m, &loaded));
  EXPECT_EQ(count_op(*loaded.graph, "NhwcConv"), 3u);
  expect_same_outputs_as_unoptimized(resnet_like, std::move(loaded), std::string(kEngineRef), feeds(), 1e-5f);
}

}  // namespace
}  // namespace gearbox
