// Multi-head attention fusion -> com.gearbox.Attention (see fused_attention.cc for the
// operator): from Softmax back to the Reshape/Transpose of Q, K and V and forward to the
// Transpose/Reshape of the context, as exporters emit BERT-style self-attention:
//   Softmax(MatMul(T(R(q)), T(R(k))) / scale [+ mask]) -> MatMul(., T(R(v))) -> T -> R
// Every intermediate must be read only inside the pattern; every reshape target constant.
#include "graph/passes/fusion_util.h"
#include "graph/passes/passes.h"

namespace gearbox::passes {

namespace {

// Transpose(Reshape(x, const shape)) producing v, each read once: returns x.
struct HeadSplit {
  Value* x = nullptr;
  Value* shape = nullptr;
  std::vector<int64_t> perm;
  Node* reshape = nullptr;
  Node* transpose = nullptr;
};

bool match_split(const GraphIndex& idx, Value* v, HeadSplit* out) {
  Node* t = producer_op(idx, v, "Transpose");
  if (!t || idx.pinned(v) || idx.num_uses(v) != 1) return false;
  Node* r = producer_op(idx, t->inputs[0], "Reshape");
  if (!r || idx.sole_consumer(t->inputs[0]) != t || attr_int(*r, "allowzero", 0) != 0 || !is_const(r->inputs[1]))
    return false;
  *out = {r->inputs[0], r->inputs[1], attr_ints(*t, "perm"), r, t};
  return out->perm.size() == 4;
}

}  // namespace

Result<int> fuse_attention(Graph& g, const PassContext& ctx) {
  GraphIndex idx(g);
  std::unordered_set<const Node*> dead;
  std::vector<Node*> order;
  for (auto& n : g.nodes) order.push_back(n.get());
  int matches = 0;
  for (Node* sm : order) {
    if (sm->op_type != "Softmax" || !sm->domain.empty() || dead.count(sm) || !sm->outputs[0]) continue;
    // Backwards: [Add(mask)] <- Div/Mul(scale) <- MatMul(Q, K).
    Value* s = sm->inputs[0];
    Value* mask = nullptr;
    std::vector<Node*> nodes;
    Node* p = idx.producer(s);
    if (!p || !p->domain.empty() || idx.sole_consumer(s) != sm) continue;
    if (p->op_type == "Add") {
      nodes.push_back(p);
      Node* scaled = nullptr;
      for (int side = 0; side < 2 && !scaled; ++side) {
        Node* q = producer_op(idx, p->inputs[side], "Div");
        if (!q) q = producer_op(idx, p->inputs[side], "Mul");
        if (q && idx.sole_consumer(p->inputs[side]) == p) {
          scaled = q;
          mask = p->inputs[1 - side];
        }
      }
      if (!scaled) continue;
      p = scaled;
    }
    if (p->op_type != "Div" && p->op_type != "Mul") continue;
    const bool is_div = p->op_type == "Div";
    Value* scale = nullptr;
    Value* scores = nullptr;
    if (is_const(p->inputs[1]) && p->inputs[1]->initializer.numel() == 1) {
      scale = p->inputs[1];
      scores = p->inputs[0];
    } else if (!is_div && is_const(p->inputs[0]) && p->inputs[0]->initializer.numel() == 1) {
      scale = p->inputs[0];
      scores = p->inputs[1];
    }
    if (!scale) continue;
    nodes.push_back(p);
    Node* qk = producer_op(idx, scores, "MatMul");
    if (!qk || idx.sole_consumer(scores) != p) continue;
    nodes.push_back(qk);
    HeadSplit q, k, v;
    if (!match_split(idx, qk->inputs[0], &q) || !match_split(idx, qk->inputs[1], &k)) continue;
    // Forwards: MatMul(P, V) -> Transpose -> Reshape.
    Node* pv = sole_consumer_op(idx, sm->outputs[0], "MatMul");
    if (!pv || pv->inputs[0] != sm->outputs[0] || !match_split(idx, pv->inputs[1], &v)) continue;
    Node* ot = sole_consumer_op(idx, pv->outputs[0], "Transpose");
    if (!ot) continue;
    Node* orr = sole_consumer_op(idx, ot->outputs[0], "Reshape");
    if (!orr || !is_const(orr->inputs[1]) || attr_int(*orr, "allowzero", 0) != 0 || !orr->outputs[0]) continue;
    nodes.insert(nodes.end(), {sm, pv, ot, orr, q.reshape, q.transpose, k.reshape, k.transpose, v.reshape, v.transpose});
    if (any_dead(nodes, dead)) continue;
    const auto qshape = const_ints(q.shape);
    const int64_t heads = qshape && qshape->size() == 4 ? (*qshape)[2] : 0;
    AttributeMap attrs{{"q_perm", attr_ints(q.perm)},
                       {"k_perm", attr_ints(k.perm)},
                       {"v_perm", attr_ints(v.perm)},
                       {"out_perm", attr_ints(attr_ints(*ot, "perm"))},
                       {"scale_is_div", attr_int(is_div ? 1 : 0)},
                       {"softmax_axis", attr_int(attr_int(*sm, "axis", sm->opset < 13 ? 1 : -1))},
                       {"softmax_opset", attr_int(sm->opset)},
                       {"num_heads", attr_int(heads)}};
    std::vector<Value*> inputs{q.x, k.x, v.x, scale, q.shape, k.shape, v.shape, orr->inputs[1]};
    if (mask) inputs.push_back(mask);
    replace_with_fused(ctx, g, nodes, orr, "Attention", std::move(inputs), orr->outputs[0], std::move(attrs), dead);
    ++matches;
  }
  erase_nodes(g, dead);
  return matches;
}

}  // namespace gearbox::passes
