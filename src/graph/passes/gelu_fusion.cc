// GELU fusion -> com.gearbox.Gelu(x), approximate = "none" | "tanh".
//   erf form:  0.5 * x * (1 + Erf(x / sqrt(2)))       (or x * 0.7071...)
//   tanh form: 0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * Pow(x, 3))))
// The final products may be grouped ((x * t) * 0.5), ((t * 0.5) * x) or ((x * 0.5) * t).
#include <cmath>

#include "graph/passes/fusion_util.h"
#include "graph/passes/passes.h"

namespace gearbox::passes {

namespace {

// The other operand of binary `n` when one operand is a constant close to c.
Value* operand_with_const(Node* n, double c) {
  if (!n || n->inputs.size() != 2) return nullptr;
  if (const_near(n->inputs[1], c)) return n->inputs[0];
  if (const_near(n->inputs[0], c)) return n->inputs[1];
  return nullptr;
}

// From `inner` = the Erf/Tanh output: (1 + inner), then 0.5 * x * that. Appends the matched
// nodes and returns the output, or nullptr.
Value* match_tail(const GraphIndex& idx, Value* x, Value* inner, std::vector<Node*>& nodes) {
  Node* add1 = sole_consumer_op(idx, inner, "Add");
  if (!add1 || operand_with_const(add1, 1.0) != inner || !add1->outputs[0]) return nullptr;
  Value* t = add1->outputs[0];
  nodes.push_back(add1);
  Node* m1 = sole_consumer_op(idx, t, "Mul");
  if (!m1 || !m1->outputs[0]) return nullptr;
  Value* other = other_input(m1, t);
  if (other == x) {
    // (x * t) * 0.5
    Node* m2 = sole_consumer_op(idx, m1->outputs[0], "Mul");
    if (!m2 || operand_with_const(m2, 0.5) != m1->outputs[0] || !m2->outputs[0]) return nullptr;
    nodes.push_back(m1);
    nodes.push_back(m2);
    return m2->outputs[0];
  }
  if (other && const_near(other, 0.5)) {
    // (t * 0.5) * x
    Node* m2 = sole_consumer_op(idx, m1->outputs[0], "Mul");
    if (!m2 || other_input(m2, m1->outputs[0]) != x || !m2->outputs[0]) return nullptr;
    nodes.push_back(m1);
    nodes.push_back(m2);
    return m2->outputs[0];
  }
  // (x * 0.5) * t
  Node* half = other ? idx.producer(other) : nullptr;
  if (half && half->domain.empty() && half->op_type == "Mul" && operand_with_const(half, 0.5) == x &&
      idx.sole_consumer(other) == m1) {
    nodes.push_back(half);
    nodes.push_back(m1);
    return m1->outputs[0];
  }
  return nullptr;
}

// Erf(x / sqrt2) or Erf(x * 1/sqrt2): returns x and appends the Div/Mul and the Erf.
Value* match_erf_head(const GraphIndex& idx, Node* erf, std::vector<Node*>& nodes) {
  Node* d = erf->inputs.empty() ? nullptr : idx.producer(erf->inputs[0]);
  if (!d || !d->domain.empty() || idx.sole_consumer(erf->inputs[0]) != erf) return nullptr;
  Value* x = nullptr;
  if (d->op_type == "Div" && d->inputs.size() == 2 && const_near(d->inputs[1], std::sqrt(2.0))) x = d->inputs[0];
  if (d->op_type == "Mul") x = operand_with_const(d, 1.0 / std::sqrt(2.0));
  if (!x) return nullptr;
  nodes.push_back(d);
  nodes.push_back(erf);
  return x;
}

// Tanh(sqrt(2/pi) * (x + 0.044715 * Pow(x, 3))): returns x and appends the five nodes.
Value* match_tanh_head(const GraphIndex& idx, Node* tanh, std::vector<Node*>& nodes) {
  Node* scale = tanh->inputs.empty() ? nullptr : producer_op(idx, tanh->inputs[0], "Mul");
  if (!scale || idx.sole_consumer(tanh->inputs[0]) != tanh) return nullptr;
  Value* sum = operand_with_const(scale, std::sqrt(2.0 / M_PI));
  Node* add = producer_op(idx, sum, "Add");
  if (!add || idx.sole_consumer(sum) != scale || add->inputs.size() != 2) return nullptr;
  for (int side = 0; side < 2; ++side) {
    Value* x = add->inputs[side];
    Value* cubic = add->inputs[1 - side];
    Node* mul = producer_op(idx, cubic, "Mul");
    if (!mul || idx.sole_consumer(cubic) != add) continue;
    Value* p = operand_with_const(mul, 0.044715);
    Node* pow = producer_op(idx, p, "Pow");
    if (!pow || idx.sole_consumer(p) != mul || pow->inputs[0] != x || !const_near(pow->inputs[1], 3.0)) continue;
    nodes.insert(nodes.end(), {pow, mul, add, scale, tanh});
    return x;
  }
  return nullptr;
}

}  // namespace

Result<int> fuse_gelu(Graph& g, const PassContext& ctx) {
  GraphIndex idx(g);
  std::unordered_set<const Node*> dead;
  std::vector<Node*> order;
  for (auto& n : g.nodes) order.push_back(n.get());
  int matches = 0;
  for (Node* n : order) {
    if (!n->domain.empty() || (n->op_type != "Erf" && n->op_type != "Tanh") || n->outputs.size() != 1 ||
        !n->outputs[0] || dead.count(n))
      continue;
    const bool tanh = n->op_type == "Tanh";
    std::vector<Node*> nodes;
    Value* x = tanh ? match_tanh_head(idx, n, nodes) : match_erf_head(idx, n, nodes);
    if (!x) continue;
    Value* out = match_tail(idx, x, n->outputs[0], nodes);
    if (!out || any_dead(nodes, dead)) continue;
    AttributeMap attrs{{"approximate", attr_string(tanh ? "tanh" : "none")}};
    replace_with_fused(ctx, g, nodes, idx.producer(out), "Gelu", {x}, out, std::move(attrs), dead);
    ++matches;
  }
  erase_nodes(g, dead);
  return matches;
}

}  // namespace gearbox::passes
