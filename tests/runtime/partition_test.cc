// Partitioning (runtime/partitioner.h): each node goes to the first engine of the priority
// list with a kernel for its op, opset and static dtype, unless --engine forces one; regions
// are runs of consecutive nodes on one engine. The expected placements follow from a test
// engine whose kernels are known by construction: "test.part" serves Relu (float32) and
// Sigmoid (float64) only.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "base/strings.h"
#include "graph/pass_test_util.h"
#include "runtime/partitioner.h"
#include "runtime/profiler.h"
#include "runtime/session.h"

namespace gearbox {
namespace {

using testing::GraphBuilder;
using testing::random_tensor;

constexpr const char* kTestEngine = "test.part";

// Real Relu (so a model placed on this engine still computes the right values).
Status part_relu(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor y(x.dtype(), x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = std::max(0.f, x.data<float>()[i]);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}
Status part_sigmoid(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor y(x.dtype(), x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) y.data<double>()[i] = 1.0 / (1.0 + std::exp(-x.data<double>()[i]));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}
GBX_REGISTER_KERNEL({"", "Relu", 14, 17, "test.part", {DType::F32}, part_relu});
GBX_REGISTER_KERNEL({"", "Sigmoid", 13, 17, "test.part", {DType::F64}, part_sigmoid});

std::vector<std::string> engines(const std::string& list) { return split_list(list); }

// Overrides that must parse.
std::vector<EngineOverride> overrides(const std::vector<std::string>& specs) {
  auto ov = parse_engine_overrides(specs);
  EXPECT_TRUE(ov.ok()) << ov.status().to_string();
  return ov.ok() ? std::move(ov).value() : std::vector<EngineOverride>{};
}

// x -> Relu_0 -> Neg_1 -> Relu_2 (float32 [2,3]).
Model relu_neg_relu(DType dt = DType::F32) {
  GraphBuilder b;
  Value* x = b.input("x", dt, {2, 3});
  Value* y = b.op("Relu", {x});
  y = b.op("Neg", {y});
  b.output(b.op("Relu", {y}));
  return b.take();
}

std::vector<std::string> placed(const Model& m) {
  std::vector<std::string> out;
  for (const auto& n : m.graph->nodes) out.push_back(n->engine);
  return out;
}

TEST(Partition, FirstEngineWithTheKernelWins) {
  Model m = relu_neg_relu();
  auto p = partition(m, engines("test.part,cpu.ref"));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  // test.part has no Neg: it falls to cpu.ref, which splits the graph into three regions.
  EXPECT_EQ(placed(m), (std::vector<std::string>{"test.part", "cpu.ref", "test.part"}));
  ASSERT_EQ(p->regions.size(), 3u);
  EXPECT_EQ(p->regions[1].engine, "cpu.ref");
  EXPECT_EQ(p->regions[1].first_node, "Neg_1");
  EXPECT_EQ(p->regions[1].last_node, "Neg_1");
  EXPECT_EQ(p->nodes, 3u);
  EXPECT_EQ(p->node_counts.at("test.part"), 2u);
  EXPECT_EQ(p->node_counts.at("cpu.ref"), 1u);
  EXPECT_TRUE(p->forced.empty());
  EXPECT_EQ(p->summary(), "3 nodes, 3 regions: test.part 2, cpu.ref 1");

  // The order of the list decides: cpu.ref first takes every node, one region.
  auto q = partition(m, engines("cpu.ref,test.part"));
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(placed(m), (std::vector<std::string>{"cpu.ref", "cpu.ref", "cpu.ref"}));
  ASSERT_EQ(q->regions.size(), 1u);
  EXPECT_EQ(q->regions[0].nodes, 3u);
  EXPECT_EQ(q->regions[0].first_node, "Relu_0");
  EXPECT_EQ(q->regions[0].last_node, "Relu_2");
}

TEST(Partition, StaticDtypeDecides) {
  GraphBuilder b;
  b.output(b.op("Sigmoid", {b.input("x", DType::F32, {4})}));
  Model f32 = b.take();
  ASSERT_TRUE(partition(f32, engines("test.part,cpu.ref")).ok());
  EXPECT_EQ(f32.graph->nodes[0]->engine, "cpu.ref");  // test.part's Sigmoid is float64 only

  GraphBuilder b64;
  b64.output(b64.op("Sigmoid", {b64.input("x", DType::F64, {4})}));
  Model f64 = b64.take();
  ASSERT_TRUE(partition(f64, engines("test.part,cpu.ref")).ok());
  EXPECT_EQ(f64.graph->nodes[0]->engine, "test.part");
}

TEST(Partition, ForcedByOpType) {
  Model m = relu_neg_relu();
  auto ov = parse_engine_overrides({"Relu=cpu.ref"});
  ASSERT_TRUE(ov.ok());
  auto p = partition(m, engines("test.part,cpu.ref"), *ov);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(placed(m), (std::vector<std::string>{"cpu.ref", "cpu.ref", "cpu.ref"}));
  EXPECT_EQ(p->forced.size(), 2u);
  EXPECT_EQ(p->regions.size(), 1u);
}

TEST(Partition, NodeNameBeatsOpType) {
  for (const auto& specs : {std::vector<std::string>{"Relu=cpu.ref", "Relu_2=test.part"},
                            std::vector<std::string>{"Relu_2=test.part", "Relu=cpu.ref"}}) {
    Model m = relu_neg_relu();
    auto ov = parse_engine_overrides(specs);
    ASSERT_TRUE(ov.ok());
    // cpu.ref first in the list, so only the override can put Relu_2 on test.part.
    auto p = partition(m, engines("cpu.ref,test.part"), *ov);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(placed(m), (std::vector<std::string>{"cpu.ref", "cpu.ref", "test.part"})) << specs[0];
    EXPECT_EQ(p->regions.size(), 2u);
  }
}

// An op-type override whose only node is claimed by a name override still matched something.
TEST(Partition, OpTypeOverrideBeatenByNameIsNotUnmatched) {
  GraphBuilder b;
  b.output(b.op("Neg", {b.op("Relu", {b.input("x", DType::F32, {2})})}));
  Model m = b.take();
  auto p = partition(m, engines("cpu.ref"), overrides({"Relu=cpu.ref", "Relu_0=test.part"}));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(placed(m), (std::vector<std::string>{"test.part", "cpu.ref"}));
  EXPECT_EQ(p->forced.size(), 1u);
}

TEST(Partition, QualifiedOpTypeMatches) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {2, 3});
  b.output(b.node("Gelu", {x}, 1, {}, "com.gearbox")->outputs[0]);
  Model m = b.take();
  auto ov = parse_engine_overrides({"com.gearbox.Gelu=cpu.ref"});
  ASSERT_TRUE(ov.ok());
  auto p = partition(m, engines("cpu.simd,cpu.ref"), *ov);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(m.graph->nodes[0]->engine, "cpu.ref");
  EXPECT_EQ(p->forced.size(), 1u);
}

TEST(Partition, ForcedEngineWithoutTheKernel) {
  Model m = relu_neg_relu();
  auto ov = parse_engine_overrides({"Neg=test.part"});
  ASSERT_TRUE(ov.ok());
  auto p = partition(m, engines("test.part,cpu.ref"), *ov);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::ENGINE_LACKS_KERNEL);
  const std::string& msg = p.status().message();
  for (const char* part : {"Neg_1", "Neg", "opset 17", "test.part", "engines with it: cpu.ref"})
    EXPECT_NE(msg.find(part), std::string::npos) << part << " not in: " << msg;

