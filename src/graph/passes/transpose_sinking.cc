// Transpose sinking: moves a Transpose down through the element-wise ops after it when that
// lets it meet another Transpose, so the two merge into one (or vanish) in
// transpose_reshape_cancel:
//
//   Transpose(p) -> Relu -> Mul(c) -> Transpose(q)   =>   Relu -> Mul(c') -> Transpose(p∘q)
//   Add(Transpose(a, p), Transpose(b, p))            =>   Transpose(Add(a, b), p)
//   Concat(Transpose(a, p), Transpose(b, p), axis)   =>   Transpose(Concat(a, b, p[axis]), p)
//
// where c' is the constant c (broadcast to the full rank) transposed by the inverse of p. A
// Transpose is only moved when the move removes one: a chain that ends anywhere but at a
// Transpose is left alone, so the pass never trades one layout copy for another, and the
// patterns the fusion passes look for (attention's transposes next to MatMuls) are not
// disturbed. Layout boundaries left by layout_nhwc are where this pays: a Concat of branches
// that each leave a channels-last region (SqueezeNet's fire modules, Inception's and
// DenseNet's blocks) then concatenates channels-last, and the Transpose after it meets the
// next region's Transpose in; the pass cancels such pairs itself (transpose_reshape_cancel
// ran before the layout pass).
#include <algorithm>
#include <numeric>

#include "graph/passes/fusion_util.h"
#include "graph/passes/passes.h"
#include "kernels/op_descriptor.h"

