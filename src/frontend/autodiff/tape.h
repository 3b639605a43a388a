// The autodiff tape: one TapeNode per eager op that had an input requiring a gradient. A node
// carries what a graph node needs (op type, domain, opset, attributes, inputs, outputs), so the
// same gradient builders serve a traced graph later. Nodes link to their inputs' producers
// (TensorImpl::grad_fn), and backward() walks them in reverse topological order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "frontend/dispatch.h"
#include "gearbox/nn.hpp"

namespace gbx::nn {

struct TapeNode {
  OpSpec op{""};
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

// Registers `hook` on a leaf: backward() calls it after the last gradient of that pass reached
// the leaf's grad() (not at all when the pass sends the leaf none). Returns an id for removal.
uint64_t add_post_accumulate_grad_hook(const Tensor& leaf, std::function<void()> hook);
void remove_post_accumulate_grad_hook(const Tensor& leaf, uint64_t id);

}  // namespace gbx::nn
