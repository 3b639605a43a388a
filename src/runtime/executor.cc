// Sequential executor.
#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <unordered_set>

#include "base/logging.h"
#include "base/strings.h"
#include "kernels/kernel_options.h"
#include "kernels/op_descriptor.h"
#include "runtime/control_flow.h"
#include "runtime/node_observer.h"
#include "runtime/op_cost.h"
#include "runtime/partitioner.h"
#include "runtime/plugin_loader.h"

namespace gearbox {

struct Executor::Frame {
  std::unordered_map<const Value*, RuntimeValue> values;
  const Frame* parent = nullptr;
  const RunContext* rc = nullptr;
  int depth = 0;  // subgraph nesting (main graph 0)

  const RuntimeValue* find(const Value* v) const {
    for (const Frame* f = this; f; f = f->parent) {
      auto it = f->values.find(v);
      if (it != f->values.end()) return &it->second;
    }
    return nullptr;
  }
};

Executor::Executor(std::string engine) : engine_(std::move(engine)), engines_(split_list(engine_)) {}

Result<std::unique_ptr<Executor>> Executor::create(const Model& model, std::string engine,
                                                   std::unordered_set<const Node*> forced) {
  register_control_flow_kernels();  // idempotent; lives in the runtime layer (needs the IR)
  std::unique_ptr<Executor> ex(new Executor(std::move(engine)));
  ex->forced_ = std::move(forced);
  ex->main_ = model.graph.get();
  GBX_RETURN_IF_ERROR(ex->plan_graph(*model.graph));
  return ex;
}

Status Executor::plan_graph(const Graph& graph) {
  GraphPlan plan;
  const auto& registry = KernelRegistry::global();
  std::unordered_set<const Value*> graph_outputs(graph.outputs.begin(), graph.outputs.end());
  std::unordered_map<const Value*, size_t> last_use;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = *graph.nodes[i];
    for (const Value* v : n.inputs)
      if (v) last_use[v] = i;
    std::unordered_set<const Value*> reads;
    for_each_subgraph(n, [&](const Graph& sg) { collect_reads(sg, reads); });
    for (const Value* v : reads) last_use[v] = i;
  }
  std::unordered_set<const Value*> produced_here;
  for (const auto& n : graph.nodes)
    for (const Value* o : n->outputs)
      if (o) produced_here.insert(o);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = *graph.nodes[i];
    NodePlan np;
    np.node = &n;
    np.index = num_nodes_++;
    np.info = OpInfo{n.name, n.op_type, n.domain, n.opset, &n.attrs, n.compute_dtype};
    if (!n.outputs.empty() && n.outputs[0] && n.outputs[0]->type.kind == ValueType::Kind::Tensor)
      np.info.output_dtype = n.outputs[0]->type.dtype;
    // The node's engine first (runtime/partitioner.h placed it); unless an override forced
    // it, the engines after it in the priority list follow, so a dtype the chosen engine
    // lacks falls through to the next one. A node never placed gets every engine in order.
    std::vector<std::string> order;
    if (n.engine.empty()) {
      order = engines_;
    } else {
      order.push_back(n.engine);
      auto at = std::find(engines_.begin(), engines_.end(), n.engine);
      if (!forced_.count(&n) && at != engines_.end()) order.insert(order.end(), at + 1, engines_.end());
    }
    for (const std::string& engine : order)
      for (const auto& def : registry.all())
        if (def.op_type == n.op_type && def.domain == n.domain && def.engine == engine && def.serves(n.opset))
          np.candidates.push_back(&def);
    if (np.candidates.empty()) {
      bool other_opset = false;
      for (const auto& def : registry.all())
        if (def.op_type == n.op_type && def.domain == n.domain) other_opset = true;
      return make_error(ErrorCode::OP_UNSUPPORTED, "node '", n.name, "': operator ", n.op_type, " (domain ",
                        n.domain.empty() ? "ai.onnx" : n.domain, ", opset ", n.opset, ") has no kernel on engine(s) ",
                        join(order, ","), other_opset ? " at this opset (other opsets are supported)" : "",
                        op_path_note());
    }
    // Whether the choice can depend on run-time dims: a candidate before the first that
    // statically accepts the node answers "later".
    const KernelQuery sq = static_query(n);
    for (const KernelDef* def : np.candidates) {
      const Verdict v = kernel_accepts(*def, sq);
      if (v.later()) np.shape_dependent = true;
      if (v.accepted()) break;
    }
    for (const Value* out : n.outputs) np.wanted.push_back(out != nullptr);
    for (const Value* in : n.inputs) np.constant_inputs.push_back(in && in->is_initializer);
    // A value this graph computes, read for the last time here and through one input only,
    // may be overwritten by the kernel (whether its buffer is shared is checked per run).
    // Outer-scope values stay intact: a loop body runs again.
    for (const Value* in : n.inputs)
      np.overwritable_inputs.push_back(in && produced_here.count(in) && !graph_outputs.count(in) && last_use[in] == i &&
                                       std::count(n.inputs.begin(), n.inputs.end(), in) == 1);
    for (const Value* v : n.inputs)
      if (v && v->producer && !graph_outputs.count(v) && last_use[v] == i &&
          std::find(np.release_after.begin(), np.release_after.end(), v) == np.release_after.end())
        np.release_after.push_back(v);
    // Outputs nobody reads are dropped at once.
    for (const Value* out : n.outputs)
      if (out && !last_use.count(out) && !graph_outputs.count(out)) np.release_after.push_back(out);
    plan.nodes.push_back(std::move(np));
    Status sub = Status::OK();
    for_each_subgraph(n, [&](const Graph& sg) {
      if (sub.ok()) sub = plan_graph(sg);
    });
    GBX_RETURN_IF_ERROR(sub);
  }
  // Values read only by subgraphs are released after the node that holds the subgraph.
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    std::unordered_set<const Value*> reads;
    for_each_subgraph(*graph.nodes[i], [&](const Graph& sg) { collect_reads(sg, reads); });
    for (const Value* v : reads)
      if (v->producer && !graph_outputs.count(v) && last_use[v] == i) {
        auto& rel = plan.nodes[i].release_after;
        if (produced_here.count(v) && std::find(rel.begin(), rel.end(), v) == rel.end()) rel.push_back(v);
      }
  }
  plans_[&graph] = std::move(plan);
  return Status::OK();
}

