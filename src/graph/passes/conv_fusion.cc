// Conv fusion: Conv(+bias) [+ residual Add] [-> activation] -> com.gearbox.FusedConv.
// Activations: Relu, Clip (Relu6), Sigmoid, HardSigmoid, HardSwish, LeakyRelu, Tanh, Silu
// (x * Sigmoid(x)), and a fused Gelu. A plain Conv (nothing to absorb) stays a Conv.
#include "graph/passes/fusion_util.h"
#include "graph/passes/passes.h"

namespace gearbox::passes {

Result<int> fuse_conv(Graph& g, const PassContext& ctx) {
  GraphIndex idx(g);
  std::unordered_set<const Node*> dead;
  std::vector<Node*> order;
  for (auto& n : g.nodes) order.push_back(n.get());
  int matches = 0;
  for (Node* conv : order) {
    if (conv->op_type != "Conv" || !conv->domain.empty() || conv->inputs.size() < 2 || conv->outputs.size() != 1 ||
        !conv->outputs[0] || dead.count(conv))
      continue;
    Epilogue ep = match_epilogue(idx, conv, [](const Value*) { return true; }, dead);
    if (ep.nodes.size() == 1) continue;
    AttributeMap attrs = conv->attrs;
    attrs.insert(ep.activation_attrs.begin(), ep.activation_attrs.end());
    std::vector<Value*> inputs{conv->inputs[0], conv->inputs[1], conv->inputs.size() > 2 ? conv->inputs[2] : nullptr};
    if (ep.addend) inputs.push_back(ep.addend);  // the residual
    while (!inputs.empty() && !inputs.back()) inputs.pop_back();
    replace_with_fused(ctx, g, ep.nodes, ep.nodes.back(), "FusedConv", std::move(inputs), ep.output, std::move(attrs), dead);
    ++matches;
  }
  erase_nodes(g, dead);
  return matches;
}

}  // namespace gearbox::passes
