// GraphFunction: graph mode for inference, one traced and optimized Session per input shape
// signature, kept in a small LRU (see nn_graph.hpp); and what graph mode's runners share
// (signature_cache.h).
#include <map>

#include "frontend/graph/signature_cache.h"
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
    std::shared_ptr<const gearbox::Session> session;
    std::vector<std::string> input_names;
  };
  SignatureCache<Entry> cache;
};

std::string input_signature(const std::vector<Tensor>& inputs, const Module* module) {
  std::string sig;
  for (const Tensor& t : inputs) sig += gearbox::describe(value_of(t, "graph mode: an input")) + ";";
  if (module) sig += module->is_training() ? "train" : "eval";
  if (autocast_level() != AmpLevel::O0)
    sig += std::string(";amp ") + amp_level_name(autocast_level()) + " " + dtype_name(autocast_dtype());
  return sig;
}

std::shared_ptr<const gearbox::Session> make_session(gearbox::Model model, const GraphOptions& options) {
  gearbox::SessionOptions so;
  so.engine = options.engines;
  so.threads = options.threads;
  so.optimizer.disabled_passes = options.disabled_passes;
  gearbox::Result<std::unique_ptr<gearbox::Session>> session = gearbox::Session::create(std::move(model), so);
  throw_if_error(session.status());
  return std::shared_ptr<const gearbox::Session>(std::move(session.value()));
}

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
  const State::Entry entry =
      s.cache.get(input_signature(inputs, s.module.get()), s.options.max_signatures, [&]() -> State::Entry {
        TraceOptions trace_options = s.options.trace;
        if (s.module) name_module_tensors(*s.module, &trace_options);
        TraceResult traced = trace_to_model(s.fn, inputs, trace_options);
        return {make_session(std::move(traced.model), s.options), std::move(traced.input_names)};
      });
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

size_t GraphFunction::traces() const { return state_->cache.misses(); }
size_t GraphFunction::cached_signatures() const { return state_->cache.size(); }
void GraphFunction::clear() { state_->cache.clear(); }

}  // namespace gbx::nn
