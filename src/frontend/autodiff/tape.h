// The autodiff tape: one TapeNode per eager op that had an input requiring a gradient. A node
// carries what a graph node needs (op type, domain, opset, attributes, inputs, outputs), so the
// same gradient builders serve a traced graph later. Nodes link to their inputs' producers
// (TensorImpl::grad_fn), and backward() walks them in reverse topological order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frontend/dispatch.h"
#include "gearbox/nn.hpp"

namespace gbx::nn {

// The backward of an op recorded by apply_function: the gradients of its inputs from those of
// its outputs (undefined where an output got none).
using FunctionBackward = std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs)>;

struct TapeNode {
  OpSpec op{""};
  FunctionBackward function_backward;  // set by apply_function; otherwise the registry's builder
  gearbox::AttributeMap attrs;
  std::vector<Tensor> inputs;   // the op's inputs themselves (their grads accumulate through them)
  std::vector<Tensor> outputs;  // the op's outputs, detached (no cycle back to this node)
};

// Runs `op` through the dispatcher; when grad mode is on and an input requires a gradient,
// marks the outputs as requiring one and records a TapeNode for them.
std::vector<Tensor> apply(const OpSpec& op, const std::vector<Tensor>& inputs, gearbox::AttributeMap attrs = {},
                          size_t num_outputs = 1);
inline Tensor apply1(const OpSpec& op, const std::vector<Tensor>& inputs, gearbox::AttributeMap attrs = {}) {
  return apply(op, inputs, std::move(attrs), 1)[0];
}

// Records a step the dispatcher does not run (a collective, for one: torch's autograd.Function):
// `outputs` were computed from `inputs` by the caller, `backward` maps output gradients to input
// gradients. When grad mode is on and an input requires a gradient, the outputs are returned as
// new tensors (sharing the values) that require one and lead back to a TapeNode named `name`;
// otherwise `outputs` come back as they are.
std::vector<Tensor> apply_function(const std::string& name, const std::vector<Tensor>& inputs,
                                   std::vector<Tensor> outputs, FunctionBackward backward);

// Registers `hook` on a leaf: backward() calls it after the last gradient of that pass reached
// the leaf's grad() (not at all when the pass sends the leaf none). Returns an id for removal.
uint64_t add_post_accumulate_grad_hook(const Tensor& leaf, std::function<void()> hook);
void remove_post_accumulate_grad_hook(const Tensor& leaf, uint64_t id);

}  // namespace gbx::nn
