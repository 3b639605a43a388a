// Clean-up passes: dead-node elimination, removal of no-op operators and common-
// subexpression elimination.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "graph/passes/passes.h"

namespace gearbox::passes {

namespace {

// Removes node n whose only data output `y` equals its input `x`.
bool bypass(Graph& g, GraphIndex& idx, Node* n, Value* x, Value* y, std::unordered_set<const Node*>& dead) {
  if (!idx.pinned(y)) {
    replace_uses(g, y, x);
    n->inputs.clear();  // a dead node must not count as a reader in later matches
    dead.insert(n);
    return true;
  }
  // y is a graph output: let x's producer write y directly, when x is private to n.
  Node* p = idx.producer(x);
  if (!p || idx.read_by_subgraph(y) || idx.pinned(x) || idx.num_uses(x) != 1 || dead.count(p)) return false;
  for (Value*& o : p->outputs)
    if (o == x) o = y;
  y->producer = p;
  n->inputs.clear();
  dead.insert(n);
  return true;
}

// A Pad whose pads are all 0 (torch exports one before every AvgPool2d without padding, which
// leaves that pool outside the channels-last region of the Conv before it): its pads attribute
// (opsets 2-10) or its pads input, an initializer or a Constant node's value (this pass runs
// before constant folding).
bool pads_all_zero(const GraphIndex& idx, const Node& n) {
  std::vector<int64_t> pads;
  if (n.opset < 11) {
    pads = attr_ints(n, "pads");
  } else if (n.inputs.size() > 1 && n.inputs[1]) {
    const Tensor* t = nullptr;
    if (is_const(n.inputs[1])) t = &n.inputs[1]->initializer;
    else if (const Node* c = idx.producer(n.inputs[1]);
             c && c->op_type == "Constant" && c->domain.empty() && c->attrs.count("value"))
      t = &c->attrs.at("value").t;
    if (!t || !t->defined() || t->dtype() != DType::I64) return false;
    pads.assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  }
  return !pads.empty() && std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
}

}  // namespace

Result<int> eliminate_dead_nodes(Graph& g, const PassContext&) {
  std::unordered_set<const Value*> live(g.outputs.begin(), g.outputs.end());
  std::unordered_set<const Node*> dead;
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    Node* n = it->get();
    bool used = false;
    for (const Value* o : n->outputs)
      if (o && live.count(o)) used = true;
    if (!used) {
      dead.insert(n);
      continue;
    }
    for (const Value* v : n->inputs)
      if (v) live.insert(v);
    for_each_subgraph(*n, [&](const Graph& sg) { collect_reads(sg, live); });
  }
  erase_nodes(g, dead);
  drop_unused_initializers(g);
  return static_cast<int>(dead.size());
}

Result<int> remove_noop_ops(Graph& g, const PassContext&) {
  GraphIndex idx(g);
  std::unordered_set<const Node*> dead;
  for (auto& up : g.nodes) {
    Node* n = up.get();
    if (!n->domain.empty() || n->inputs.empty() || !n->inputs[0] || n->outputs.empty() || !n->outputs[0]) continue;
    Value* x = n->inputs[0];
    Value* y = n->outputs[0];
    bool noop = false;
    if (n->op_type == "Identity") {
      noop = true;
    } else if (n->op_type == "Dropout") {
      // Inference: Y = X unless training_mode (input 2, opset 12+) is true. The mask output
      // would need a constant of its own, so a Dropout whose mask is read stays.
      const bool mask_used =
          n->outputs.size() > 1 && n->outputs[1] && (idx.num_uses(n->outputs[1]) > 0 || idx.pinned(n->outputs[1]));
      bool training = false;
      if (n->inputs.size() > 2 && n->inputs[2]) {
        auto t = const_scalar(n->inputs[2]);
        training = !t || *t != 0;
      }
      noop = !mask_used && !training;
    } else if (n->op_type == "Cast") {
      const int64_t to = attr_int(*n, "to", -1);
      noop = x->type.kind == ValueType::Kind::Tensor && x->type.dtype != DType::Undefined &&
             static_cast<int64_t>(x->type.dtype) == to;
    } else if (n->op_type == "Pad") {
      noop = pads_all_zero(idx, *n);
    }
    if (noop && bypass(g, idx, n, x, y, dead)) idx.rebuild();
  }
  erase_nodes(g, dead);
  return static_cast<int>(dead.size());
}

namespace {

// A key that is equal for two nodes computing the same thing; empty when the node must not
// be merged (random ops, subgraphs, large tensor attributes).
std::string cse_key(const Node& n) {
  if (is_random_op(n) || has_subgraph(n) || n.inputs.empty()) return {};
  std::string k = n.domain;
  k += '|';
  k += n.op_type;
  k += '|';
  k += std::to_string(n.opset);
  k += '|';
  for (const Value* v : n.inputs) {
    k += std::to_string(reinterpret_cast<uintptr_t>(v));
    k += ',';
  }
  k += '|';
  k += std::to_string(n.outputs.size());
  for (const auto& [name, a] : n.attrs) {
    k += '|';
    k += name;
    k += ':';
    k += std::to_string(static_cast<int>(a.type));
    k += ':';
    switch (a.type) {
      case AttrType::Float: {
        uint32_t bits;
        std::memcpy(&bits, &a.f, 4);
        k += std::to_string(bits);
        break;
      }
      case AttrType::Int:
        k += std::to_string(a.i);
        break;
      case AttrType::String:
        k += std::to_string(a.s.size());
        k += ':';
        k += a.s;
        break;
      case AttrType::Ints:
        for (int64_t x : a.ints) k += std::to_string(x) + ",";
        break;
      case AttrType::Floats:
        for (float f : a.floats) {
          uint32_t bits;
          std::memcpy(&bits, &f, 4);
          k += std::to_string(bits) + ",";
        }
        break;
      case AttrType::Strings:
        for (const auto& s : a.strings) {
          k += std::to_string(s.size());
          k += ':';
          k += s;
          k += ',';
        }
        break;
      default:
        return {};  // tensors, graphs: not compared
    }
  }
  return k;
}

}  // namespace

Result<int> eliminate_common_subexpressions(Graph& g, const PassContext& ctx) {
  GraphIndex idx(g);
  std::unordered_map<std::string, Node*> seen;
  std::unordered_set<const Node*> dead;
  for (auto& up : g.nodes) {
    Node* n = up.get();
    const std::string key = cse_key(*n);
    if (key.empty()) continue;
    auto [it, fresh] = seen.emplace(key, n);
    if (fresh) continue;
    Node* first = it->second;
    bool ok = true;
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      if (!n->outputs[i]) continue;
      if (!first->outputs[i] || idx.pinned(n->outputs[i])) ok = false;
    }
    if (!ok) continue;
    for (size_t i = 0; i < n->outputs.size(); ++i)
      if (n->outputs[i]) replace_uses(g, n->outputs[i], first->outputs[i]);
    dead.insert(n);
    record_replacement(ctx, *n, *first);
  }
  erase_nodes(g, dead);
  return static_cast<int>(dead.size());
}

}  // namespace gearbox::passes
