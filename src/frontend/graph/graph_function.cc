// GraphFunction: graph mode for inference, one traced and optimized Session per input shape
// signature, kept in a small LRU (see nn_graph.hpp).
#include <list>
#include <map>
#include <mutex>

#include "frontend/graph/trace_hook.h"
#include "frontend/graph/tracer.h"
#include "frontend/tensor_impl.h"
#include "gearbox/nn_amp.hpp"
#include "runtime/session.h"

namespace gbx::nn {

struct GraphFunction::State {
  TensorFunction fn;
  std::shared_ptr<Module> module;  // when built from a module: its state names the weights
  GraphOptions options;

  struct Entry {
    std::string signature;
    std::shared_ptr<const gearbox::Session> session;
    std::vector<std::string> input_names;
  };
  mutable std::mutex mu;
  std::list<Entry> entries;  // most recently used first
  size_t traces = 0;
};

namespace {

std::string signature_of(const std::vector<Tensor>& inputs, const Module* module) {
  std::string sig;
  for (const Tensor& t : inputs) sig += gearbox::describe(value_of(t, "GraphFunction: an input")) + ";";
  // A module traces differently in train() and eval() (dropout, batch statistics).
  if (module) sig += module->is_training() ? "train" : "eval";
  // And under each autocast level and dtype (the traced graph holds its casts).
  if (autocast_level() != AmpLevel::O0)
    sig += std::string(";amp ") + amp_level_name(autocast_level()) + " " + dtype_name(autocast_dtype());
  return sig;
}

}  // namespace

GraphFunction::GraphFunction(std::shared_ptr<Module> module, GraphOptions options) : state_(std::make_shared<State>()) {
  if (!module)
    throw_status(gearbox::make_error(gearbox::ErrorCode::API_INVALID_ARGUMENT, "GraphFunction: null module"));
  state_->fn = module_function(*module);
  state_->module = std::move(module);
  state_->options = std::move(options);
}

GraphFunction::GraphFunction(TensorFunction fn, GraphOptions options) : state_(std::make_shared<State>()) {
  if (!fn) throw_status(gearbox::make_error(gearbox::ErrorCode::API_INVALID_ARGUMENT, "GraphFunction: empty function"));
  state_->fn = std::move(fn);
  state_->options = std::move(options);
}

std::vector<Tensor> GraphFunction::operator()(const std::vector<Tensor>& inputs) const {
  refuse_while_tracing("calling a GraphFunction",
                       "its Session runs outside the dispatcher, so the trace would see its outputs as constants; "
                       "trace the eager function instead");
  State& s = *state_;
  const std::string signature = signature_of(inputs, s.module.get());
  State::Entry entry;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.entries.begin();
    while (it != s.entries.end() && it->signature != signature) ++it;
    if (it != s.entries.end()) {
      s.entries.splice(s.entries.begin(), s.entries, it);
    } else {
      // Traced under the lock: a second caller with the same new signature waits for this
      // trace instead of tracing again.
      TraceOptions trace_options = s.options.trace;
      if (s.module) name_module_tensors(*s.module, &trace_options);
      TraceResult traced = trace_to_model(s.fn, inputs, trace_options);
      gearbox::SessionOptions so;
      so.engine = s.options.engines;
      so.threads = s.options.threads;
      so.optimizer.disabled_passes = s.options.disabled_passes;
      gearbox::Result<std::unique_ptr<gearbox::Session>> session =
          gearbox::Session::create(std::move(traced.model), so);
      throw_if_error(session.status());
      ++s.traces;
      s.entries.push_front({signature, std::shared_ptr<const gearbox::Session>(std::move(session.value())),
                            std::move(traced.input_names)});
      while (s.entries.size() > std::max<size_t>(s.options.max_signatures, 1)) s.entries.pop_back();
    }
    entry = s.entries.front();
  }
  std::map<std::string, gearbox::Tensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) feeds.emplace(entry.input_names[i], inputs[i].impl()->value);
  gearbox::Result<std::vector<gearbox::Tensor>> outs = entry.session->run(feeds);
  throw_if_error(outs.status());
  std::vector<Tensor> result;
  result.reserve(outs.value().size());
  for (gearbox::Tensor& t : outs.value()) result.push_back(wrap(std::move(t)));
  return result;
}

Tensor GraphFunction::operator()(const Tensor& input) const {
  std::vector<Tensor> outs = (*this)(std::vector<Tensor>{input});
  if (outs.size() != 1)
    throw_status(gearbox::make_error(gearbox::ErrorCode::API_INVALID_ARGUMENT, "GraphFunction: the function returns ",
                                     outs.size(), " tensors; call it with a vector of inputs"));
  return outs[0];
}

size_t GraphFunction::traces() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->traces;
}

size_t GraphFunction::cached_signatures() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->entries.size();
}

void GraphFunction::clear() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->entries.clear();
}

}  // namespace gbx::nn