Result<std::vector<RuntimeValue>> Executor::run(std::vector<RuntimeValue> inputs, PreparedPlan* plan,
                                                Profiler* profiler, int run, NodeObserver* observer,
                                                const RunOptions* run_options) const {
  if (plan && plan->kernels.size() != num_nodes_)
    return make_error(ErrorCode::INTERNAL, "prepared plan has ", plan->kernels.size(), " node slots, the model ",
                      num_nodes_);
  // The plan's arena when it has one and no other run holds it (runtime/arena.h), falling
  // back to its buffer pool; else the buffer pool alone.
  Arena::Lease arena = plan && plan->arena ? plan->arena->lease(&plan->buffers) : Arena::Lease();
  std::optional<BufferPool::RunScope> buffers;
  if (plan) buffers.emplace(&plan->buffers, arena.get());
  const RunContext rc{plan, profiler, run, observer, arena.get(), run_options};
  // Kernels on this thread (Loop/Scan, long kernels' outer loops) check the same options.
  RunOptionsScope stop_scope(run_options);
  try {
    return run_graph(*main_, std::move(inputs), nullptr, rc);
  } catch (const BufferSourceError& e) {
    // Kernels' allocations are caught in run_node; this catches the executor's own (hooks).
    return e.status();
  }
}

Result<std::vector<RuntimeValue>> Executor::run_graph(const Graph& graph, std::vector<RuntimeValue> inputs,
                                                      const Frame* outer, const RunContext& rc) const {
  auto plan_it = plans_.find(&graph);
  if (plan_it == plans_.end()) return make_error(ErrorCode::INTERNAL, "graph '", graph.name, "' was not planned");
  if (inputs.size() > graph.inputs.size())
    return make_error(ErrorCode::INVALID_ARGUMENT, "graph '", graph.name, "' takes ", graph.inputs.size(),
                      " inputs but got ", inputs.size());
  Frame frame;
  frame.parent = outer;
  frame.rc = &rc;
  frame.depth = outer ? outer->depth + 1 : 0;
  for (size_t i = 0; i < inputs.size(); ++i) frame.values[graph.inputs[i]] = std::move(inputs[i]);
  for (const Value* init : graph.initializers) frame.values[init] = RuntimeValue(init->initializer);
  const auto& nodes = plan_it->second.nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (rc.options) {
      // Between nodes: the cheapest point to stop, with nothing half-written.
      Status stop = rc.options->check();
      if (!stop.ok()) {
        const Node& n = *nodes[i].node;
        return stop.with_context("stopped before node '" + n.name + "' (" + n.qualified_op() + ")" +
                                 (outer ? " in subgraph '" + graph.name + "'" : std::string()) + ": ");
      }
    }
    if (rc.arena && !outer) rc.arena->begin_node(i);  // the arena places the main graph's values
    GBX_RETURN_IF_ERROR(run_node(nodes[i], frame));
  }
  std::vector<RuntimeValue> outputs;
  outputs.reserve(graph.outputs.size());
  for (const Value* v : graph.outputs) {
    const RuntimeValue* rv = frame.find(v);
    if (!rv)
      return make_error(ErrorCode::OUTPUT_MISSING, "graph output '", v->name, "' of graph '", graph.name,
                        "' was not computed");
    outputs.push_back(*rv);
  }
  return outputs;
}

