// Graph-editing helpers for the passes.
#include "graph/passes/pass_util.h"

#include <algorithm>
#include <cmath>

#include "kernels/op_descriptor.h"

namespace gearbox::passes {

namespace {
const std::vector<Node*> kNoConsumers;
}

bool has_subgraph(const Node& n) {
  for (const auto& [k, a] : n.attrs)
    if (a.g || !a.graphs.empty()) return true;
  return false;
}

void record_replacement(const PassContext& ctx, const Node& old, const Node& by) {
  if (ctx.record) ctx.record->replaced.push_back({old.name, old.qualified_op(), by.name, by.qualified_op(), {}});
}

void record_folding(const PassContext& ctx, const Node& old, const std::string& constant) {
  if (ctx.record) ctx.record->replaced.push_back({old.name, old.qualified_op(), {}, {}, constant});
}

void record_twin(const PassContext& ctx, const Value& twin, const Value& of, std::string layout,
                 std::vector<int64_t> perm, bool merge_last_two) {
  if (ctx.record) ctx.record->twins.push_back({twin.name, of.name, std::move(layout), std::move(perm), merge_last_two});
}

bool is_random_op(const Node& n) { return op_descriptor(n.domain, n.op_type).kind == OpKind::Random; }

void GraphIndex::rebuild() {
  consumers_.clear();
  producers_.clear();
  outputs_.clear();
  subgraph_reads_.clear();
  for (auto& n : g_.nodes) {
    for (const Value* v : n->inputs)
      if (v) consumers_[v].push_back(n.get());
    for (const Value* v : n->outputs)
      if (v) producers_[v] = n.get();
    for_each_subgraph(*n, [&](const Graph& sg) { collect_reads(sg, subgraph_reads_); });
  }
  outputs_.insert(g_.outputs.begin(), g_.outputs.end());
}

const std::vector<Node*>& GraphIndex::consumers(const Value* v) const {
  auto it = consumers_.find(v);
  return it == consumers_.end() ? kNoConsumers : it->second;
}

Node* GraphIndex::sole_consumer(const Value* v) const {
  const auto& c = consumers(v);
  return c.size() == 1 && !pinned(v) ? c[0] : nullptr;
}

Node* GraphIndex::producer(const Value* v) const {
  auto it = producers_.find(v);
  return it == producers_.end() ? nullptr : it->second;
}

std::optional<double> const_scalar(const Value* v) {
  if (!is_const(v)) return std::nullopt;
  const Tensor& t = v->initializer;
  if (t.numel() != 1 || t.dtype() == DType::String) return std::nullopt;
  return t.at_double(0);
}

std::optional<std::vector<int64_t>> const_ints(const Value* v) {
  if (!is_const(v)) return std::nullopt;
  const Tensor& t = v->initializer;
  std::vector<int64_t> out;
  if (t.dtype() == DType::I64) {
    out.assign(t.data<int64_t>(), t.data<int64_t>() + t.numel());
  } else if (t.dtype() == DType::I32) {
    for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.data<int32_t>()[i]);
  } else {
    return std::nullopt;
  }
  return out;
}

bool const_near(const Value* v, double want, double rel_tol) {
  auto s = const_scalar(v);
  return s && std::fabs(*s - want) <= rel_tol * std::max(1.0, std::fabs(want));
}

std::optional<Dims> static_dims(const Value* v) {
  if (!v || v->type.kind != ValueType::Kind::Tensor) return std::nullopt;
  return v->type.shape.concrete();
}

int64_t attr_int(const Node& n, const std::string& name, int64_t def) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? def : it->second.i;
}

float attr_float(const Node& n, const std::string& name, float def) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? def : it->second.f;
}

std::vector<int64_t> attr_ints(const Node& n, const std::string& name) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? std::vector<int64_t>{} : it->second.ints;
}

void make_constant(Graph& g, Value* v, Tensor t) {
  v->type.kind = ValueType::Kind::Tensor;
  v->type.dtype = t.dtype();
  v->type.shape = Shape::from_dims(t.dims());
  v->producer = nullptr;
  v->is_initializer = true;
  v->initializer = std::move(t);
  g.initializers.push_back(v);
}

Value* add_constant(Graph& g, const std::string& name, Tensor t) {
  std::string unique = name;
  for (int i = 1; g.find_value(unique); ++i) unique = name + "_" + std::to_string(i);
  Value* v = g.add_value(unique);
  make_constant(g, v, std::move(t));
  return v;
}

void replace_uses(Graph& g, const Value* from, Value* to) {
  for (auto& n : g.nodes)
    for (Value*& in : n->inputs)
      if (in == from) in = to;
}

void erase_nodes(Graph& g, const std::unordered_set<const Node*>& dead) {
  if (dead.empty()) return;
  g.nodes.erase(std::remove_if(g.nodes.begin(), g.nodes.end(), [&](const auto& n) { return dead.count(n.get()) > 0; }),
                g.nodes.end());
}

Node* insert_node_before(Graph& g, const Node* anchor, std::string op_type, std::string name) {
  Node* n = g.add_node(std::move(op_type), std::move(name));
  if (!anchor) return n;
  auto it = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const auto& p) { return p.get() == anchor; });
  if (it != g.nodes.end()) std::rotate(it, g.nodes.end() - 1, g.nodes.end());
  return n;
}

void drop_unused_initializers(Graph& g) {
  std::unordered_set<const Value*> reads;
  collect_reads(g, reads);
  g.initializers.erase(std::remove_if(g.initializers.begin(), g.initializers.end(),
                                      [&](Value* v) {
                                        if (reads.count(v)) return false;
                                        v->initializer = Tensor();  // release the memory
                                        return true;
                                      }),
                       g.initializers.end());
}

Result<std::vector<RuntimeValue>> run_reference_kernel(const Node& n, const std::vector<RuntimeValue>& inputs) {
  const auto& registry = KernelRegistry::global();
  std::vector<const RuntimeValue*> ins;
  for (size_t i = 0; i < n.inputs.size(); ++i) ins.push_back(n.inputs[i] ? &inputs[i] : nullptr);
  // Any reference kernel of the op names the input whose dtype decides; then the one for that dtype.
  const KernelDef* def = registry.find(n.domain, n.op_type, n.opset, kEngineRef, DType::Undefined);
  if (def) {
    const size_t di = static_cast<size_t>(def->dtype_input);
    const DType dt = di < ins.size() && ins[di] && ins[di]->is_tensor() ? ins[di]->tensor().dtype() : DType::Undefined;
    def = registry.find(n.domain, n.op_type, n.opset, kEngineRef, dt);
  }
  if (!def) return make_error(ErrorCode::OP_UNSUPPORTED, "no reference kernel for ", n.qualified_op());
  std::vector<RuntimeValue> outs(n.outputs.size());
  std::vector<bool> wanted;
  for (const Value* o : n.outputs) wanted.push_back(o != nullptr);
  KernelContext ctx(OpInfo{n.name, n.op_type, n.domain, n.opset, &n.attrs}, ins, &outs, wanted);
  GBX_RETURN_IF_ERROR(def->fn(ctx));
  return outs;
}

}  // namespace gearbox::passes
