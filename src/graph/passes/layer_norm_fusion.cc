// LayerNormalization fusion, from the decomposition exporters emit for opsets < 17 (and
// opset-18 graphs rewritten from them, axes then a constant input):
//   m = ReduceMean(X, axes=[-1]); d = X - m; v = ReduceMean(Pow(d, 2), axes=[-1])
//   Y = d / Sqrt(v + eps) * gamma + beta
// -> com.gearbox.LayerNormalization(X, gamma, beta) (axis -1, epsilon eps).
// SkipLayerNormalization fusion: LayerNorm(A + B) with the Add read only by the LayerNorm
// -> com.gearbox.SkipLayerNormalization(A, B, gamma, beta).
#include "graph/passes/fusion_util.h"
#include "graph/passes/passes.h"

namespace gearbox::passes {

namespace {

// ReduceMean over the last axis only, keeping dims: axes an attribute (opsets < 18) or a
// constant second input (18).
bool is_last_axis_mean(const Node* n, const Value* x) {
  if (!n || n->op_type != "ReduceMean" || !n->domain.empty() || n->inputs.empty() || n->inputs[0] != x) return false;
  if (attr_int(*n, "keepdims", 1) != 1) return false;
  std::vector<int64_t> axes = attr_ints(*n, "axes");
  if (n->inputs.size() == 2) {
    const Value* a = n->inputs[1];
    if (!is_const(a) || a->initializer.dtype() != DType::I64 || a->initializer.numel() != 1) return false;
    axes = {a->initializer.data<int64_t>()[0]};
  } else if (n->inputs.size() != 1) {
    return false;
  }
  if (axes.size() != 1) return false;
  if (axes[0] == -1) return true;
  auto d = static_dims(x);
  return d && axes[0] == static_cast<int64_t>(d->size()) - 1;
}

// The constant 1-D operand of a binary node whose other operand is v.
Value* const_vector_operand(Node* n, const Value* v) {
  Value* c = n ? other_input(n, v) : nullptr;
  return c && is_const(c) && c->initializer.rank() == 1 ? c : nullptr;
}

}  // namespace

Result<int> fuse_layer_norm(Graph& g, const PassContext& ctx) {
  GraphIndex idx(g);
  std::unordered_set<const Node*> dead;
  std::vector<Node*> order;
  for (auto& n : g.nodes) order.push_back(n.get());
  int matches = 0;
  for (Node* rm1 : order) {
    if (rm1->op_type != "ReduceMean" || dead.count(rm1) || rm1->inputs.empty() || !rm1->outputs[0]) continue;
    Value* x = rm1->inputs[0];
    if (!is_last_axis_mean(rm1, x)) continue;
    Node* sub = sole_consumer_op(idx, rm1->outputs[0], "Sub");
    if (!sub || sub->inputs[0] != x || sub->inputs[1] != rm1->outputs[0] || !sub->outputs[0]) continue;
    Value* d = sub->outputs[0];
    const auto& users = idx.consumers(d);
    if (users.size() != 2 || idx.pinned(d)) continue;
    Node* pow = nullptr;
    Node* div = nullptr;
    for (Node* u : users) {
      if (u->op_type == "Pow" && u->domain.empty() && u->inputs[0] == d && const_near(u->inputs[1], 2.0)) pow = u;
      if (u->op_type == "Div" && u->domain.empty() && u->inputs[0] == d) div = u;
    }
    if (!pow || !div) continue;
    Node* rm2 = sole_consumer_op(idx, pow->outputs[0], "ReduceMean");
    if (!rm2 || !is_last_axis_mean(rm2, pow->outputs[0])) continue;
    Node* add_eps = sole_consumer_op(idx, rm2->outputs[0], "Add");
    Value* eps_v = add_eps ? other_input(add_eps, rm2->outputs[0]) : nullptr;
    auto eps = const_scalar(eps_v);
    if (!eps) continue;
    Node* sqrt = sole_consumer_op(idx, add_eps->outputs[0], "Sqrt");
    if (!sqrt || sole_consumer_op(idx, sqrt->outputs[0], "Div") != div || div->inputs[1] != sqrt->outputs[0]) continue;
    Node* mul = sole_consumer_op(idx, div->outputs[0], "Mul");
    Value* gamma = const_vector_operand(mul, div->outputs[0]);
    if (!gamma) continue;
    Node* add = sole_consumer_op(idx, mul->outputs[0], "Add");
    Value* beta = const_vector_operand(add, mul->outputs[0]);
    if (!beta || !add->outputs[0]) continue;
    std::vector<Node*> nodes{rm1, sub, pow, rm2, add_eps, sqrt, div, mul, add};
    if (any_dead(nodes, dead)) continue;
    AttributeMap attrs{{"axis", attr_int(-1)}, {"epsilon", attr_float(static_cast<float>(*eps))}};
    replace_with_fused(ctx, g, nodes, add, "LayerNormalization", {x, gamma, beta}, add->outputs[0], std::move(attrs),
                       dead);
    ++matches;
  }
  erase_nodes(g, dead);
  return matches;
}

Result<int> fuse_skip_layer_norm(Graph& g, const PassContext& ctx) {
  GraphIndex idx(g);
  std::unordered_set<const Node*> dead;
  std::vector<Node*> order;
  for (auto& n : g.nodes) order.push_back(n.get());
  int matches = 0;
  for (Node* ln : order) {
    if (ln->op_type != "LayerNormalization" || ln->domain != kGearboxDomain || ln->inputs.size() != 3 || dead.count(ln))
      continue;
    Node* add = producer_op(idx, ln->inputs[0], "Add");
    if (!add || idx.sole_consumer(ln->inputs[0]) != ln || add->inputs.size() != 2 || dead.count(add)) continue;
    // A residual sum of two activations, not a bias add.
    if (is_const(add->inputs[0]) || is_const(add->inputs[1])) continue;
    replace_with_fused(ctx, g, {add, ln}, ln, "SkipLayerNormalization",
                       {add->inputs[0], add->inputs[1], ln->inputs[1], ln->inputs[2]}, ln->outputs[0], ln->attrs, dead);
    ++matches;
  }
  erase_nodes(g, dead);
  return matches;
}

}  // namespace gearbox::passes
