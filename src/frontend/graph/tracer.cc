// Tracing eager ops into the graph IR (see tracer.h).
#include "frontend/graph/tracer.h"

#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "frontend/amp/autocast.h"
#include "frontend/graph/trace_hook.h"
#include "frontend/tensor_impl.h"
#include "graph/onnx_exporter.h"

namespace gbx::nn {

namespace {

using gearbox::ErrorCode;

// A value's identity: its storage. Two kernel-layer tensors over the same buffer with the
// same dtype and dims hold the same values (kernels never write into a tensor they did not
// allocate: base/tensor.h).
using StorageKey = std::tuple<const void*, gearbox::DType, gearbox::Dims>;
StorageKey key_of(const gearbox::Tensor& t) { return {t.raw(), t.dtype(), t.dims()}; }

struct TracedValue {
  enum class Kind { Input, Constant, Node } kind = Kind::Constant;
  gearbox::Tensor tensor;  // the eager value: held so its address stays this value's
  std::string name;        // inputs and named constants; the rest are named at the end
  int producer = -1;       // index into nodes_ for Kind::Node
};

struct TracedNode {
  OpSpec op{""};
  gearbox::AttributeMap attrs;
  std::vector<int> inputs;  // -1: an omitted optional input
  std::vector<int> outputs;
};

class Tracer final : public TraceHook {
 public:
  explicit Tracer(const std::vector<std::pair<std::string, Tensor>>& named) {
    for (const auto& [name, t] : named) {
      if (!t.defined()) continue;
      const gearbox::Tensor& v = t.impl()->value;
      if (v.raw()) names_.emplace(key_of(v), name);  // the first name of a tied tensor wins
    }
  }

  void add_input(const gearbox::Tensor& t, const std::string& name) {
    if (t.raw() && by_key_.count(key_of(t)))
      throw_status(
          gearbox::make_error(ErrorCode::API_INVALID_ARGUMENT, "trace: input '", name, "' (", gearbox::describe(t),
                              ") is the same tensor as an earlier input; pass distinct tensors (clone() one)"));
    int id = add_value({TracedValue::Kind::Input, t, name, -1});
    if (t.raw()) by_key_[key_of(t)] = id;
  }

  void record(const OpSpec& op, const std::vector<gearbox::Tensor>& inputs, const gearbox::AttributeMap& attrs,
              const std::vector<gearbox::Tensor>& outputs) override {
    TracedNode node;
    node.op = op;
    node.attrs = attrs;
    for (const gearbox::Tensor& t : inputs) node.inputs.push_back(t.defined() ? value_for(t) : -1);
    const int index = static_cast<int>(nodes_.size());
    for (const gearbox::Tensor& t : outputs) {
      int id = add_value({TracedValue::Kind::Node, t, "", index});
      node.outputs.push_back(id);
      if (!t.raw()) continue;
      // An output a kernel forwarded unchanged from an input (Reshape to the same shape) is that
      // input's value; keeping the input's mapping leaves a constant a constant.
      auto it = by_key_.find(key_of(t));
      bool forwarded = false;
      if (it != by_key_.end())
        for (int in : node.inputs) forwarded = forwarded || in == it->second;
      if (!forwarded) by_key_[key_of(t)] = id;
    }
    nodes_.push_back(std::move(node));
  }

  void check_host_read(const gearbox::Tensor& t, const char* what) override {
    if (!t.raw()) return;
    auto it = by_key_.find(key_of(t));
    if (it == by_key_.end() || values_[it->second].kind == TracedValue::Kind::Constant) return;
    const TracedValue& v = values_[it->second];
    std::string from = v.kind == TracedValue::Kind::Input ? "input '" + v.name + "'"
                                                          : "the output of " + nodes_[v.producer].op.op_type;
    throw_status(gearbox::make_error(
        ErrorCode::API_INVALID_ARGUMENT, what, " on ", gearbox::describe(t), " (", from,
        ") while tracing: the tensor depends on the traced inputs, and what the host computes from its values "
        "cannot be recorded in a graph (the graph would freeze this run's numbers). Keep the computation in tensor "
        "ops, or run this function eagerly"));
  }

