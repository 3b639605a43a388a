// Constant folding: a node whose inputs are all constants runs once at compile time on the
// reference kernels, and its outputs become initializers. Shape and Size of values whose
// shape is static (from the model's declared and inferred shapes) become constants first,
// so the Shape -> Gather -> Unsqueeze -> Concat chains exporters emit for Reshape fold away.
#include <algorithm>

#include "base/logging.h"
#include "graph/passes/passes.h"

namespace gearbox::passes {

namespace {

bool never_fold(const Node& n) {
  return !n.domain.empty() || has_subgraph(n) || n.outputs.empty() || is_random_op(n);
}

}  // namespace

Result<int> fold_static_shapes(Graph& g, const PassContext&) {
  std::unordered_set<const Node*> dead;
  for (auto& up : g.nodes) {
    Node* n = up.get();
    if (!n->domain.empty() || (n->op_type != "Shape" && n->op_type != "Size") || n->inputs.empty() || !n->inputs[0] ||
        n->outputs.empty() || !n->outputs[0])
      continue;
    auto dims = static_dims(n->inputs[0]);
    if (!dims) continue;
    Tensor t;
    if (n->op_type == "Size") {
      t = Tensor::scalar<int64_t>(numel(*dims));
    } else {
      const int64_t rank = static_cast<int64_t>(dims->size());
      int64_t start = attr_int(*n, "start", 0), end = attr_int(*n, "end", rank);
      if (start < 0) start += rank;
      if (end < 0) end += rank;
      start = std::clamp<int64_t>(start, 0, rank);
      end = std::clamp<int64_t>(end, start, rank);
      t = Tensor::from_vector(std::vector<int64_t>(dims->begin() + start, dims->begin() + end));
    }
    make_constant(g, n->outputs[0], std::move(t));
    dead.insert(n);
  }
  erase_nodes(g, dead);
  return static_cast<int>(dead.size());
}

Result<int> fold_constants(Graph& g, const PassContext& ctx) {
  std::unordered_set<const Node*> dead;
  for (auto& up : g.nodes) {
    Node* n = up.get();
    if (never_fold(*n)) continue;
    bool all_const = true;
    for (const Value* v : n->inputs)
      if (v && !is_const(v)) all_const = false;
    if (!all_const) continue;
    // Skip outputs the static shapes already say are too large.
    bool too_big = false;
    for (const Value* o : n->outputs) {
      auto d = static_dims(o);
      if (d && o->type.dtype != DType::Undefined &&
          static_cast<double>(numel(*d)) * static_cast<double>(dtype_size(o->type.dtype)) >
              static_cast<double>(ctx.constant_fold_max_bytes))
        too_big = true;
    }
    if (too_big) continue;
    std::vector<RuntimeValue> ins(n->inputs.size());
    for (size_t i = 0; i < n->inputs.size(); ++i)
      if (n->inputs[i]) ins[i] = RuntimeValue(n->inputs[i]->initializer);
    auto outs = run_reference_kernel(*n, ins);
    if (!outs.ok()) {
      // The node fails on these constants: leave it, so the error surfaces at run time
      // with the node's context, as it would without the optimizer.
      GBX_LOG_DEBUG("GRAPH_OPTIMIZER", "constant folding skips '{}' ({}): {}", n->name, n->op_type,
                    outs.status().to_string());
      continue;
    }
    bool ok = true;
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      if (!n->outputs[i]) continue;
      if (i >= outs->size() || !(*outs)[i].is_tensor() || n->outputs[i]->type.kind != ValueType::Kind::Tensor ||
          (*outs)[i].tensor().nbytes() > ctx.constant_fold_max_bytes)
        ok = false;
    }
    if (!ok) continue;
    for (size_t i = 0; i < n->outputs.size(); ++i)
      if (n->outputs[i]) make_constant(g, n->outputs[i], std::move((*outs)[i].tensor()));
    dead.insert(n);
    if (!n->outputs.empty() && n->outputs[0]) record_folding(ctx, *n, n->outputs[0]->name);
  }
  erase_nodes(g, dead);
  return static_cast<int>(dead.size());
}

}  // namespace gearbox::passes
