// gearbox's framework layer, graph mode and export: a function of Tensors (or a Module's
// forward) traced once into gearbox's graph IR, then run by the graph engine (optimized, from a
// plan cache per input shape signature) or written out as ONNX or a compiled .gbm.
//
//   #include <gearbox/nn_graph.hpp>
//   auto net = std::make_shared<nn::Sequential>(...);
//   net->eval();
//   nn::GraphFunction fast(net);            // graph mode, traced per input shape
//   nn::Tensor y = fast(x);                 // the same values as net->forward(x), eagerly
//   nn::export_onnx(*net, {x}, "net.onnx"); // opset 17, loadable by gearbox and onnx tools
//   nn::export_gbm(*net, {x}, "net.gbm");   // what `gearbox compile net.onnx` would write
//
// Tracing runs the function once, eagerly, on example inputs and records every op it
// dispatches. What is recorded is what ran on those inputs: the shapes are fixed (a traced
// graph has static shapes; GraphFunction traces again for a new shape signature), and host-side
// control flow (an `if` on a shape, a loop count) is frozen as it went. Module parameters and
// buffers become initializers under their state_dict() names, copied when traced (a graph does
// not see later updates: GraphFunction::clear() after training steps). Other tensors the
// function reads that do not come from its inputs (a captured tensor, a constant it creates)
// become initializers too ("const_N").
//
// What cannot be traced is refused with nn::Error (API_INVALID_ARGUMENT unless noted), never
// recorded wrongly: reading a tensor computed from the inputs back to the host (item(),
// to_float_vector(), data(), ...), batch_norm in training mode outside GraphTrainStep (it
// updates module state, which an inference graph holds as constants), drawing random numbers
// (Tensor::randn/uniform; dropout in training mode outside GraphTrainStep), writing into a traced tensor
// (mutable_data()), a step the dispatcher does not run (a collective, OP_UNSUPPORTED), and a
// trace inside a trace. GraphFunction traces inference (no gradients, module state as
// constants); GraphTrainStep traces a training step, its backward included (docs/framework.md).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gearbox/nn.hpp"

namespace gbx::nn {

// A traceable function: tensors in, tensors out.
using TensorFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

struct TraceOptions {
  // Names of the graph's inputs and outputs; empty: "input" / "output" for one, else "input_0",
  // "input_1", ... ("output_0", ...).
  std::vector<std::string> input_names;
  std::vector<std::string> output_names;
  std::string graph_name = "gearbox_nn";
  // Tensors the function reads that become initializers under these names (a Module's
  // parameters and buffers, by state_dict() name, are added by the Module overloads).
  std::vector<std::pair<std::string, Tensor>> named_tensors;
};

// A traced graph, for inspection: which ops were recorded, with which inputs, initializers and
// outputs.
class TracedGraph {
 public:
  const std::vector<std::string>& input_names() const;
  const std::vector<std::string>& output_names() const;
  std::vector<std::string> initializer_names() const;
  // The nodes' ops in execution order ("Conv", "com.gearbox.Gelu").
  std::vector<std::string> op_types() const;
  // Writes it as ONNX (opset 17), unoptimized: export_onnx's output.
  void save_onnx(const std::string& path) const;

