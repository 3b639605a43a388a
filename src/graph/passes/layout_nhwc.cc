// Layout pass: regions of 2-D convolutions and pools run channels-last (NHWC).
//
// oneDNN's convolutions and pools are 1.3-7x faster on NHWC (or blocked) activations than on
// NCHW ones with a reorder in and out on every run (measured on this machine's AVX-512 CPU,
// docs/graph_engine.md "Layout pass"), and NHWC is a plain layout: a tensor in it is an
// ordinary [N, H, W, C] tensor, the boundaries are ordinary Transposes, every engine and the
// .gbm file handle it as they handle any tensor.
//
// Rewritten (float32, rank-4 input): Conv and com.gearbox.FusedConv -> com.gearbox.NhwcConv
// (FusedConv's inputs and attributes; X, Z and Y channels-last, W unchanged), MaxPool without
// Indices -> NhwcMaxPool, AveragePool -> NhwcAveragePool (2-D windows), GlobalAveragePool ->
// NhwcGlobalAveragePool. Connected regions of at least two such nodes are rewritten; a lone
// node would pay two Transposes for nothing. A value entering a region gets one
// Transpose(perm 0,2,3,1); a value leaving it (read outside, or a graph output) gets
// Transpose(perm 0,3,1,2) back into the original value, so the graph's interface and every
// other reader are unchanged. The optimizer runs this pass only when the session's engines
// prefer cpu.dnnl (OptimizerOptions::engines): the reference kernels of the Nhwc ops are
// transposing wrappers, correct but slower.
#include <map>
#include <numeric>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graph/passes/passes.h"

