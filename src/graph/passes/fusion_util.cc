// Fusion helpers.
#include "graph/passes/fusion_util.h"

#include "kernels/op_descriptor.h"

namespace gearbox::passes {

Node* sole_consumer_op(const GraphIndex& idx, const Value* v, const std::string& op) {
  Node* n = idx.sole_consumer(v);
  if (!n || !n->domain.empty() || (!op.empty() && n->op_type != op) || has_subgraph(*n)) return nullptr;
  return n;
}

Node* producer_op(const GraphIndex& idx, const Value* v, const std::string& op) {
  Node* n = v ? idx.producer(v) : nullptr;
  if (!n || !n->domain.empty() || n->op_type != op) return nullptr;
  return n;
}

Value* other_input(const Node* n, const Value* v) {
  if (n->inputs.size() != 2) return nullptr;
  if (n->inputs[0] == v && n->inputs[1] != v) return n->inputs[1];
  if (n->inputs[1] == v && n->inputs[0] != v) return n->inputs[0];
  return nullptr;
}

bool match_activation(const GraphIndex& idx, Value* v, ActivationMatch* out) {
  const auto& users = idx.consumers(v);
  if (idx.pinned(v)) return false;
  // Silu: Mul(v, Sigmoid(v)), v read by exactly those two nodes.
  if (users.size() == 2) {
    Node* sig = nullptr;
    Node* mul = nullptr;
    for (Node* u : users) {
      if (!u->domain.empty()) return false;
      if (u->op_type == "Sigmoid") sig = u;
      if (u->op_type == "Mul") mul = u;
    }
    if (!sig || !mul || !sig->outputs[0] || sole_consumer_op(idx, sig->outputs[0], "Mul") != mul ||
        other_input(mul, v) != sig->outputs[0])
      return false;
    *out = {std::string(activation_name(ActivationKind::Silu)), {}, {sig, mul}, mul->outputs[0]};
    return true;
  }
  Node* n = idx.sole_consumer(v);
  if (!n || n->outputs.size() != 1 || !n->outputs[0] || n->inputs.empty() || n->inputs[0] != v) return false;
  // The op descriptor says whether n is a fusable activation; its parameters come from n.
  ActivationKind kind = op_descriptor(n->domain, n->op_type).activation;
  std::vector<float> params;
  switch (kind) {
    case ActivationKind::None:
    case ActivationKind::Silu:  // a pattern (above), not an op
    case ActivationKind::GeluTanh:
      return false;
    case ActivationKind::Gelu: {
      const auto it = n->attrs.find("approximate");
      if (it != n->attrs.end() && it->second.s == "tanh") kind = ActivationKind::GeluTanh;
      break;
    }
    case ActivationKind::Relu:
    case ActivationKind::Sigmoid:
    case ActivationKind::Tanh:
    case ActivationKind::HardSwish:
      break;  // no parameters
    case ActivationKind::HardSigmoid:
      params = {attr_float(*n, "alpha", 0.2f), attr_float(*n, "beta", 0.5f)};
      break;
    case ActivationKind::LeakyRelu:
      params = {attr_float(*n, "alpha", 0.01f)};
      break;
    case ActivationKind::Clip: {
      float lo = -3.4028234e38f, hi = 3.4028234e38f;
      if (n->opset < 11) {
        lo = attr_float(*n, "min", lo);
        hi = attr_float(*n, "max", hi);
      } else {
        if (n->inputs.size() > 1 && n->inputs[1]) {
          auto s = const_scalar(n->inputs[1]);
          if (!s || n->inputs[1]->initializer.dtype() != DType::F32) return false;
          lo = static_cast<float>(*s);
        }
        if (n->inputs.size() > 2 && n->inputs[2]) {
          auto s = const_scalar(n->inputs[2]);
          if (!s || n->inputs[2]->initializer.dtype() != DType::F32) return false;
          hi = static_cast<float>(*s);
        }
      }
      params = {lo, hi};
      break;
    }
  }
  *out = {std::string(activation_name(kind)), params, {n}, n->outputs[0]};
  return true;
}

Epilogue match_epilogue(const GraphIndex& idx, Node* head, const std::function<bool(const Value*)>& take_addend,
                        const std::unordered_set<const Node*>& dead) {
  Epilogue ep;
  ep.nodes = {head};
  ep.output = head->outputs[0];
  if (Node* add = take_addend ? sole_consumer_op(idx, ep.output, "Add") : nullptr) {
    Value* z = other_input(add, ep.output);
    if (z && take_addend(z) && add->outputs[0] && !dead.count(add)) {
      ep.addend = z;
      ep.nodes.push_back(add);
      ep.output = add->outputs[0];
    }
  }
  ActivationMatch act;
  if (match_activation(idx, ep.output, &act) && !any_dead(act.nodes, dead)) {
    ep.nodes.insert(ep.nodes.end(), act.nodes.begin(), act.nodes.end());
    ep.output = act.output;
    ep.activation_attrs["activation"] = attr_string(act.name);
    if (!act.params.empty()) ep.activation_attrs["activation_params"] = attr_floats(act.params);
  }
  return ep;
}

Node* replace_with_fused(const PassContext& ctx, Graph& g, const std::vector<Node*>& replaced, Node* last, const std::string& op_type,
                         std::vector<Value*> inputs, Value* output, AttributeMap attrs,
                         std::unordered_set<const Node*>& dead) {
  Node* f = insert_node_before(g, last, op_type, last->name + "/" + op_type);
  f->domain = kGearboxDomain;
  f->opset = 1;
  f->inputs = std::move(inputs);
  f->attrs = std::move(attrs);
  f->outputs = {output};
  output->producer = f;
  for (Node* n : replaced) {
    dead.insert(n);
    record_replacement(ctx, *n, *f);
  }
  return f;
}

bool any_dead(const std::vector<Node*>& nodes, const std::unordered_set<const Node*>& dead) {
  for (const Node* n : nodes)
    if (dead.count(n)) return true;
  return false;
}

}  // namespace gearbox::passes
