// If / Loop / Scan / SequenceMap kernels, driven through KernelContext with a stand-in
// subgraph runner (so these tests check the kernels' plumbing: iteration counts, carried
// values, stacking and directions) independently of the executor. Expected values are
// hand-computed from the ONNX spec's pseudo-code.
#include "runtime/control_flow.h"

#include <gtest/gtest.h>

#include "graph/ir.h"
#include "kernels/kernel.h"

namespace gearbox {
namespace {

std::shared_ptr<Graph> make_body(const std::string& name, size_t n_in, size_t n_out) {
  auto g = std::make_shared<Graph>();
  g->name = name;
  for (size_t i = 0; i < n_in; ++i) g->inputs.push_back(g->add_value(name + "_in" + std::to_string(i)));
  for (size_t i = 0; i < n_out; ++i) g->outputs.push_back(g->add_value(name + "_out" + std::to_string(i)));
  return g;
}

Attribute graph_attr(std::shared_ptr<Graph> g) {
  Attribute a;
  a.type = AttrType::Graph;
  a.g = std::move(g);
  return a;
}

float f0(const RuntimeValue& v) { return static_cast<float>(v.tensor().at_double(0)); }

struct Call {
  std::string op;
  int opset = 17;
  std::vector<RuntimeValue> inputs;
  AttributeMap attrs;
  size_t num_outputs = 1;
  SubgraphRunner runner;
};

Result<std::vector<RuntimeValue>> run(Call& c) {
  register_control_flow_kernels();
  register_control_flow_kernels();  // idempotent
  const KernelDef* def = KernelRegistry::global().find("", c.op, c.opset, kEngineRef, DType::Undefined);
  if (!def) return make_error(ErrorCode::OP_UNSUPPORTED, c.op);
  std::vector<const RuntimeValue*> ptrs;
  for (auto& v : c.inputs) ptrs.push_back(v.is_none() ? nullptr : &v);
  std::vector<RuntimeValue> outs(c.num_outputs);
  KernelContext ctx(OpInfo{"n", c.op, "", c.opset, &c.attrs}, ptrs, &outs, std::vector<bool>(c.num_outputs, true),
                    c.runner);
  GBX_RETURN_IF_ERROR(def->fn(ctx));
  return outs;
}

TEST(ControlFlow, RegistersOnce) {
  register_control_flow_kernels();
  register_control_flow_kernels();
  int n = 0;
  for (const auto& d : KernelRegistry::global().all()) n += d.op_type == "Loop";
  EXPECT_EQ(n, 1);
}

TEST(ControlFlow, IfPicksBranch) {
  auto then_g = make_body("then", 0, 1), else_g = make_body("else", 0, 1);
  Call c{"If", 16, {RuntimeValue(Tensor::scalar<bool>(false))}, {}, 1, {}};
  c.attrs["then_branch"] = graph_attr(then_g);
  c.attrs["else_branch"] = graph_attr(else_g);
  c.runner = [](const Graph& g, std::vector<RuntimeValue>) -> Result<std::vector<RuntimeValue>> {
    return std::vector<RuntimeValue>{RuntimeValue(Tensor::scalar<float>(g.name == "then" ? 1.f : 2.f))};
  };
  auto r = run(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(f0(r.value()[0]), 2.f);
}

// Body: (i, cond, x) -> (cond_out = i < 2, x + i, scan = x * 10).
Result<std::vector<RuntimeValue>> loop_body(const Graph&, std::vector<RuntimeValue> in) {
  int64_t i = static_cast<int64_t>(in[0].tensor().at_double(0));
  float x = f0(in[2]);
  return std::vector<RuntimeValue>{RuntimeValue(Tensor::scalar<bool>(i < 2)), RuntimeValue(Tensor::scalar<float>(x + float(i))),
                                   RuntimeValue(Tensor::from_vector<float>({x * 10}))};
}

TEST(ControlFlow, LoopCountOnlyIgnoresConditionOutput) {
  Call c{"Loop", 13, {RuntimeValue(Tensor::scalar<int64_t>(5)), RuntimeValue(), RuntimeValue(Tensor::scalar<float>(1))},
         {}, 2, loop_body};
  c.attrs["body"] = graph_attr(make_body("b", 3, 3));
  auto r = run(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // x: 1 -> 1 -> 2 -> 4 -> 7 -> 11; scans record x before each step.
  EXPECT_EQ(f0(r.value()[0]), 11.f);
  const Tensor& s = r.value()[1].tensor();
  ASSERT_EQ(s.dims(), (Dims{5, 1}));
  const float want[] = {10, 10, 20, 40, 70};
  for (int k = 0; k < 5; ++k) EXPECT_EQ(s.at_double(k), want[k]);
}

TEST(ControlFlow, LoopWithConditionStops) {
  Call c{"Loop", 13,
         {RuntimeValue(Tensor::scalar<int64_t>(10)), RuntimeValue(Tensor::scalar<bool>(true)),
          RuntimeValue(Tensor::scalar<float>(1))},
         {}, 2, loop_body};
  c.attrs["body"] = graph_attr(make_body("b", 3, 3));
  auto r = run(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // Iterations i = 0, 1, 2 run (cond_out is false after i = 2).
  EXPECT_EQ(f0(r.value()[0]), 4.f);
  EXPECT_EQ(r.value()[1].tensor().dims(), (Dims{3, 1}));
}

TEST(ControlFlow, LoopZeroIterationsGivesEmptyScan) {
  Call c{"Loop", 13,
         {RuntimeValue(Tensor::scalar<int64_t>(0)), RuntimeValue(), RuntimeValue(Tensor::scalar<float>(3))}, {}, 2,
         loop_body};
  auto body = make_body("b", 3, 3);
  body->outputs[2]->type.dtype = DType::F32;
  body->outputs[2]->type.shape = Shape(std::vector<Dim>{Dim(1)});
  c.attrs["body"] = graph_attr(body);
  auto r = run(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(f0(r.value()[0]), 3.f);
  EXPECT_EQ(r.value()[1].tensor().dims(), (Dims{0, 1}));
}

// Scan body: (sum, x_row) -> (sum + x_row, sum + x_row) as a running sum.
Result<std::vector<RuntimeValue>> cumsum_body(const Graph&, std::vector<RuntimeValue> in) {
  const Tensor& s = in[0].tensor();
  const Tensor& x = in[1].tensor();
  Tensor o(DType::F32, s.dims());
  for (int64_t k = 0; k < s.numel(); ++k) o.data<float>()[k] = s.data<float>()[k] + x.data<float>()[k];
  return std::vector<RuntimeValue>{RuntimeValue(o), RuntimeValue(o)};
}

TEST(ControlFlow, ScanRunningSumAlongAxis1Reversed) {
  // x is [2, 3] scanned along axis 1 in reverse: slices are columns 2, 1, 0.
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Call c{"Scan", 11, {RuntimeValue(Tensor::from_vector<float>({0, 0})), RuntimeValue(x)}, {}, 2, cumsum_body};
  c.attrs["body"] = graph_attr(make_body("s", 2, 2));
  Attribute m;
  m.type = AttrType::Int;
  m.i = 1;
  c.attrs["num_scan_inputs"] = m;
  Attribute axes;
  axes.type = AttrType::Ints;
  axes.ints = {1};
  c.attrs["scan_input_axes"] = axes;
  Attribute dirs = axes;
  dirs.ints = {1};
  c.attrs["scan_input_directions"] = dirs;
  c.attrs["scan_output_axes"] = axes;  // stack the running sums as columns
  auto r = run(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& fin = r.value()[0].tensor();
  EXPECT_EQ(fin.at_double(0), 6);
  EXPECT_EQ(fin.at_double(1), 15);
  const Tensor& s = r.value()[1].tensor();
  ASSERT_EQ(s.dims(), (Dims{2, 3}));
  // Column t holds the sum after step t: {3, 5, 6} and {6, 11, 15}.
  const float want[] = {3, 5, 6, 6, 11, 15};
  for (int k = 0; k < 6; ++k) EXPECT_EQ(s.at_double(k), want[k]) << k;
}

TEST(ControlFlow, ScanOpset8BatchAxis) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {1, 3, 2});  // batch 1, 3 steps of [2]
  Call c{"Scan", 8, {RuntimeValue(), RuntimeValue(Tensor::from_vector<float>({0, 0}, {1, 2})), RuntimeValue(x)}, {}, 2,
         cumsum_body};
  c.attrs["body"] = graph_attr(make_body("s", 2, 2));
  Attribute m;
  m.type = AttrType::Int;
  m.i = 1;
  c.attrs["num_scan_inputs"] = m;
  auto r = run(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value()[0].tensor().dims(), (Dims{1, 2}));
  EXPECT_EQ(r.value()[0].tensor().at_double(0), 9);
  EXPECT_EQ(r.value()[0].tensor().at_double(1), 12);
  EXPECT_EQ(r.value()[1].tensor().dims(), (Dims{1, 3, 2}));
  EXPECT_EQ(r.value()[1].tensor().at_double(2), 4);
}

TEST(ControlFlow, SequenceMapAppliesBodyPerElement) {
  TensorSequence seq{DType::F32, {Tensor::scalar<float>(1), Tensor::scalar<float>(2)}};
  Call c{"SequenceMap", 17, {RuntimeValue(seq), RuntimeValue(Tensor::scalar<float>(10))}, {}, 1, {}};
  c.attrs["body"] = graph_attr(make_body("m", 2, 1));
  c.runner = [](const Graph&, std::vector<RuntimeValue> in) -> Result<std::vector<RuntimeValue>> {
    return std::vector<RuntimeValue>{RuntimeValue(Tensor::scalar<float>(f0(in[0]) + f0(in[1])))};
  };
  auto r = run(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_TRUE(r.value()[0].is_sequence());
  const auto& out = r.value()[0].sequence().tensors;
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].at_double(0), 11);
  EXPECT_EQ(out[1].at_double(0), 12);
}

TEST(ControlFlow, IfWithoutRunnerIsAnError) {
  Call c{"If", 16, {RuntimeValue(Tensor::scalar<bool>(true))}, {}, 1, {}};
  auto r = run(c);
  ASSERT_FALSE(r.ok());
}

}  // namespace
}  // namespace gearbox