  void state_update(const gearbox::Tensor& state, const gearbox::Tensor& new_value, const char* what) override {
    auto it = by_key_.find(key_of(state));
    if (it == by_key_.end() || !state_inputs_.count(it->second))
      throw_status(gearbox::make_error(
          ErrorCode::API_INVALID_ARGUMENT, what,
          " cannot be traced here: this trace holds the module's state as "
          "constants (inference graph mode), so the update would be lost; call eval() on the module before tracing, "
          "or train in graph mode with GraphTrainStep, whose graph takes the state as inputs and returns its updates"));
    value_for(new_value);
    for (auto& [input, value] : state_updates_)
      if (input == it->second) {
        value = new_value;  // updated twice in one run: the last value is the state's
        return;
      }
    state_updates_.emplace_back(it->second, new_value);
  }

  void random_input(const gearbox::Tensor& drawn, std::function<gearbox::Tensor()> draw, const char* what) override {
    if (!accepts_random_inputs_)
      throw_status(gearbox::make_error(
          ErrorCode::API_INVALID_ARGUMENT, what,
          " cannot be traced here: it draws random numbers on the host, so this graph would repeat one draw on "
          "every run; call eval() on the module (or pass training = false) before tracing, or train in graph mode "
          "with GraphTrainStep, which draws afresh for every step"));
    std::string name = "random_" + std::to_string(random_inputs_.size());
    add_input(drawn, name);
    random_inputs_.push_back({std::move(name), drawn, std::move(draw)});
  }

  // A training trace: random draws become inputs (random_input), in the order drawn.
  void accept_random_inputs() { accepts_random_inputs_ = true; }
  struct RandomInput {
    std::string name;
    gearbox::Tensor first;                  // the draw the trace ran with
    std::function<gearbox::Tensor()> draw;  // the next one
  };
  const std::vector<RandomInput>& random_inputs() const { return random_inputs_; }

  // An input that is module state (a buffer a training trace takes as an input).
  void mark_state_input(const gearbox::Tensor& t) { state_inputs_.insert(by_key_.at(key_of(t))); }
  // The state inputs updated during the trace, each with its new value, in update order.
  std::vector<std::pair<gearbox::Tensor, gearbox::Tensor>> state_updates() const {
    std::vector<std::pair<gearbox::Tensor, gearbox::Tensor>> updates;
    for (const auto& [input, value] : state_updates_) updates.emplace_back(values_[input].tensor, value);
    return updates;
  }

  void copied(const gearbox::Tensor& source, const gearbox::Tensor& copy) override {
    if (!source.raw() || !copy.raw()) return;
    auto it = by_key_.find(key_of(source));
    if (it == by_key_.end() || values_[it->second].kind == TracedValue::Kind::Constant) return;
    by_key_[key_of(copy)] = it->second;
    pinned_.push_back(copy);
  }