  // The engine has the op, not the dtype: named too.
  GraphBuilder b;
  b.output(b.op("Relu", {b.input("x", DType::F64, {4})}));
  Model f64 = b.take();
  auto q = partition(f64, engines("cpu.ref"), overrides({"Relu=test.part"}));
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), ErrorCode::ENGINE_LACKS_KERNEL);
  EXPECT_NE(q.status().message().find("for dtype float64"), std::string::npos) << q.status().message();
}

TEST(Partition, UnknownEngine) {
  Model m = relu_neg_relu();
  auto p = partition(m, engines("cpu.ref"), overrides({"Relu=cpu.nope"}));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::ENGINE_UNKNOWN);
  EXPECT_NE(p.status().message().find("'cpu.nope' is not an engine"), std::string::npos) << p.status().message();
  // The valid engines are listed.
  for (const char* e : {"cpu.ref", "cpu.dnnl", "cpu.simd"})
    EXPECT_NE(p.status().message().find(e), std::string::npos) << p.status().message();
}

TEST(Partition, OverrideMatchingNoNode) {
  Model m = relu_neg_relu();
  auto p = partition(m, engines("cpu.ref"), overrides({"Rleu=cpu.ref"}));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::ENGINE_OVERRIDE_UNMATCHED);
  EXPECT_NE(p.status().message().find("no node is named 'Rleu'"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("close names: Relu"), std::string::npos) << p.status().message();
}