// The first candidate that accepts the node's inputs (its dtypes and predicate). Without a
// shape-dependent predicate the choice holds for every later run of the same plan.
Result<const KernelDef*> Executor::pick_kernel(const NodePlan& np, const KernelContext& ctx) const {
  const KernelQuery q = KernelQuery::of(ctx);
  std::string why;         // the first predicate's reason, for the message
  bool dtype_only = true;  // every candidate refused the dtype (not a case of its op)
  for (const KernelDef* cand : np.candidates) {
    const Verdict v = kernel_accepts(*cand, q);
    if (v.accepted()) return cand;
    if (v.reason.rfind("not for dtype", 0) != 0) {
      dtype_only = false;
      if (why.empty()) why = std::string(cand->engine) + ": " + v.reason;
    }
  }
  const Node& n = *np.node;
  const bool forced = forced_.count(&n) > 0;
  std::vector<std::string> tried;
  for (const KernelDef* cand : np.candidates)
    if (std::find(tried.begin(), tried.end(), cand->engine) == tried.end()) tried.emplace_back(cand->engine);
  const DType dt = ctx.has_input(0) && ctx.input_value(0).is_tensor() ? ctx.input(0).dtype() : DType::Undefined;
  if (dtype_only)
    return make_error(ErrorCode::DTYPE_UNSUPPORTED, "node '", n.name, "': operator ", n.qualified_op(), " (opset ",
                      n.opset, ") has no kernel for dtype ", dtype_name(dt), " on engine(s) ", join(tried, ","),
                      forced ? " (forced by --engine)" : "");
  return make_error(forced ? ErrorCode::ENGINE_LACKS_KERNEL : ErrorCode::OP_UNSUPPORTED, "node '", n.name,
                    "': operator ", n.qualified_op(), " (opset ", n.opset, "): no kernel on engine(s) ",
                    join(tried, ","), " handles these inputs (", why, ")",
                    forced ? "; it was forced by --engine: force another engine, or none" : "");
}

void Executor::record(const NodePlan& np, const KernelDef& def, const KernelContext& ctx,
                      const std::vector<RuntimeValue>& outs, const Frame& frame, int64_t begin_ns) const {
  Profiler& prof = *frame.rc->profiler;
  OpRecord r;
  r.end_ns = prof.now_ns();  // first: the bookkeeping below is not the kernel's time
  r.begin_ns = begin_ns;
  r.node = np.node->name;
  r.op_type = np.node->qualified_op();
  r.engine = std::string(def.engine);
  // A composite kernel (a fused reference kernel) names the engines its inner ops ran on too.
  for (std::string_view e : ctx.inner_engines())
    if (e != def.engine) (r.engine += '+') += e;
  // A node that computed in a reduced precision says so: "cpu.dnnl:bf16" (docs/precision.md).
  if (ctx.compute_dtype() == DType::BF16 && current_kernel_options().bf16_arithmetic &&
      kernel_computes_in(def, DType::BF16))
    r.engine += ":bf16";
  r.run = frame.rc->run;
  r.depth = frame.depth;
  r.thread = prof.thread_id();
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    r.input_dims.push_back(ctx.has_input(i) && ctx.input_value(i).is_tensor() ? ctx.input(i).dims() : Dims{});
  for (const RuntimeValue& v : outs) r.output_dims.push_back(v.is_tensor() ? v.tensor().dims() : Dims{});
  OpCost cost = op_cost(ctx, outs);
  r.flops = cost.flops;
  r.bytes_read = cost.bytes_read;
  r.bytes_written = cost.bytes_written;
  if (PreparedPlan* plan = frame.rc->plan) r.pool_bytes_in_use = plan->buffers.stats().bytes_in_use;
  if (frame.rc->arena) r.pool_bytes_in_use += frame.rc->arena->stats().planned_bytes;  // the whole range is held
  prof.add(std::move(r));
}