  TraceResult finish(const std::vector<gearbox::Tensor>& outputs, const std::vector<std::string>& output_names,
                     const std::vector<std::string>& input_names, const std::string& graph_name) {
    // Outputs; an input, a constant or a repeated output goes out through an Identity node, so
    // that every graph output is a node's own.
    std::vector<int> out_ids;
    std::set<int> seen;
    for (const gearbox::Tensor& t : outputs) {
      int id = value_for(t);
      if (values_[id].kind != TracedValue::Kind::Node || !seen.insert(id).second) {
        TracedNode identity;
        identity.op = OpSpec{"Identity"};
        identity.inputs = {id};
        int out = add_value({TracedValue::Kind::Node, t, "", static_cast<int>(nodes_.size())});
        identity.outputs = {out};
        nodes_.push_back(std::move(identity));
        id = out;
        seen.insert(id);
      }
      out_ids.push_back(id);
    }
    // What leads to an output.
    std::vector<bool> live_node(nodes_.size(), false), live_value(values_.size(), false);
    std::vector<int> stack(out_ids.begin(), out_ids.end());
    while (!stack.empty()) {
      int id = stack.back();
      stack.pop_back();
      if (live_value[id]) continue;
      live_value[id] = true;
      int p = values_[id].producer;
      if (values_[id].kind != TracedValue::Kind::Node || live_node[p]) continue;
      live_node[p] = true;
      for (int in : nodes_[p].inputs)
        if (in >= 0) stack.push_back(in);
    }

    // Names: the inputs', the outputs', the named constants'; generated ones avoid them all.
    std::set<std::string> used;
    auto claim = [&](const std::string& name) {
      if (!used.insert(name).second)
        throw_status(gearbox::make_error(ErrorCode::API_INVALID_ARGUMENT, "trace: the name '", name,
                                         "' is given to two of the graph's inputs, outputs and named tensors"));
    };
    for (const TracedValue& v : values_)
      if (v.kind == TracedValue::Kind::Input) claim(v.name);
    for (size_t i = 0; i < out_ids.size(); ++i) {
      claim(output_names[i]);
      values_[out_ids[i]].name = output_names[i];
    }
    for (size_t id = 0; id < values_.size(); ++id) {
      TracedValue& v = values_[id];
      if (!live_value[id] || v.kind != TracedValue::Kind::Constant || !v.tensor.raw()) continue;
      auto it = names_.find(key_of(v.tensor));
      if (it != names_.end() && !used.count(it->second)) {
        v.name = it->second;
        used.insert(v.name);
      }
    }
    auto fresh = [&](std::string base) {
      std::string name = base;
      for (int k = 1; used.count(name); ++k) name = base + "_" + std::to_string(k);
      used.insert(name);
      return name;
    };

    auto g = std::make_shared<gearbox::Graph>();
    g->name = graph_name;
    std::vector<gearbox::Value*> ir(values_.size(), nullptr);
    auto make_value = [&](int id) {
      TracedValue& v = values_[id];
      gearbox::Value* value = g->add_value(v.name);
      value->type.dtype = v.tensor.dtype();
      value->type.shape = gearbox::Shape::from_dims(v.tensor.dims());
      ir[id] = value;
      return value;
    };
    int constants = 0;
    for (size_t id = 0; id < values_.size(); ++id) {
      TracedValue& v = values_[id];
      if (!live_value[id] || v.kind != TracedValue::Kind::Constant) continue;
      if (v.name.empty()) v.name = fresh("const_" + std::to_string(constants++));
      gearbox::Value* value = make_value(static_cast<int>(id));
      value->is_initializer = true;
      // A copy: the graph keeps the values it was traced with (a parameter changing later is
      // not seen, GraphFunction::clear()), and no pass can write into the module's tensors.
      value->initializer = v.tensor.clone();
      g->initializers.push_back(value);
    }
    // Initializers, then inputs, then node outputs: the order the ONNX importer creates values
    // in, so a graph traced here and one imported from its export are laid out alike (the
    // .gbm export_gbm writes is the one `gearbox compile` writes from export_onnx's file).
    for (size_t i = 0; i < input_names.size(); ++i)
      for (size_t id = 0; id < values_.size(); ++id)
        if (values_[id].kind == TracedValue::Kind::Input && values_[id].name == input_names[i])
          g->inputs.push_back(make_value(static_cast<int>(id)));

    gearbox::Model model;
    std::map<std::string, int> counts;
    for (size_t n = 0; n < nodes_.size(); ++n) {
      if (!live_node[n]) continue;
      const TracedNode& tn = nodes_[n];
      auto& version = model.opsets[tn.op.domain];
      version = std::max<int64_t>(version, tn.op.opset);
      // Node names are a namespace of their own (ONNX's), unique by the count per op type.
      gearbox::Node* node = g->add_node(tn.op.op_type, tn.op.op_type + "_" + std::to_string(counts[tn.op.op_type]++));
      node->domain = tn.op.domain;
      node->attrs = tn.attrs;
      for (int in : tn.inputs) node->inputs.push_back(in < 0 ? nullptr : ir[in]);
      for (size_t i = 0; i < tn.outputs.size(); ++i) {
        TracedValue& v = values_[tn.outputs[i]];
        if (v.name.empty()) v.name = fresh(node->name + (tn.outputs.size() == 1 ? "" : "_" + std::to_string(i)));
        gearbox::Value* value = make_value(tn.outputs[i]);
        value->producer = node;
        node->outputs.push_back(value);
      }
    }
    model.opsets.emplace("", 17);  // Identity alone still needs ai.onnx
    for (auto& node : g->nodes) node->opset = static_cast<int>(model.opsets[node->domain]);
    for (int id : out_ids) g->outputs.push_back(ir[id]);
    model.graph = std::move(g);
    model.ir_version = 8;
    model.producer_name = "gearbox.nn";
    model.path = "<traced " + graph_name + ">";
    return {std::move(model), input_names, output_names};
  }

 private:
  int add_value(TracedValue v) {
    values_.push_back(std::move(v));
    return static_cast<int>(values_.size()) - 1;
  }

