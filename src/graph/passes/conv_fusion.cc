// Conv fusion: Conv(+bias) [+ residual Add] [-> activation] -> com.gearbox.FusedConv.
// Activations: Relu, Clip (Relu6), Sigmoid, HardSigmoid, HardSwish, LeakyRelu, Tanh, Silu
// (x * Sigmoid(x)), and a fused Gelu. A plain Conv (nothing to absorb) stays a Conv.
#include "graph/passes/fusion_util.h"
#include "graph/passes/passes.h"

namespace gearbox::passes {

Result<int> fuse_conv(Graph& g, const PassContext&) {
  GraphIndex idx(g);
  std::unordered_set<const Node*> dead;
  std::vector<Node*> order;
  for (auto& n : g.nodes) order.push_back(n.get());
  int matches = 0;
  for (Node* conv : order) {
    if (conv->op_type != "Conv" || !conv->domain.empty() || conv->inputs.size() < 2 || conv->outputs.size() != 1 ||
        !conv->outputs[0] || dead.count(conv))
      continue;
    std::vector<Node*> nodes{conv};
    Value* cur = conv->outputs[0];
    Value* residual = nullptr;
    if (Node* add = sole_consumer_op(idx, cur, "Add")) {
      Value* z = other_input(add, cur);
      if (z && add->outputs[0] && !dead.count(add)) {
        residual = z;
        nodes.push_back(add);
        cur = add->outputs[0];
      }
    }
    ActivationMatch act;
    const bool has_act = match_activation(idx, cur, &act) && !any_dead(act.nodes, dead);
    if (has_act) {
      nodes.insert(nodes.end(), act.nodes.begin(), act.nodes.end());
      cur = act.output;
    }
    if (nodes.size() == 1) continue;
    AttributeMap attrs = conv->attrs;
    if (has_act) {
      attrs["activation"] = make_string_attr(act.name);
      if (!act.params.empty()) attrs["activation_params"] = make_floats_attr(act.params);
    }
    std::vector<Value*> inputs{conv->inputs[0], conv->inputs[1], conv->inputs.size() > 2 ? conv->inputs[2] : nullptr};
    if (residual) inputs.push_back(residual);
    while (!inputs.empty() && !inputs.back()) inputs.pop_back();
    replace_with_fused(g, nodes, nodes.back(), "FusedConv", std::move(inputs), cur, std::move(attrs), dead);
    ++matches;
  }
  erase_nodes(g, dead);
  return matches;
}

}  // namespace gearbox::passes