TEST(Partition, MalformedOverride) {
  for (const char* bad : {"Relu", "=cpu.ref", "Relu="}) {
    auto ov = parse_engine_overrides({bad});
    ASSERT_FALSE(ov.ok()) << bad;
    EXPECT_EQ(ov.status().code(), ErrorCode::USAGE);
    EXPECT_NE(ov.status().message().find("NODE_OR_OPTYPE=ENGINE"), std::string::npos) << ov.status().message();
  }
  auto twice = parse_engine_overrides({"Relu=cpu.ref", "Relu=test.part"});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().code(), ErrorCode::USAGE);
  EXPECT_TRUE(parse_engine_overrides({"Relu=cpu.ref", "Relu=cpu.ref"}).ok());
}

TEST(Partition, OpNoEngineSupports) {
  GraphBuilder b;
  b.output(b.op("NoSuchOp", {b.input("x", DType::F32, {4})}));
  Model m = b.take();
  auto p = partition(m, engines("test.part,cpu.ref"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::OP_UNSUPPORTED);
  const std::string& msg = p.status().message();
  for (const char* part :
       {"NoSuchOp_0", "operator NoSuchOp", "opset 17", "engines tried (test.part, cpu.ref)", "re-export"})
    EXPECT_NE(msg.find(part), std::string::npos) << part << " not in: " << msg;

  // An op another engine (not in the list) has: that engine is the fix.
  Model r = relu_neg_relu();
  auto q = partition(r, engines("test.part"));
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), ErrorCode::OP_UNSUPPORTED);
  EXPECT_NE(q.status().message().find("Neg_1"), std::string::npos) << q.status().message();
  EXPECT_NE(q.status().message().find("cpu.ref"), std::string::npos) << q.status().message();
}

TEST(Partition, PlacedEnginesKeptOnlyWhenAskedAndUsable) {
  Model m = relu_neg_relu();
  m.graph->nodes[0]->engine = "cpu.ref";   // usable: kept
  m.graph->nodes[2]->engine = "cpu.gone";  // not in the list: placed again
  auto p = partition(m, engines("test.part,cpu.ref"), {}, /*keep_placed=*/true);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(placed(m), (std::vector<std::string>{"cpu.ref", "cpu.ref", "test.part"}));
  EXPECT_EQ(p->reassigned, 1u);
  // Without keep_placed an earlier choice counts for nothing.
  auto q = partition(m, engines("test.part,cpu.ref"));
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(placed(m), (std::vector<std::string>{"test.part", "cpu.ref", "test.part"}));
  EXPECT_EQ(q->reassigned, 0u);
}

// y = If(c, then: Relu(x), else: Neg(x)): subgraph nodes read the outer x.
Model if_relu_neg() {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {2});
  Value* c = b.input("c", DType::Bool, {});
  auto branch = [&](const std::string& name, const std::string& op) {
    auto g = std::make_shared<Graph>();
    g->name = name;
    g->parent = &b.graph();
    Node* n = g->add_node(op, name + "_" + op);
    n->opset = 17;
    n->inputs = {x};
    Value* out = g->add_value(name + "_out");
    out->type.dtype = DType::F32;
    out->type.shape = Shape::from_dims({2});
    out->producer = n;
    n->outputs = {out};
    g->outputs = {out};
    Attribute a;
    a.type = AttrType::Graph;
    a.g = g;
    return a;
  };
  Node* iff = b.node("If", {c}, 1, {{"then_branch", branch("then", "Relu")}, {"else_branch", branch("else", "Neg")}});
  b.output(iff->outputs[0]);
  return b.take();
}