Status Executor::run_node(const NodePlan& np, Frame& frame) const {
  const Node& n = *np.node;
  std::vector<const RuntimeValue*> ins;
  ins.reserve(n.inputs.size());
  for (const Value* v : n.inputs) {
    if (!v) {
      ins.push_back(nullptr);
      continue;
    }
    const RuntimeValue* rv = frame.find(v);
    if (!rv)
      return make_error(ErrorCode::INTERNAL, "node '", n.name, "' (", n.op_type, "): input '", v->name,
                        "' has no value at run time");
    ins.push_back(rv);
  }
  PreparedPlan* plan = frame.rc->plan;
  NodeObserver* observer = frame.rc->observer;
  std::vector<RuntimeValue> outs(n.outputs.size());
  SubgraphRunner runner = [this, &frame](const Graph& body, std::vector<RuntimeValue> in) {
    return run_graph(body, std::move(in), &frame, *frame.rc);
  };
  KernelContext ctx(np.info, ins, &outs, np.wanted, std::move(runner));
  ctx.set_constant_inputs(np.constant_inputs);
  ctx.set_last_reader_of(&np.overwritable_inputs);
  if (plan) ctx.set_node_cache(&plan->node_caches[np.index]);
  ctx.set_engines(&engines_);
  const KernelDef* def = nullptr;
  std::vector<Dims> shape_key;
  if (plan && !np.shape_dependent) {
    def = plan->kernels[np.index].load(std::memory_order_acquire);
  } else if (plan) {
    for (const RuntimeValue* v : ins) shape_key.push_back(v && v->is_tensor() ? v->tensor().dims() : Dims{-1});
    def = plan->shape_choices[np.index].find(shape_key);
  }
  if (!def) {
    GBX_ASSIGN_OR_RETURN(def, pick_kernel(np, ctx));
    if (plan && !np.shape_dependent) plan->kernels[np.index].store(def, std::memory_order_release);
    else if (plan) plan->shape_choices[np.index].add(std::move(shape_key), def);
  }
  if (observer) GBX_RETURN_IF_ERROR(observer->before_node(n, frame.depth, ins));
  const bool timing = log::logger().should_log(spdlog::level::debug);
  auto t0 = timing ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  Profiler* profiler = frame.rc->profiler;
  const int64_t begin_ns = profiler ? profiler->now_ns() : 0;
  // A tensor the plan's buffer pool cannot get from the device pool (POOL_EXHAUSTED,
  // POOL_FRAGMENTED) is thrown from Tensor(dtype, dims) as BufferSourceError: kernels allocate
  // through that constructor, which cannot return a Status, and an exception leaves every
  // kernel unchanged while still unwinding its locals. It is caught here, around the one
  // call, and returned like the kernel's own errors (runtime/buffer_pool.h: never thrown
  // inside an OpenMP region, where it could not be caught).
  Status st;
  try {
    st = def->fn(ctx);
  } catch (const BufferSourceError& e) {
    st = e.status();
  }
  if (profiler && st.ok()) record(np, *def, ctx, outs, frame, begin_ns);
  if (!st.ok()) {
    // Kernels prefix their own node context; add it for those that did not.
    if (st.message().rfind("node '", 0) != 0)
      return st.with_context("node '" + n.name + "' (" + n.qualified_op() + "): ");
    return st;
  }
  // After the profiler's record, so a dump's file writes are not the kernel's time.
  if (observer) GBX_RETURN_IF_ERROR(observer->after_node(n, frame.depth, outs));
  if (timing) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    GBX_LOG_DEBUG("EXEC", "{} ({}) {:.3f} ms", n.name, n.op_type, ms);
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (!n.outputs[i]) continue;
    if (outs[i].is_none() && n.outputs[i]->type.kind == ValueType::Kind::Tensor &&
        !op_descriptor(n.domain, n.op_type).may_omit_outputs)
      return make_error(ErrorCode::INTERNAL, "node '", n.name, "' (", n.op_type, ") did not produce output ", i, " ('",
                        n.outputs[i]->name, "')");
    frame.values[n.outputs[i]] = std::move(outs[i]);
  }
  for (const Value* v : np.release_after) frame.values.erase(v);
  return Status::OK();
}

}  // namespace gearbox
