// MatMul/Gemm fusion: MatMul(A, B) [+ constant 1-D bias] [-> activation] ->
// com.gearbox.FusedMatMul, and Gemm [-> activation] -> com.gearbox.FusedGemm. Activations as
// for Conv, plus Gelu (erf and tanh forms, once gelu_fusion has made them com.gearbox.Gelu).
// A MatMul with nothing to absorb stays a MatMul.
#include "graph/passes/fusion_util.h"
#include "graph/passes/passes.h"

namespace gearbox::passes {

Result<int> fuse_matmul(Graph& g, const PassContext& ctx) {
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
    // MatMul absorbs an Add of a constant 1-D bias; Gemm has its own C input.
    auto bias = [](const Value* b) { return is_const(b) && b->initializer.rank() == 1; };
    Epilogue ep = match_epilogue(idx, mm, is_matmul ? std::function<bool(const Value*)>(bias) : nullptr, dead);
    if (ep.nodes.size() == 1) continue;
    AttributeMap attrs = is_gemm ? mm->attrs : AttributeMap{};
    attrs.insert(ep.activation_attrs.begin(), ep.activation_attrs.end());
    std::vector<Value*> inputs = mm->inputs;
    if (ep.addend) inputs.push_back(ep.addend);
    replace_with_fused(ctx, g, ep.nodes, ep.nodes.back(), is_gemm ? "FusedGemm" : "FusedMatMul", std::move(inputs),
                       ep.output, std::move(attrs), dead);
    ++matches;
  }
  erase_nodes(g, dead);
  return matches;
}

}  // namespace gearbox::passes
