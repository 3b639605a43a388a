// The tracer: runs a function of nn::Tensors once, eagerly, with itself installed as the
// thread's TraceHook, and turns what the dispatcher reported into a gearbox Model (graph IR):
// the function's inputs become graph inputs, the tensors it read that no op produced become
// initializers (named ones by their names), its outputs the graph outputs. Nodes that do not
// lead to an output are dropped. Values are told apart by their storage (buffer address,
// dtype, dims): the dispatcher sees kernel-layer tensors, and detach() or a wrapper of the
// same buffer is the same value. Every tensor seen is held until the trace ends, so no address
// is reused meanwhile.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gearbox/nn_graph.hpp"
#include "graph/ir.h"

namespace gbx::nn {

struct TraceResult {
  gearbox::Model model;
  std::vector<std::string> input_names, output_names;
};

TraceResult trace_to_model(const TensorFunction& fn, const std::vector<Tensor>& example_inputs,
                           const TraceOptions& options);

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// A training step traced as one graph: `fn` returns the loss first (then anything else to
// report); its backward is traced after it. The graph's inputs are the function's, then
// `parameters`, then `state` (buffers the step may update, BatchNorm's running statistics);
// then the random draws the function made ("random_<k>": dropout masks, drawn afresh for
// every run); its outputs the function's, then a gradient per parameter that got one
// ("<name>.grad"), then the new value of each state the step updated ("<name>.updated").
struct TrainingTrace {
  TraceResult traced;
  size_t function_outputs = 0;
  bool loss_scale_input = false;    // a float32 scalar input "loss_scale" after the state inputs
  std::vector<size_t> gradient_of;  // per gradient output: its index in `parameters`
  std::vector<size_t> update_of;    // per state-update output: its index in `state`
  std::vector<std::function<gearbox::Tensor()>> random_draws;  // per random input: the next draw
  std::vector<gearbox::Tensor> first_draws;                    // and the draw the trace made
};
// With `loss_scale` defined (a float32 scalar), the backward starts from the loss times it, and
// it is an input (after the state) of the graph.
TrainingTrace trace_training_to_model(const TensorFunction& fn, const std::vector<Tensor>& example_inputs,
                                      const NamedTensors& parameters, const NamedTensors& state,
                                      const TraceOptions& options, const Tensor& loss_scale = Tensor());

// The module's forward as a TensorFunction of one input, and its state_dict() as named tensors
// (added to `options`).
TensorFunction module_function(Module& module);
void name_module_tensors(const Module& module, TraceOptions* options);

struct TracedGraph::Impl {
  TraceResult traced;
};

}  // namespace gbx::nn