  struct Impl;
  explicit TracedGraph(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<const Impl>& impl() const { return impl_; }

 private:
  std::shared_ptr<const Impl> impl_;
};

// Runs fn(example_inputs) once with tracing on (and gradients off) and returns the graph.
TracedGraph trace(const TensorFunction& fn, const std::vector<Tensor>& example_inputs,
                  const TraceOptions& options = {});
// The module's forward on one input; its state_dict() names the initializers.
TracedGraph trace(Module& module, const Tensor& example_input, TraceOptions options = {});

// Traces and writes an ONNX model (opset 17; com.gearbox ops, e.g. Gelu, in their own domain).
// FILE_WRITE_FAILED when the file cannot be written.
void export_onnx(const TensorFunction& fn, const std::vector<Tensor>& example_inputs, const std::string& path,
                 const TraceOptions& options = {});
void export_onnx(Module& module, const Tensor& example_input, const std::string& path, TraceOptions options = {});

// Traces, optimizes with the graph engine and writes a compiled model (.gbm): the steps of
// `gearbox compile` (the session options a default session resolves, the memory plan, this
// build's required CPU features), so `gearbox run` and Session load it without re-optimizing.
void export_gbm(const TensorFunction& fn, const std::vector<Tensor>& example_inputs, const std::string& path,
                const TraceOptions& options = {});
void export_gbm(Module& module, const Tensor& example_input, const std::string& path, TraceOptions options = {});

class LossScaler;  // gearbox/nn_amp.hpp

struct GraphOptions {
  std::string engines{};                       // empty: the session default (GEARBOX_ENGINES, else cpu.simd,...)
  int threads = 0;                             // 0: GEARBOX_NUM_THREADS, else all cores
  std::vector<std::string> disabled_passes{};  // graph passes not to run (PASS_UNKNOWN for a bad name)
  size_t max_signatures = 8;                   // traced shape signatures kept; the least recently used goes
  TraceOptions trace{};                        // names; the Module constructor adds its state_dict()
  // GraphTrainStep only: the backward starts from the loss (as float32) times this scaler's
  // scale, fed as an input at every call, so the gradients come out scaled as scale(loss)
  // .backward() leaves them; then scaler.step(optimizer) as in eager mode. It must outlive the
  // step. (LossScaler::scale inside a traced function is refused: the graph would freeze it.)
  const LossScaler* loss_scaler = nullptr;
};

// Graph mode for one function: the first call with a new input signature (dtypes and shapes,
// and for a module whether it is training) traces it, optimizes the graph with the engine's
// passes and keeps a Session for it; every call runs that Session. Thread-safe. Inference
// only: the outputs carry no gradient.
class GraphFunction {
 public:
  explicit GraphFunction(std::shared_ptr<Module> module, GraphOptions options = {});
  explicit GraphFunction(TensorFunction fn, GraphOptions options = {});

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
  // One input, one output (a module's forward).
  Tensor operator()(const Tensor& input) const;

  // How many times a signature was traced (a cache miss), and how many are cached now.
  size_t traces() const;
  size_t cached_signatures() const;
  // Drops every cached graph: the next call traces again. Call it after the weights changed
  // (an optimizer step, load_state_dict): a traced graph holds a copy of them.
  void clear();

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// Graph mode for training (MindSpore's GRAPH_MODE value_and_grad, torch.compile of a training
// step): `loss_fn(inputs)` returns the loss first (a one-element tensor, computed by the
// module), then anything else to report (logits). Its forward and its backward are traced as
// one graph per input signature, optimized by the graph engine and run by a Session. The
// module's parameters and buffers are the graph's inputs, read at every call, so optimizer
// steps and load_state_dict are seen without retracing.
//
//   nn::GraphTrainStep step(*net, [&](const std::vector<nn::Tensor>& in) {
//     return std::vector<nn::Tensor>{nn::cross_entropy((*net)(in[0]), in[1])};
//   });
//   opt.zero_grad();
//   nn::Tensor loss = step({x, y})[0];   // the parameters' grad() hold this step's gradients
//   opt.step();                          // the optimizers, schedulers, clip_grad_norm: eager
//
// Each call adds the step's gradients to the parameters' grad() (as backward() does: call
// zero_grad() between steps, or accumulate over several) and writes the buffers the step
// updated (BatchNorm's running statistics, num_batches_tracked). The function's other outputs
// come back after the loss, without gradients. Dropout in training mode works: its masks are
// graph inputs drawn from the manual_seed generator for every call, the same draws in the same
// order as eager mode's. The module must outlive the step. Refused as in trace(). Mixed
// precision: call it under an Autocast (the level is part of the signature) and give the loss
// scaler as GraphOptions::loss_scaler:
//
//   nn::LossScaler scaler;
//   nn::GraphTrainStep step(*net, loss_fn, {.loss_scaler = &scaler});
//   { nn::Autocast amp(nn::AmpLevel::O2); step({x, y}); }
//   scaler.step(opt);                    // unscales, skips the step on inf/NaN, updates the scale
class GraphTrainStep {
 public:
  GraphTrainStep(Module& module, TensorFunction loss_fn, GraphOptions options = {});
  // For a function of tensors that is not a Module: the parameters it trains and the buffers
  // it may update, by name (the graph's input names).
  GraphTrainStep(std::vector<std::pair<std::string, Tensor>> parameters,
                 std::vector<std::pair<std::string, Tensor>> buffers, TensorFunction loss_fn,
                 GraphOptions options = {});

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;

  size_t traces() const;
  size_t cached_signatures() const;
  // Drops every cached graph (not needed after weight updates: the weights are inputs).
  void clear();

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// nn::compile(net): the per-function wrapper, as a call.
inline GraphFunction compile(std::shared_ptr<Module> module, GraphOptions options = {}) {
  return GraphFunction(std::move(module), std::move(options));
}
inline GraphFunction compile(TensorFunction fn, GraphOptions options = {}) {
  return GraphFunction(std::move(fn), std::move(options));
}

}  // namespace gbx::nn
