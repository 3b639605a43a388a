// MatMul/Gemm fusion: MatMul(A, B) [+ constant 1-D bias] [-> activation] ->
// com.gearbox.FusedMatMul, and Gemm [-> activation] -> com.gearbox.FusedGemm. Activations as
// for Conv, plus Gelu (erf and tanh forms, once gelu_fusion has made them com.gearbox.Gelu).
// A MatMul with nothing to absorb stays a MatMul.
#include "graph/passes/fusion_util.h"
#include "graph/passes/passes.h"

namespace gearbox::passes {

Result<int> fuse_matmul(Graph& g, const PassContext&) {
  GraphIndex idx(g);
  std::unordered_set<const Node*> dead;
  std::vector<Node*> order;
  for (auto& n : g.nodes) order.push_back(n.get());
  int matches = 0;
  for (Node* mm : order) {
    const bool is_matmul = mm->op_type == "MatMul", is_gemm = mm->op_type == "Gemm";
    if ((!is_matmul && !is_gemm) || !mm->domain.empty() || mm->outputs.size() != 1 || !mm->outputs[0] ||
        dead.count(mm))
      continue;
    std::vector<Node*> nodes{mm};
    Value* cur = mm->outputs[0];
    Value* bias = nullptr;
    if (is_matmul) {
      if (Node* add = sole_consumer_op(idx, cur, "Add")) {
        Value* b = other_input(add, cur);
        if (b && is_const(b) && b->initializer.rank() == 1 && add->outputs[0] && !dead.count(add)) {
          bias = b;
          nodes.push_back(add);
          cur = add->outputs[0];
        }
      }
    }
    ActivationMatch act;
    const bool has_act = match_activation(idx, cur, &act) && !any_dead(act.nodes, dead);
    if (has_act) {
      nodes.insert(nodes.end(), act.nodes.begin(), act.nodes.end());
      cur = act.output;
    }
    if (nodes.size() == 1) continue;
    AttributeMap attrs = is_gemm ? mm->attrs : AttributeMap{};
    if (has_act) {
      attrs["activation"] = make_string_attr(act.name);
      if (!act.params.empty()) attrs["activation_params"] = make_floats_attr(act.params);
    }
    std::vector<Value*> inputs = mm->inputs;
    if (bias) inputs.push_back(bias);
    replace_with_fused(g, nodes, nodes.back(), is_gemm ? "FusedGemm" : "FusedMatMul", std::move(inputs), cur,
                       std::move(attrs), dead);
    ++matches;
  }
  erase_nodes(g, dead);
  return matches;
}

}  // namespace gearbox::passes