namespace gearbox::passes {
namespace {

// Ops that commute with a transpose of their one tensor input (the op descriptor's
// TransposeRule::Unary; UnaryScalarOperands when the other inputs are constant scalars, as
// Clip's min and max are: any layout).
bool is_sinkable_unary(const Node& n) {
  if (!n.domain.empty() || n.outputs.size() != 1 || !n.outputs[0]) return false;
  const TransposeRule rule = op_descriptor(n.domain, n.op_type).transpose;
  if (rule == TransposeRule::UnaryScalarOperands) {
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (n.inputs[i] && !const_scalar(n.inputs[i])) return false;
    return true;
  }
  return rule == TransposeRule::Unary && n.inputs.size() == 1;
}

// Element-wise ops with two inputs under numpy broadcasting (TransposeRule::Broadcast; PRelu:
// slope broadcasts to x).
bool is_sinkable_binary(const Node& n) {
  return n.domain.empty() && n.inputs.size() == 2 && n.inputs[0] && n.inputs[1] && n.outputs.size() == 1 &&
         n.outputs[0] && op_descriptor(n.domain, n.op_type).transpose == TransposeRule::Broadcast;
}

std::vector<int64_t> inverse(const std::vector<int64_t>& p) {
  std::vector<int64_t> inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[static_cast<size_t>(p[i])] = static_cast<int64_t>(i);
  return inv;
}

bool is_permutation(const std::vector<int64_t>& p) {
  std::vector<bool> seen(p.size(), false);
  for (int64_t d : p) {
    if (d < 0 || static_cast<size_t>(d) >= p.size() || seen[static_cast<size_t>(d)]) return false;
    seen[static_cast<size_t>(d)] = true;
  }
  return true;
}

// The perm of an ai.onnx Transpose with an explicit, valid perm; empty otherwise.
std::vector<int64_t> transpose_perm(const Node* n) {
  if (!n || n->op_type != "Transpose" || !n->domain.empty() || n->inputs.size() != 1 || !n->inputs[0] ||
      n->outputs.size() != 1 || !n->outputs[0])
    return {};
  auto p = attr_ints(*n, "perm");
  return is_permutation(p) ? p : std::vector<int64_t>{};
}

// The type of v before a Transpose(perm) that produced v's type: dims moved back.
ValueType untransposed_type(const ValueType& t, const std::vector<int64_t>& perm) {
  ValueType out = t;
  if (t.kind != ValueType::Kind::Tensor || !t.shape.ranked || t.shape.dims.size() != perm.size()) {
    out.shape = Shape();
    return out;
  }
  for (size_t k = 0; k < perm.size(); ++k) out.shape.dims[static_cast<size_t>(perm[k])] = t.shape.dims[k];
  return out;
}

// The constant c' with Transpose(c', perm) equal to c broadcast to rank perm.size().
Result<Tensor> untranspose_constant(const Tensor& c, const std::vector<int64_t>& perm) {
  if (c.numel() == 1) return c;  // broadcasts the same in any layout
  Dims full(perm.size() - c.dims().size(), 1);
  full.insert(full.end(), c.dims().begin(), c.dims().end());
  Value in, out;
  in.is_initializer = true;
  Node t;
  t.op_type = "Transpose";
  t.opset = 13;
  t.inputs = {&in};
  t.outputs = {&out};
  t.attrs["perm"] = attr_ints(inverse(perm));
  GBX_ASSIGN_OR_RETURN(auto outs, run_reference_kernel(t, {RuntimeValue(c.reshaped(full))}));
  return outs[0].tensor();
}

// A Transpose followed by a chain of sinkable ops ending in another Transpose.
struct Chain {
  Node* first = nullptr;   // the Transpose to sink
  std::vector<Node*> ops;  // the element-wise ops it passes
  Node* last = nullptr;    // the Transpose it meets
};

// The sinkable ops from value v (read by them alone) to the Transpose they end at, or nullopt
// when they do not end at a Transpose of the given rank.
std::optional<Chain> chain_from(const GraphIndex& idx, Value* v, size_t rank) {
  Chain c;
  for (;;) {
    Node* n = idx.sole_consumer(v);
    if (!n || has_subgraph(*n)) return std::nullopt;
    if (!transpose_perm(n).empty()) {
      if (transpose_perm(n).size() != rank || c.ops.empty()) return std::nullopt;  // empty: the cancel pass's job
      c.last = n;
      return c;
    }
    if (is_sinkable_unary(*n)) {
      if (n->inputs[0] != v) return std::nullopt;
    } else if (is_sinkable_binary(*n)) {
      Value* other = n->inputs[0] == v ? n->inputs[1] : n->inputs[0];
      if (other == v || !is_const(other) || other->initializer.dims().size() > rank) return std::nullopt;
      // The chain value must have the full rank: a constant of higher rank would broadcast it.
    } else {
      return std::nullopt;
    }
    c.ops.push_back(n);
    v = n->outputs[0];
  }
}

// The chain from Transpose t.
std::optional<Chain> find_chain(const GraphIndex& idx, Node* t, size_t rank) {
  auto c = chain_from(idx, t->outputs[0], rank);
  if (c) c->first = t;
  return c;
}

Value* new_value(Graph& g, const Value& like, const std::vector<int64_t>& perm) {
  std::string name = like.name + "_presink";
  for (int i = 1; g.find_value(name); ++i) name = like.name + "_presink" + std::to_string(i);
  Value* v = g.add_value(name);
  v->type = untransposed_type(like.type, perm);
  return v;
}

// Sinks c.first down to c.last. Returns false (graph unchanged) when a constant cannot be
// transposed.
Result<bool> sink_chain(Graph& g, const Chain& c, std::unordered_set<const Node*>& dead) {
  const std::vector<int64_t> p = transpose_perm(c.first);
  // Constants first, so that a failure leaves the graph as it was.
  std::vector<Value*> consts(c.ops.size(), nullptr);
  for (size_t i = 0; i < c.ops.size(); ++i) {
    Node* n = c.ops[i];
    if (!is_sinkable_binary(*n)) continue;
    Value* prev = i == 0 ? c.first->outputs[0] : c.ops[i - 1]->outputs[0];
    Value* other = n->inputs[0] == prev ? n->inputs[1] : n->inputs[0];
    Result<Tensor> t = untranspose_constant(other->initializer, p);
    if (!t.ok()) return false;
    consts[i] = t->numel() == 1 ? other : add_constant(g, other->name + "_presink", std::move(t).value());
  }
  Value* cur = c.first->inputs[0];
  Value* prev = c.first->outputs[0];  // what op i reads now (before the rewrite)
  for (size_t i = 0; i < c.ops.size(); ++i) {
    Node* n = c.ops[i];
    Value* next_prev = n->outputs[0];
    for (size_t k = 0; k < n->inputs.size(); ++k) {
      if (n->inputs[k] == prev) n->inputs[k] = cur;
      else if (consts[i] && k < 2) n->inputs[k] = consts[i];
    }
    Value* out = new_value(g, *n->outputs[0], p);
    out->producer = n;
    n->outputs[0]->producer = nullptr;  // the old (transposed) value is read by nobody now
    n->outputs[0] = out;
    cur = out;
    prev = next_prev;
  }
  // c.last now reads the untransposed value: its perm composes with p.
  const std::vector<int64_t> q = transpose_perm(c.last);
  std::vector<int64_t> pq(q.size());
  for (size_t i = 0; i < q.size(); ++i) pq[i] = p[static_cast<size_t>(q[i])];
  c.last->inputs[0] = cur;
  c.last->attrs["perm"] = attr_ints(pq);
  std::vector<int64_t> iota(pq.size());
  std::iota(iota.begin(), iota.end(), 0);
  if (pq == iota) {
    // No Transpose left: the last op produces c.last's value itself, which so keeps its
    // identity (a graph output, a value a subgraph reads).
    Value* y = c.last->outputs[0];
    cur->producer = nullptr;
    c.ops.back()->outputs[0] = y;
    y->producer = c.ops.back();
    c.last->inputs.clear();
    c.last->outputs.clear();
    dead.insert(c.last);
  }
  c.first->outputs[0]->producer = nullptr;
  c.first->inputs.clear();
  dead.insert(c.first);
  return true;
}

// Binary(Transpose(a, p), Transpose(b, p)) -> Transpose(Binary(a, b), p).
bool sink_pair(Graph& g, const GraphIndex& idx, Node* n, std::unordered_set<const Node*>& dead) {
  if (!is_sinkable_binary(*n) || n->inputs[0] == n->inputs[1]) return false;
  Node* ta = idx.producer(n->inputs[0]);
  Node* tb = idx.producer(n->inputs[1]);
  const std::vector<int64_t> p = transpose_perm(ta);
  if (p.empty() || p != transpose_perm(tb) || dead.count(ta) || dead.count(tb)) return false;
  if (idx.sole_consumer(n->inputs[0]) != n || idx.sole_consumer(n->inputs[1]) != n) return false;
  Value* y = n->outputs[0];
  Value* z = new_value(g, *y, p);
  n->inputs = {ta->inputs[0], tb->inputs[0]};
  n->outputs[0] = z;
  z->producer = n;
  Node* t = insert_node_before(g, nullptr, "Transpose", n->name + "_sunk_transpose");
  t->opset = ta->opset;
  t->inputs = {z};
  t->outputs = {y};
  t->attrs["perm"] = attr_ints(p);
  y->producer = t;
  for (Node* d : {ta, tb}) {
    d->outputs[0]->producer = nullptr;
    d->inputs.clear();
    dead.insert(d);
  }
  return true;
}

// Concat(Transpose(a1, p), ..., Transpose(ak, p), axis) -> Transpose(Concat(a1, ..., ak, p[axis]), p)
// (TransposeRule::Axis). An input Transpose read by this Concat alone goes; one read elsewhere
// too stays for its other readers (DenseNet's features: each is concatenated by every later
// layer of its block). The move is made when it removes a Transpose: one of the inputs', or,
// when every input Transpose is shared, the one the Concat's new Transpose then meets through
// a chain of element-wise ops (DenseNet's BatchNormalization-as-Mul/Add and Relu before the
// next channels-last region), which the next round sinks; once every reader of a shared
// Transpose has been rewritten, nothing reads it and dead-node elimination removes it.
bool sink_concat(Graph& g, const GraphIndex& idx, Node* n, std::unordered_set<const Node*>& dead) {
  if (!n->domain.empty() || op_descriptor(n->domain, n->op_type).transpose != TransposeRule::Axis ||
      n->inputs.size() < 2 || n->outputs.size() != 1 || !n->outputs[0] || !n->attrs.count("axis"))
    return false;
  std::vector<Node*> ts;
  std::vector<int64_t> p;
  for (Value* in : n->inputs) {
    Node* t = in ? idx.producer(in) : nullptr;
    const std::vector<int64_t> tp = transpose_perm(t);
    if (tp.empty() || (!p.empty() && tp != p) || dead.count(t)) return false;
    p = tp;
    ts.push_back(t);
  }
  // An input Transpose goes when this Concat is its only reader, reading it once.
  std::vector<bool> goes(ts.size(), false);
  bool removes = false;
  for (size_t i = 0; i < ts.size(); ++i) {
    goes[i] = idx.sole_consumer(ts[i]->outputs[0]) == n && std::count(ts.begin(), ts.end(), ts[i]) == 1;
    removes = removes || goes[i];
  }
  if (!removes && !chain_from(idx, n->outputs[0], p.size())) return false;
  const int64_t rank = static_cast<int64_t>(p.size());
  int64_t axis = n->attrs.at("axis").i;
  if (axis < -rank || axis >= rank) return false;  // the kernel reports it
  if (axis < 0) axis += rank;
  Value* y = n->outputs[0];
  Value* z = new_value(g, *y, p);
  for (size_t i = 0; i < ts.size(); ++i) n->inputs[i] = ts[i]->inputs[0];
  n->attrs["axis"] = attr_int(p[static_cast<size_t>(axis)]);
  n->outputs[0] = z;
  z->producer = n;
  Node* t = insert_node_before(g, nullptr, "Transpose", n->name + "_sunk_transpose");
  t->opset = ts[0]->opset;
  t->inputs = {z};
  t->outputs = {y};
  t->attrs["perm"] = attr_ints(p);
  y->producer = t;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (!goes[i]) continue;
    ts[i]->outputs[0]->producer = nullptr;
    ts[i]->inputs.clear();
    dead.insert(ts[i]);
  }
  return true;
}

}  // namespace