TEST(Partition, SubgraphNodesArePlacedWithRegionsOfTheirOwn) {
  Model m = if_relu_neg();
  auto p = partition(m, engines("test.part,cpu.ref"));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const Node& iff = *m.graph->nodes[0];
  EXPECT_EQ(iff.engine, "cpu.ref");  // control flow runs on the reference engine
  EXPECT_EQ(iff.attrs.at("then_branch").g->nodes[0]->engine, "test.part");
  EXPECT_EQ(iff.attrs.at("else_branch").g->nodes[0]->engine, "cpu.ref");
  EXPECT_EQ(p->nodes, 3u);
  ASSERT_EQ(p->regions.size(), 3u);  // one per graph: a region never spans graphs
  std::set<std::string> graphs;
  for (const PartitionRegion& r : p->regions) graphs.insert(r.graph + ":" + r.engine);
  EXPECT_EQ(graphs, (std::set<std::string>{"test:cpu.ref", "then:test.part", "else:cpu.ref"}));

  // Forcing reaches into subgraphs, and the session runs the branch on the forced engine.
  SessionOptions o;
  o.engine = "test.part,cpu.ref";
  o.optimizer.enabled = false;
  o.optimizer.use_env = false;
  o.engine_overrides = {"Relu=cpu.ref"};
  auto s = Session::create(if_relu_neg(), o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ((*s)->model().graph->nodes[0]->attrs.at("then_branch").g->nodes[0]->engine, "cpu.ref");
  Profiler prof;
  auto r = (*s)->run({{"x", Tensor::from_vector<float>({-1.f, 2.f})}, {"c", Tensor::scalar<bool>(true)}}, &prof);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].at_double(0), 0.0);
  EXPECT_EQ((*r)[0].at_double(1), 2.0);
  bool relu_seen = false;
  for (const OpRecord& op : prof.ops())
    if (op.op_type == "Relu") {
      relu_seen = true;
      EXPECT_EQ(op.engine, "cpu.ref");
    }
  EXPECT_TRUE(relu_seen);
}

// x -> Conv -> Relu -> Conv, 3x3 pads 1, [1,4,8,8].
Model conv_relu_conv() {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {1, 4, 8, 8});
  AttributeMap a{{"pads", testing::attr_ints({1, 1, 1, 1})}};
  Value* y = b.op("Conv", {x, b.constant("w0", random_tensor({4, 4, 3, 3}, 1))}, a);
  y = b.op("Relu", {y});
  b.output(b.op("Conv", {y, b.constant("w1", random_tensor({4, 4, 3, 3}, 2))}, a));
  return b.take();
}

TEST(Partition, RegionsOfConvReluConv) {
  Model m = conv_relu_conv();
  auto p = partition(m, engines("cpu.dnnl,cpu.ref"), overrides({"Relu=cpu.ref"}));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(placed(m), (std::vector<std::string>{"cpu.dnnl", "cpu.ref", "cpu.dnnl"}));
  ASSERT_EQ(p->regions.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(p->regions[i].nodes, 1u);
    EXPECT_EQ(p->regions[i].first, i);
    EXPECT_EQ(p->regions[i].graph, "test");
  }
}

// Which engine ran each op type, from the profiler's records.
std::map<std::string, std::set<std::string>> engines_that_ran(const Session& s,
                                                              const std::map<std::string, Tensor>& feeds,
                                                              std::vector<Tensor>* out) {
  Profiler prof;
  auto r = s.run(feeds, &prof);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (r.ok()) *out = std::move(r).value();
  std::map<std::string, std::set<std::string>> ran;
  for (const OpRecord& op : prof.ops()) ran[op.op_type].insert(op.engine);
  return ran;
}