  // The value `t` is; a tensor no op produced and no input is is a constant.
  int value_for(const gearbox::Tensor& t) {
    if (t.raw()) {
      auto it = by_key_.find(key_of(t));
      if (it != by_key_.end()) return it->second;
    }
    int id = add_value({TracedValue::Kind::Constant, t, "", -1});
    if (t.raw()) by_key_[key_of(t)] = id;
    return id;
  }

  std::vector<TracedValue> values_;
  std::vector<TracedNode> nodes_;
  std::map<StorageKey, int> by_key_;
  std::map<StorageKey, std::string> names_;
  std::vector<gearbox::Tensor> pinned_;  // clones mapped to a traced value
  std::set<int> state_inputs_;
  std::vector<std::pair<int, gearbox::Tensor>> state_updates_;  // (state input, its new value)
  bool accepts_random_inputs_ = false;
  std::vector<RandomInput> random_inputs_;
};

std::vector<std::string> io_names(const std::vector<std::string>& given, size_t n, const char* base, const char* what) {
  if (!given.empty()) {
    if (given.size() != n)
      throw_status(gearbox::make_error(ErrorCode::API_INVALID_ARGUMENT, "trace: ", given.size(), " ", what,
                                       " names for ", n, " ", what, "s"));
    return given;
  }
  if (n == 1) return {base};
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) names.push_back(std::string(base) + "_" + std::to_string(i));
  return names;
}

// Checks the function and makes the function's inputs the tracer's first inputs; returns
// their names.
std::vector<std::string> add_function_inputs(Tracer& tracer, const TensorFunction& fn,
                                             const std::vector<Tensor>& example_inputs, const TraceOptions& options) {
  if (!fn) throw_status(gearbox::make_error(ErrorCode::API_INVALID_ARGUMENT, "trace: the function is empty"));
  std::vector<std::string> input_names = io_names(options.input_names, example_inputs.size(), "input", "input");
  for (size_t i = 0; i < example_inputs.size(); ++i)
    tracer.add_input(value_of(example_inputs[i], "trace: an example input"), input_names[i]);
  return input_names;
}

}  // namespace

TraceResult trace_to_model(const TensorFunction& fn, const std::vector<Tensor>& example_inputs,
                           const TraceOptions& options) {
  Tracer tracer(options.named_tensors);
  const std::vector<std::string> input_names = add_function_inputs(tracer, fn, example_inputs, options);
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;  // inference: no tape
    ActiveTrace active(&tracer);
    outputs = fn(example_inputs);
  }
  if (outputs.empty())
    throw_status(gearbox::make_error(ErrorCode::API_INVALID_ARGUMENT, "trace: the function returned no tensor"));
  std::vector<gearbox::Tensor> values;
  for (const Tensor& t : outputs) values.push_back(value_of(t, "trace: an output of the function"));
  std::vector<std::string> output_names = io_names(options.output_names, outputs.size(), "output", "output");
  return tracer.finish(values, output_names, input_names, options.graph_name);
}

