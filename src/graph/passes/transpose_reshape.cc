// Transpose and Reshape cancellation:
//   Transpose(Transpose(x, p1), p2) -> Transpose(x, p1∘p2), or x when that is the identity;
//   Reshape(Reshape(x, s1), s2)     -> Reshape(x, s2) when s2 is constant without 0 entries
//                                      (a 0 would copy a dim of the intermediate shape);
//   Reshape(x, s) to x's own static shape -> x.
// The inner node must be read only by the outer one.
#include <numeric>

#include "graph/passes/fusion_util.h"
#include "graph/passes/passes.h"

namespace gearbox::passes {

Result<int> cancel_transpose_reshape(Graph& g, const PassContext&) {
  GraphIndex idx(g);
  std::unordered_set<const Node*> dead;
  int matches = 0;
  for (auto& up : g.nodes) {
    Node* n = up.get();
    if (!n->domain.empty() || dead.count(n) || n->outputs.size() != 1 || !n->outputs[0] || n->inputs.empty() ||
        !n->inputs[0])
      continue;
    Value* y = n->outputs[0];
    if (n->op_type == "Transpose") {
      Node* inner = producer_op(idx, n->inputs[0], "Transpose");
      if (!inner || dead.count(inner) || idx.sole_consumer(n->inputs[0]) != n) continue;
      const auto p1 = attr_ints(*inner, "perm"), p2 = attr_ints(*n, "perm");
      if (p1.empty() || p1.size() != p2.size()) continue;  // a missing perm needs the rank
      std::vector<int64_t> p(p2.size());
      bool valid = true;
      for (size_t i = 0; i < p2.size(); ++i) {
        if (p2[i] < 0 || static_cast<size_t>(p2[i]) >= p1.size()) valid = false;
        else p[i] = p1[static_cast<size_t>(p2[i])];
      }
      if (!valid) continue;
      std::vector<int64_t> iota(p.size());
      std::iota(iota.begin(), iota.end(), 0);
      Value* x = inner->inputs[0];
      if (p == iota && !idx.pinned(y)) {
        replace_uses(g, y, x);
        n->inputs.clear();
        dead.insert(n);
      } else {
        n->inputs[0] = x;
        n->attrs["perm"] = attr_ints(p);
      }
      inner->inputs.clear();
      dead.insert(inner);
      ++matches;
      idx.rebuild();
    } else if (n->op_type == "Reshape" && n->inputs.size() == 2) {
      auto target = const_ints(n->inputs[1]);
      if (!target) continue;
      auto in_dims = static_dims(n->inputs[0]);
      auto out_dims = static_dims(y);
      if (in_dims && out_dims && *in_dims == *out_dims && !idx.pinned(y)) {
        replace_uses(g, y, n->inputs[0]);
        n->inputs.clear();
        dead.insert(n);
        ++matches;
        idx.rebuild();
        continue;
      }
      Node* inner = producer_op(idx, n->inputs[0], "Reshape");
      if (!inner || dead.count(inner) || idx.sole_consumer(n->inputs[0]) != n) continue;
      bool has_zero = false;
      for (int64_t d : *target) has_zero |= d == 0;
      if (has_zero && attr_int(*n, "allowzero", 0) == 0) continue;
      n->inputs[0] = inner->inputs[0];
      inner->inputs.clear();
      dead.insert(inner);
      ++matches;
      idx.rebuild();
    }
  }
  erase_nodes(g, dead);
  return matches;
}

}  // namespace gearbox::passes
