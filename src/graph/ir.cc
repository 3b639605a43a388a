// Graph construction helpers and the topological sort.
#include "graph/ir.h"

#include <unordered_map>
#include <unordered_set>

namespace gearbox {

std::string to_string(const ValueType& t) {
  switch (t.kind) {
    case ValueType::Kind::Tensor:
      return std::string(dtype_name(t.dtype)) + to_string(t.shape);
    case ValueType::Kind::Sequence:
      return "sequence<" + (t.elem ? to_string(*t.elem) : std::string("?")) + ">";
    case ValueType::Kind::Optional:
      return "optional<" + (t.elem ? to_string(*t.elem) : std::string("?")) + ">";
  }
  return "?";
}

Value* Graph::add_value(std::string name) {
  values.push_back(std::make_unique<Value>());
  Value* v = values.back().get();
  v->name = std::move(name);
  if (!v->name.empty()) by_name_[v->name] = v;
  return v;
}

Node* Graph::add_node(std::string op_type, std::string name) {
  nodes.push_back(std::make_unique<Node>());
  Node* n = nodes.back().get();
  n->op_type = std::move(op_type);
  n->name = std::move(name);
  return n;
}

Value* Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

size_t Graph::total_nodes() const {
  size_t n = nodes.size();
  for (const auto& node : nodes)
    for_each_subgraph(*node, [&](const Graph& sg) { n += sg.total_nodes(); });
  return n;
}

void collect_reads(const Graph& g, std::unordered_set<const Value*>& out) {
  for (const auto& n : g.nodes) {
    for (const Value* v : n->inputs)
      if (v) out.insert(v);
    for_each_subgraph(*n, [&](const Graph& sg) { collect_reads(sg, out); });
  }
  for (const Value* v : g.outputs) out.insert(v);
}

Status topological_sort(Graph& graph) {
  // Kahn's algorithm over this graph's nodes; values produced outside this graph
  // (inputs, initializers, outer scope) are ready from the start.
  std::unordered_map<const Value*, Node*> producer;
  for (auto& n : graph.nodes)
    for (Value* out : n->outputs)
      if (out) producer[out] = n.get();
  std::unordered_map<Node*, int> pending;
  std::unordered_map<Node*, std::vector<Node*>> users;
  // Subgraph nodes may read values produced by this graph's nodes: they are dependencies
  // of the node that holds the subgraph.
  for (auto& n : graph.nodes) {
    std::unordered_set<const Value*> deps(n->inputs.begin(), n->inputs.end());
    for_each_subgraph(*n, [&](const Graph& sg) { collect_reads(sg, deps); });
    int count = 0;
    std::unordered_set<Node*> seen;
    for (const Value* in : deps) {
      if (!in) continue;
      auto it = producer.find(in);
      if (it == producer.end() || it->second == n.get()) continue;
      if (seen.insert(it->second).second) {
        users[it->second].push_back(n.get());
        ++count;
      }
    }
    pending[n.get()] = count;
  }
  std::vector<std::unique_ptr<Node>> sorted;
  sorted.reserve(graph.nodes.size());
  std::unordered_map<Node*, std::unique_ptr<Node>*> slot;
  for (auto& n : graph.nodes) slot[n.get()] = &n;
  // Stable: repeatedly take the first ready node in original order.
  std::vector<Node*> order;
  for (auto& n : graph.nodes) order.push_back(n.get());
  std::vector<bool> done(order.size(), false);
  std::unordered_map<Node*, size_t> pos;
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = i;
  size_t emitted = 0, scan_from = 0;
  while (emitted < order.size()) {
    size_t i = scan_from;
    while (i < order.size() && (done[i] || pending[order[i]] != 0)) ++i;
    if (i == order.size()) {
      for (size_t j = 0; j < order.size(); ++j)
        if (!done[j])
          return make_error(ErrorCode::GRAPH_CYCLE, "graph '", graph.name, "': node '", order[j]->name, "' (",
                            order[j]->op_type, ") is part of a cycle or waits on a value nobody produces");
    }
    done[i] = true;
    ++emitted;
    sorted.push_back(std::move(*slot[order[i]]));
    size_t earliest = order.size();
    for (Node* u : users[order[i]])
      if (--pending[u] == 0) earliest = std::min(earliest, pos[u]);
    scan_from = std::min(earliest, i + 1);
    while (scan_from < order.size() && done[scan_from]) ++scan_from;
  }
  graph.nodes = std::move(sorted);
  return Status::OK();
}

}  // namespace gearbox