TrainingTrace trace_training_to_model(const TensorFunction& fn, const std::vector<Tensor>& example_inputs,
                                      const NamedTensors& parameters, const NamedTensors& state,
                                      const TraceOptions& options, const Tensor& loss_scale) {
  Tracer tracer(options.named_tensors);
  std::vector<std::string> input_names = add_function_inputs(tracer, fn, example_inputs, options);
  for (const auto& [name, p] : parameters) {
    tracer.add_input(value_of(p, "trace: a parameter"), name);
    input_names.push_back(name);
  }
  for (const auto& [name, b] : state) {
    tracer.add_input(value_of(b, "trace: a buffer"), name);
    tracer.mark_state_input(b.impl()->value);
    input_names.push_back(name);
  }
  if (loss_scale.defined()) {
    tracer.add_input(value_of(loss_scale, "trace: the loss scale"), "loss_scale");
    input_names.push_back("loss_scale");
  }
  // The graph computes this step's gradients alone (the runner adds them to grad(), as
  // backward() does): the parameters' gradients so far are set aside while tracing.
  struct SetAside {
    const NamedTensors& params;
    std::vector<gearbox::Tensor> grads;
    explicit SetAside(const NamedTensors& p) : params(p) {
      for (const auto& named : params) grads.push_back(std::exchange(named.second.impl()->grad, {}));
    }
    ~SetAside() {
      for (size_t i = 0; i < params.size(); ++i) params[i].second.impl()->grad = std::move(grads[i]);
    }
  } set_aside(parameters);
  tracer.accept_random_inputs();
  std::vector<Tensor> outputs;
  {
    ActiveTrace active(&tracer);
    outputs = fn(example_inputs);
    if (outputs.empty() || !outputs[0].defined() || outputs[0].numel() != 1)
      throw_status(gearbox::make_error(ErrorCode::API_INVALID_ARGUMENT, "trace: a training step's function returns ",
                                       "the loss first, a one-element tensor; it returned ",
                                       outputs.empty() ? std::string("nothing") : outputs[0].describe()));
    if (!outputs[0].requires_grad())
      throw_status(gearbox::make_error(ErrorCode::API_INVALID_ARGUMENT, "trace: the loss ", outputs[0].describe(),
                                       " does not depend on any parameter that requires a gradient"));
    if (loss_scale.defined()) {
      amp::AutocastSuspended float32;  // as LossScaler::scale: the product stays float32
      mul(outputs[0].to(DType::Float32), loss_scale).backward();
    } else {
      outputs[0].backward();
    }
  }
  TrainingTrace result;
  result.function_outputs = outputs.size();
  result.loss_scale_input = loss_scale.defined();
  std::vector<gearbox::Tensor> values;
  for (const Tensor& t : outputs) values.push_back(value_of(t, "trace: an output of the function"));
  std::vector<std::string> output_names = io_names(options.output_names, outputs.size(), "output", "output");
  for (size_t i = 0; i < parameters.size(); ++i) {
    const gearbox::Tensor& grad = parameters[i].second.impl()->grad;
    if (!grad.raw()) continue;  // no gradient reached it: its grad() stays as it is, as in eager
    values.push_back(grad);
    output_names.push_back(parameters[i].first + ".grad");
    result.gradient_of.push_back(i);
  }
  for (const auto& [old_value, new_value] : tracer.state_updates()) {
    size_t i = 0;
    while (state[i].second.impl()->value.raw() != old_value.raw()) ++i;  // every state input is in `state`
    values.push_back(new_value);
    output_names.push_back(state[i].first + ".updated");
    result.update_of.push_back(i);
  }
  for (const auto& random : tracer.random_inputs()) {
    input_names.push_back(random.name);
    result.random_draws.push_back(random.draw);
    result.first_draws.push_back(random.first);
  }
  result.traced = tracer.finish(values, output_names, input_names, options.graph_name);
  return result;
}

TensorFunction module_function(Module& module) {
  return [&module](const std::vector<Tensor>& inputs) {
    if (inputs.size() != 1)
      throw_status(gearbox::make_error(ErrorCode::API_INVALID_ARGUMENT, "a Module's forward takes one input, not ",
                                       inputs.size()));
    return std::vector<Tensor>{module.forward(inputs[0])};
  };
}

void name_module_tensors(const Module& module, TraceOptions* options) {
  for (auto& [name, t] : module.state_dict()) options->named_tensors.emplace_back(name, t);
}

// ---- TracedGraph ----------------------------------------------------------------------

const std::vector<std::string>& TracedGraph::input_names() const { return impl_->traced.input_names; }
const std::vector<std::string>& TracedGraph::output_names() const { return impl_->traced.output_names; }

std::vector<std::string> TracedGraph::initializer_names() const {
  std::vector<std::string> names;
  for (const gearbox::Value* v : impl_->traced.model.graph->initializers) names.push_back(v->name);
  return names;
}

std::vector<std::string> TracedGraph::op_types() const {
  std::vector<std::string> ops;
  for (const auto& n : impl_->traced.model.graph->nodes) ops.push_back(n->qualified_op());
  return ops;
}

void TracedGraph::save_onnx(const std::string& path) const {
  throw_if_error(gearbox::export_onnx_file(impl_->traced.model, path));
}

TracedGraph trace(const TensorFunction& fn, const std::vector<Tensor>& example_inputs, const TraceOptions& options) {
  auto impl = std::make_shared<TracedGraph::Impl>();
  impl->traced = trace_to_model(fn, example_inputs, options);
  return TracedGraph(std::move(impl));
}

TracedGraph trace(Module& module, const Tensor& example_input, TraceOptions options) {
  name_module_tensors(module, &options);
  return trace(module_function(module), {example_input}, options);
}

}  // namespace gbx::nn