Result<int> sink_transposes(Graph& g, const PassContext& ctx) {
  int matches = 0;
  // Each match removes at least one Transpose, so this ends.
  for (bool changed = true; changed;) {
    changed = false;
    GraphIndex idx(g);
    std::unordered_set<const Node*> dead;
    for (size_t i = 0; i < g.nodes.size() && !changed; ++i) {
      Node* n = g.nodes[i].get();
      if (dead.count(n)) continue;
      const std::vector<int64_t> p = transpose_perm(n);
      if (!p.empty()) {
        if (auto chain = find_chain(idx, n, p.size())) {
          GBX_ASSIGN_OR_RETURN(bool done, sink_chain(g, *chain, dead));
          changed = done;
        }
      } else if (sink_pair(g, idx, n, dead) || sink_concat(g, idx, n, dead)) {
        changed = true;
      }
    }
    if (changed) {
      ++matches;
      erase_nodes(g, dead);
      GBX_RETURN_IF_ERROR(topological_sort(g));  // a sunk Transpose was appended at the end
    }
  }
  // A Transpose sunk out of a Concat may now read another Transpose (or be read by one).
  if (matches > 0) GBX_RETURN_IF_ERROR(cancel_transpose_reshape(g, ctx).status());
  return matches;
}

}  // namespace gearbox::passes