TEST(Partition, ForcedConvRunsOnItsEngineWithTheSameOutputs) {
  SessionOptions base;
  base.engine = "cpu.dnnl,cpu.simd,cpu.ref";
  base.optimizer.enabled = false;  // Conv stays Conv (no fusion, no layout change)
  base.optimizer.use_env = false;
  const std::map<std::string, Tensor> feeds{{"x", random_tensor({1, 4, 8, 8}, 7)}};

  auto def = Session::create(conv_relu_conv(), base);
  ASSERT_TRUE(def.ok()) << def.status().to_string();
  std::vector<Tensor> want;
  auto ran_default = engines_that_ran(**def, feeds, &want);
  EXPECT_EQ(ran_default["Conv"], (std::set<std::string>{"cpu.dnnl"}));

  SessionOptions forced = base;
  forced.engine_overrides = {"Conv=cpu.ref"};
  auto s = Session::create(conv_relu_conv(), forced);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ((*s)->partition().forced.size(), 2u);
  std::vector<Tensor> got;
  auto ran = engines_that_ran(**s, feeds, &got);
  EXPECT_EQ(ran["Conv"], (std::set<std::string>{"cpu.ref"}));
  EXPECT_EQ(ran["Relu"], ran_default["Relu"]);  // unforced nodes are placed as before

  ASSERT_EQ(want.size(), 1u);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(want[0].dims(), got[0].dims());
  for (int64_t i = 0; i < want[0].numel(); ++i)
    ASSERT_NEAR(want[0].at_double(i), got[0].at_double(i), 1e-4 * std::max(1.0, std::fabs(want[0].at_double(i))))
        << "element " << i;
}

// A fused reference kernel runs its inner ops on the first engine that accepts them, so a
// FusedConv forced onto cpu.ref runs its Conv on cpu.dnnl: the profile names both engines, and
// only cpu.ref when the session has no other engine.
TEST(Partition, FusedReferenceKernelReportsTheEnginesOfItsInnerOps) {
  const std::map<std::string, Tensor> feeds{{"x", random_tensor({1, 4, 8, 8}, 7)}};
  auto fused_conv_engines = [&](const std::string& engines) {
    SessionOptions o;
    o.engine = engines;
    o.optimizer.use_env = false;
    o.optimizer.disabled_passes = {"layout_nhwc", "layout_blocked"};  // Conv+Relu stays FusedConv
    o.engine_overrides = {"com.gearbox.FusedConv=cpu.ref"};
    auto s = Session::create(conv_relu_conv(), o);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (!s.ok()) return std::set<std::string>{};
    std::vector<Tensor> out;
    return engines_that_ran(**s, feeds, &out)["com.gearbox.FusedConv"];
  };
  EXPECT_EQ(fused_conv_engines("cpu.dnnl,cpu.ref"), (std::set<std::string>{"cpu.ref+cpu.dnnl"}));
  EXPECT_EQ(fused_conv_engines("cpu.ref"), (std::set<std::string>{"cpu.ref"}));
}

// A forced node runs on its engine only: a dtype it lacks is an error at the run, where an
// unforced node would fall through to the next engine.
TEST(Partition, ForcedNodeDoesNotFallThrough) {
  auto build = [] {
    GraphBuilder b;
    b.output(b.op("Sigmoid", {b.input("x", DType::Undefined, {2})}));  // dtype unknown until the run
    return b.take();
  };
  SessionOptions o;
  o.engine = "test.part,cpu.ref";
  o.optimizer.enabled = false;
  o.optimizer.use_env = false;
  const std::map<std::string, Tensor> feeds{{"x", Tensor::from_vector<float>({0.f, 1.f})}};

  auto free = Session::create(build(), o);
  ASSERT_TRUE(free.ok()) << free.status().to_string();
  EXPECT_EQ((*free)->model().graph->nodes[0]->engine, "test.part");
  auto r = (*free)->run(feeds);
  ASSERT_TRUE(r.ok()) << r.status().to_string();  // float32 falls through to cpu.ref
  EXPECT_NEAR((*r)[0].at_double(1), 1.0 / (1.0 + std::exp(-1.0)), 1e-6);

  o.engine_overrides = {"Sigmoid=test.part"};
  auto forced = Session::create(build(), o);
  ASSERT_TRUE(forced.ok()) << forced.status().to_string();
  auto f = (*forced)->run(feeds);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::DTYPE_UNSUPPORTED);
  EXPECT_NE(f.status().message().find("forced by --engine"), std::string::npos) << f.status().message();
}

TEST(Partition, SessionReportsUsageErrors) {
  SessionOptions o;
  o.engine = "cpu.ref";
  o.engine_overrides = {"Relu"};
  auto s = Session::create(relu_neg_relu(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::USAGE);
}

}  // namespace
}  // namespace gearbox