namespace gearbox::passes {
namespace {

bool f32_rank4(const Value* v) {
  return v && v->type.kind == ValueType::Kind::Tensor && v->type.dtype == DType::F32 && v->type.shape.ranked &&
         v->type.shape.rank() == 4;
}

// The NHWC op a node becomes, or "" when it stays.
std::string nhwc_op(const Node& n) {
  if (n.outputs.empty() || !n.outputs[0] || n.inputs.empty() || !f32_rank4(n.inputs[0]) || !f32_rank4(n.outputs[0]))
    return "";
  for (size_t i = 1; i < n.outputs.size(); ++i)
    if (n.outputs[i]) return "";  // MaxPool's Indices count in NCHW order
  const bool onnx = n.domain.empty();
  if ((onnx && n.op_type == "Conv") || (n.domain == kGearboxDomain && n.op_type == "FusedConv")) {
    if (n.inputs.size() < 2 || !n.inputs[1] || !n.inputs[1]->type.shape.ranked || n.inputs[1]->type.shape.rank() != 4)
      return "";
    if (n.inputs.size() > 3 && n.inputs[3]) {
      // The residual is transposed with X: it must have Y's shape (not broadcast).
      const Value* z = n.inputs[3];
      if (!f32_rank4(z)) return "";
      for (size_t i = 0; i < 4; ++i) {
        const Dim &zd = z->type.shape.dims[i], &yd = n.outputs[0]->type.shape.dims[i];
        if (!(zd == yd) || (!zd.known() && zd.symbol.empty())) return "";  // equal and known or named
      }
    }
    return "NhwcConv";
  }
  if (!onnx) return "";
  if (n.op_type == "MaxPool" || n.op_type == "AveragePool") {
    const Attribute* k = n.attrs.count("kernel_shape") ? &n.attrs.at("kernel_shape") : nullptr;
    if (!k || k->ints.size() != 2) return "";
    // AveragePool-19's dilations: the NHWC pool kernels have none (the NCHW reference does).
    if (n.op_type == "AveragePool" && n.opset >= 19 && n.attrs.count("dilations"))
      for (int64_t d : n.attrs.at("dilations").ints)
        if (d != 1) return "";
    return "Nhwc" + n.op_type;
  }
  if (n.op_type == "GlobalAveragePool") return "NhwcGlobalAveragePool";
  return "";
}

Shape permuted(const Shape& s, const std::vector<int64_t>& perm) {
  std::vector<Dim> d;
  for (int64_t p : perm) d.push_back(s.dims[static_cast<size_t>(p)]);
  return Shape(d);
}

const std::vector<int64_t> kToNhwc{0, 2, 3, 1};
const std::vector<int64_t> kToNchw{0, 3, 1, 2};

}  // namespace

Result<int> layout_nhwc(Graph& g, const PassContext& ctx) {
  GraphIndex idx(g);
  std::unordered_map<const Node*, std::string> target;
  Regions regions;
  for (auto& n : g.nodes) {
    std::string op = nhwc_op(*n);
    if (op.empty()) continue;
    target[n.get()] = op;
    regions.parent[n.get()] = n.get();
  }
  // Activation inputs (X, and FusedConv's residual Z) join regions.
  for (auto& [n, op] : target)
    for (Value* in : activation_inputs(n))
      if (Node* p = idx.producer(in); p && target.count(p)) regions.join(n, p);
  std::unordered_map<const Node*, int> region_size;
  for (auto& [n, op] : target) ++region_size[regions.find(n)];
  for (auto it = target.begin(); it != target.end();)
    it = region_size[regions.find(it->first)] < 2 ? target.erase(it) : std::next(it);
  if (target.empty()) return 0;

  std::vector<Node*> order;
  for (auto& n : g.nodes)
    if (target.count(n.get())) order.push_back(n.get());
  std::unordered_map<const Value*, Value*> nhwc;  // NCHW value -> its channels-last twin
  std::unordered_set<const Node*> dead;
  auto transpose = [&](const Node* anchor, Value* in, Value* out, const std::vector<int64_t>& perm, int opset) {
    Node* t = insert_node_before(g, anchor, "Transpose", out->name + "/Transpose");
    t->opset = opset;
    t->inputs = {in};
    t->outputs = {out};
    t->attrs["perm"] = attr_ints(perm);
    out->producer = t;
  };
  int onnx_opset = 13;  // the model's ai.onnx opset for the Transposes (unchanged since opset 1)
  for (auto& n : g.nodes)
    if (n->domain.empty() && n->opset > 0) onnx_opset = n->opset;
  for (Node* n : order) {
    std::vector<Value*> inputs = n->inputs;
    for (Value* in : activation_inputs(n)) {
      if (nhwc.count(in)) continue;
      Value* twin = g.add_value(in->name + "/nhwc");
      twin->type = in->type;
      twin->type.shape = permuted(in->type.shape, kToNhwc);
      transpose(n, in, twin, kToNhwc, onnx_opset);
      record_twin(ctx, *twin, *in, "nhwc", kToNchw, false);
      nhwc[in] = twin;
    }
    inputs[0] = nhwc.at(inputs[0]);
    if (inputs.size() > 3 && inputs[3]) inputs[3] = nhwc.at(inputs[3]);
    Value* y = n->outputs[0];
    Value* y_twin = g.add_value(y->name + "/nhwc");
    y_twin->type = y->type;
    y_twin->type.shape = permuted(y->type.shape, kToNhwc);
    Node* r = insert_node_before(g, n, target.at(n), n->name + "/nhwc");
    r->domain = kGearboxDomain;
    r->opset = 1;
    r->inputs = std::move(inputs);
    r->outputs = {y_twin};
    r->attrs = n->attrs;
    y_twin->producer = r;
    record_replacement(ctx, *n, *r);
    record_twin(ctx, *y_twin, *y, "nhwc", kToNchw, false);
    nhwc[y] = y_twin;
    bool read_outside = idx.pinned(y);
    for (const Node* c : idx.consumers(y)) {
      if (!target.count(c)) read_outside = true;
      // A region node reading y other than as an activation (a Conv weight) needs NCHW too.
      else if (c->inputs[0] != y && !(c->inputs.size() > 3 && c->inputs[3] == y)) read_outside = true;
    }
    if (read_outside)
      transpose(n, y_twin, y, kToNchw, onnx_opset);
    else
      y->producer = nullptr;
    dead.insert(n);
  }
  erase_nodes(g, dead);
  return static_cast<int>(order.size());
}

}  // namespace gearbox::passes
