// Helpers shared by the graph passes: who reads each value, which values must survive
// (graph outputs, values read by subgraphs), reading small constants, rewiring uses and
// removing or inserting nodes, and running a reference kernel at compile time.
//
// Passes work on one graph (the model's main graph). Subgraphs (If/Loop/Scan bodies) read
// outer values by pointer, so a value a subgraph reads is never removed or renamed, and a
// node that holds a subgraph is never fused or folded (dead-node elimination may still drop
// it when nothing reads its outputs).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "graph/ir.h"
#include "graph/optimizer.h"
#include "kernels/kernel.h"

namespace gearbox::passes {

// Inputs the passes get from the optimizer.
struct PassContext {
  size_t constant_fold_max_bytes = size_t(16) << 20;  // a folded output larger than this stays a node
  // The optimizer's record of the running pass (null outside the optimizer): what replaced
  // each removed node and which values were re-made in another layout. Passes fill it with
  // record_replacement / record_folding / record_twin; the optimizer adds the nodes a pass
  // removed without saying (they are simply gone).
  PassReport* record = nullptr;
};

// `old` (being removed) is now computed by `by`.
void record_replacement(const PassContext& ctx, const Node& old, const Node& by);
// `old` (being removed) was folded into the constant `constant`.
void record_folding(const PassContext& ctx, const Node& old, const std::string& constant);
// `twin` holds `of` in another layout (see LayoutTwin).
void record_twin(const PassContext& ctx, const Value& twin, const Value& of, std::string layout,
                 std::vector<int64_t> perm, bool merge_last_two);

// Who reads what, computed once per pass and refreshed with rebuild() after edits.
class GraphIndex {
 public:
  explicit GraphIndex(Graph& g) : g_(g) { rebuild(); }
  void rebuild();

  // The nodes reading v (a node reading v twice appears twice).
  const std::vector<Node*>& consumers(const Value* v) const;
  size_t num_uses(const Value* v) const { return consumers(v).size(); }
  bool is_graph_output(const Value* v) const { return outputs_.count(v) > 0; }
  bool read_by_subgraph(const Value* v) const { return subgraph_reads_.count(v) > 0; }
  // A value that must keep its identity: a graph output or read by a subgraph.
  bool pinned(const Value* v) const { return is_graph_output(v) || read_by_subgraph(v); }
  // The only consumer of v when v has exactly one use and is not pinned; else nullptr.
  Node* sole_consumer(const Value* v) const;
  // The node producing v in this graph, or nullptr (inputs, initializers, outer values).
  Node* producer(const Value* v) const;

 private:
  Graph& g_;
  std::unordered_map<const Value*, std::vector<Node*>> consumers_;
  std::unordered_map<const Value*, Node*> producers_;
  std::unordered_set<const Value*> outputs_, subgraph_reads_;
};

bool has_subgraph(const Node& n);
// An ai.onnx operator whose output differs between runs (random ops; Dropout may be in
// training mode): never folded or deduplicated.
bool is_random_op(const Node& n);  // the op descriptor's OpKind::Random

// v is an initializer (a constant tensor).
inline bool is_const(const Value* v) { return v && v->is_initializer && v->initializer.defined(); }
// The value of a constant with exactly one element, as double; nullopt otherwise.
std::optional<double> const_scalar(const Value* v);
// The constant integer tensor's values (int32/int64); nullopt otherwise.
std::optional<std::vector<int64_t>> const_ints(const Value* v);
// True when v is a one-element constant equal to `want` within a relative tolerance.
bool const_near(const Value* v, double want, double rel_tol = 1e-4);
// The tensor value type's static dims when fully known.
std::optional<Dims> static_dims(const Value* v);
// The tensor value's static rank, or -1 when unknown (or v is not a tensor).
inline int static_rank(const Value* v) {
  return v && v->type.kind == ValueType::Kind::Tensor && v->type.shape.ranked ? static_cast<int>(v->type.shape.rank())
                                                                              : -1;
}

// The inputs the layout passes convert between layouts: X, and a convolution's residual Z
// (input 3) when it has one; never W or B.
inline std::vector<Value*> activation_inputs(const Node* n) {
  std::vector<Value*> v{n->inputs[0]};
  if (n->inputs.size() > 3 && n->inputs[3]) v.push_back(n->inputs[3]);
  return v;
}

// Union-find over nodes: the connected regions the layout passes rewrite as a whole. A node
// joins with parent[n] = n.
struct Regions {
  std::unordered_map<const Node*, const Node*> parent;
  const Node* find(const Node* n) {
    while (parent[n] != n) n = parent[n] = parent[parent[n]];
    return n;
  }
  void join(const Node* a, const Node* b) { parent[find(a)] = find(b); }
};

// Attribute helpers.
int64_t attr_int(const Node& n, const std::string& name, int64_t def);
float attr_float(const Node& n, const std::string& name, float def);
std::vector<int64_t> attr_ints(const Node& n, const std::string& name);
// The builders (kernels/attributes.h), next to the readers of the same names.
using gearbox::attr_float;
using gearbox::attr_floats;
using gearbox::attr_int;
using gearbox::attr_ints;
using gearbox::attr_string;

// Makes `v` a constant holding t (it keeps its identity, so every reader sees the constant).
void make_constant(Graph& g, Value* v, Tensor t);
// A new initializer value in g.
Value* add_constant(Graph& g, const std::string& name, Tensor t);
// Replaces every node input reading `from` with `to` (this graph only). The caller checks
// that `from` is not pinned.
void replace_uses(Graph& g, const Value* from, Value* to);
// Removes the given nodes from g (their values stay, unreferenced).
void erase_nodes(Graph& g, const std::unordered_set<const Node*>& dead);
// A new node placed right before `anchor` in g's node order (nullptr: at the end).
Node* insert_node_before(Graph& g, const Node* anchor, std::string op_type, std::string name);
// Drops initializers nothing reads any more (not counted as nodes, but they hold memory).
void drop_unused_initializers(Graph& g);

// Runs the reference kernel for n on constant inputs. nullopt-like error when no kernel.
Result<std::vector<RuntimeValue>> run_reference_kernel(const Node& n, const std::vector<RuntimeValue>& inputs);

}  // namespace gearbox::passes
