// Helpers shared by the fusion passes: matching single-consumer chains and absorbing a
// trailing activation, and replacing a matched pattern with one com.gearbox node.
#pragma once

#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "graph/passes/pass_util.h"

namespace gearbox::passes {

// The node reading v, when v has exactly one reader, is not pinned and that reader is an
// ai.onnx `op` (any op when empty).
Node* sole_consumer_op(const GraphIndex& idx, const Value* v, const std::string& op);
// The producer of v when it is an ai.onnx `op` node; nullptr otherwise.
Node* producer_op(const GraphIndex& idx, const Value* v, const std::string& op);
// For a binary node with one input `v`, the other input (nullptr if neither or both are v).
Value* other_input(const Node* n, const Value* v);

// An activation that can follow a fused Conv/MatMul/Gemm.
struct ActivationMatch {
  std::string name;            // "Relu", "Clip", ... (the "activation" attribute)
  std::vector<float> params;   // the "activation_params" attribute
  std::vector<Node*> nodes;    // the nodes it replaces
  Value* output = nullptr;     // its result
};
// Matches an activation reading v (v's only reader, or Sigmoid + Mul for Silu).
bool match_activation(const GraphIndex& idx, Value* v, ActivationMatch* out);

// What a fused Conv/MatMul/Gemm absorbs after its head node: an Add reading the head's
// output (when `take_addend` accepts the Add's other input; no Add when it is empty), then
// an activation.
struct Epilogue {
  std::vector<Node*> nodes;       // the head, then the absorbed nodes (just the head: none)
  Value* addend = nullptr;        // the absorbed Add's other input
  Value* output = nullptr;        // the pattern's result
  AttributeMap activation_attrs;  // "activation" and "activation_params", when absorbed
};
Epilogue match_epilogue(const GraphIndex& idx, Node* head, const std::function<bool(const Value*)>& take_addend,
                        const std::unordered_set<const Node*>& dead);

// Creates the fused node `op_type` (domain com.gearbox, opset 1) right before `last` (the
// last node of the pattern), with the given inputs, writing `output`, and marks `replaced`
// dead, recording each as replaced by the new node (PassContext::record). Returns the new node.
Node* replace_with_fused(const PassContext& ctx, Graph& g, const std::vector<Node*>& replaced, Node* last, const std::string& op_type,
                         std::vector<Value*> inputs, Value* output, AttributeMap attrs,
                         std::unordered_set<const Node*>& dead);
// True when any node of `nodes` is already marked dead (used by an earlier match).
bool any_dead(const std::vector<Node*>& nodes, const std::unordered_set<const Node*>& dead);

}  // namespace gearbox::passes
