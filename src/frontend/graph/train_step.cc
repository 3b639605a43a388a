// GraphTrainStep: a training step's forward and backward traced as one graph per input
// signature (tracer.h's trace_training_to_model) and run by a Session; the module's parameters
// and buffers, and fresh random draws (dropout masks), are fed as inputs at every call, the
// gradients added to grad() and the updated buffers written back (see nn_graph.hpp).
#include <algorithm>
#include <cstring>

#include "frontend/graph/signature_cache.h"
#include "frontend/graph/trace_hook.h"
#include "frontend/graph/tracer.h"
#include "frontend/tensor_impl.h"
#include "gearbox/nn_amp.hpp"

namespace gbx::nn {

struct GraphTrainStep::State {
  Module* module = nullptr;          // the Module constructor's: its state is read at every call
  NamedTensors parameters, buffers;  // the other constructor's
  TensorFunction fn;
  GraphOptions options;

  struct Entry {
    std::shared_ptr<const gearbox::Session> session;
    std::vector<std::string> input_names;  // the function's, then the parameters', then the buffers'
    NamedTensors parameters, buffers;      // as traced: fed in this order
    size_t function_outputs = 0;           // then a gradient per gradient_of, a new value per update_of
    std::vector<size_t> gradient_of, update_of;
    std::vector<std::function<gearbox::Tensor()>> random_draws;  // fed after the buffers
  };
  SignatureCache<std::shared_ptr<const Entry>> cache;
};

namespace {

// A parameter or buffer tied under two names is one input, under its first name.
NamedTensors distinct(const NamedTensors& named) {
  NamedTensors out;
  std::vector<const TensorImpl*> seen;
  for (const auto& [name, t] : named) {
    if (!t.defined() || std::find(seen.begin(), seen.end(), t.impl().get()) != seen.end()) continue;
    seen.push_back(t.impl().get());
    out.emplace_back(name, t);
  }
  return out;
}

// The scaler's scale as the float32 scalar the graph multiplies the loss by.
Tensor scale_input(const LossScaler& scaler) { return Tensor::scalar(scaler.scale_value(), DType::Float32); }

// Which parameters take a gradient changes the traced backward.
std::string gradient_mask(const NamedTensors& parameters) {
  std::string mask = ";grad ";
  for (const auto& named : parameters) mask += named.second.requires_grad() ? '1' : '0';
  return mask;
}

}  // namespace

GraphTrainStep::GraphTrainStep(Module& module, TensorFunction loss_fn, GraphOptions options)
    : GraphTrainStep({}, {}, std::move(loss_fn), std::move(options)) {
  state_->module = &module;
}

GraphTrainStep::GraphTrainStep(NamedTensors parameters, NamedTensors buffers, TensorFunction loss_fn,
                               GraphOptions options)
    : state_(std::make_shared<State>()) {
  if (!loss_fn)
    throw_status(gearbox::make_error(gearbox::ErrorCode::API_INVALID_ARGUMENT, "GraphTrainStep: empty loss function"));
  state_->parameters = std::move(parameters);
  state_->buffers = std::move(buffers);
  state_->fn = std::move(loss_fn);
  state_->options = std::move(options);
}

std::vector<Tensor> GraphTrainStep::operator()(const std::vector<Tensor>& inputs) const {
  refuse_while_tracing("calling a GraphTrainStep",
                       "its Session runs outside the dispatcher; trace the eager step instead");
  State& s = *state_;
  // A module's parameters are read at every call: one may have been frozen since.
  const NamedTensors parameters = distinct(s.module ? s.module->named_parameters() : s.parameters);
  const std::string signature = input_signature(inputs, s.module) + gradient_mask(parameters);
  // The call that traces runs the graph on the random draws the trace made (dropout masks),
  // so that every step draws once, in eager mode's order.
  std::vector<gearbox::Tensor> traced_draws;
  const auto entry_ptr = s.cache.get(signature, s.options.max_signatures, [&] {
    auto e = std::make_shared<State::Entry>();
    e->parameters = parameters;
    e->buffers = distinct(s.module ? s.module->named_buffers() : s.buffers);
    const Tensor loss_scale = s.options.loss_scaler ? scale_input(*s.options.loss_scaler) : Tensor();
    TrainingTrace traced =
        trace_training_to_model(s.fn, inputs, e->parameters, e->buffers, s.options.trace, loss_scale);
    e->input_names = std::move(traced.traced.input_names);
    e->function_outputs = traced.function_outputs;
    e->gradient_of = std::move(traced.gradient_of);
    e->update_of = std::move(traced.update_of);
    e->random_draws = std::move(traced.random_draws);
    traced_draws = std::move(traced.first_draws);
    e->session = make_session(std::move(traced.traced.model), s.options);
    return std::shared_ptr<const State::Entry>(std::move(e));
  });
  const State::Entry& entry = *entry_ptr;

  std::map<std::string, gearbox::Tensor> feeds;
  size_t k = 0;
  for (const Tensor& t : inputs) feeds.emplace(entry.input_names[k++], value_of(t, "GraphTrainStep: an input"));
  for (const auto& group : {&entry.parameters, &entry.buffers})
    for (const auto& named : *group) feeds.emplace(entry.input_names[k++], named.second.impl()->value);
  if (s.options.loss_scaler) feeds.emplace(entry.input_names[k++], scale_input(*s.options.loss_scaler).impl()->value);
  for (size_t i = 0; i < entry.random_draws.size(); ++i)
    feeds.emplace(entry.input_names[k++], traced_draws.empty() ? entry.random_draws[i]() : traced_draws[i]);
  gearbox::Result<std::vector<gearbox::Tensor>> run = entry.session->run(feeds);
  throw_if_error(run.status());
  std::vector<gearbox::Tensor>& outs = run.value();

  size_t o = entry.function_outputs;
  for (size_t i : entry.gradient_of) {
    TensorImpl& p = *entry.parameters[i].second.impl();
    gearbox::Tensor& g = outs[o++];
    p.grad = p.grad.raw() ? add(wrap(p.grad), wrap(g)).impl()->value : std::move(g);
  }
  for (size_t i : entry.update_of) {
    Tensor buffer = entry.buffers[i].second;
    const gearbox::Tensor& v = outs[o++];
    std::memcpy(buffer.mutable_data(), v.raw(), v.nbytes());
  }
  std::vector<Tensor> result;
  for (size_t i = 0; i < entry.function_outputs; ++i) result.push_back(wrap(std::move(outs[i])));
  return result;
}

size_t GraphTrainStep::traces() const { return state_->cache.misses(); }
size_t GraphTrainStep::cached_signatures() const { return state_->cache.size(); }
void GraphTrainStep::clear() { state_->cache.clear(); }

}  // namespace gbx::nn
