// The sequential executor: runs a model's nodes in topological order, each on the kernels
// of the engine the partitioner chose for it, keeping only live values (each intermediate is
// released after its last use).
// Subgraphs (If/Loop/Scan bodies) run through the same code with a frame chained to the
// enclosing one, so they read outer-scope values without copies.
//
// Kernels are resolved once at creation (OP_UNSUPPORTED for any node no engine serves): a
// node's candidates are those of the engine the partitioner placed it on (Node::engine,
// runtime/partitioner.h), then -- unless that choice was forced -- those of the engines after
// it in the priority list; a node without an engine gets every engine's, in priority order.
// the kernel is picked from that short candidate list -- the first that accepts the node's
// run-time inputs (kernels/kernel.h kernel_accepts: dtypes and supports() predicate) -- on the
// first run of a prepared plan (runtime/plan_cache.h) and reused by later runs of the same plan
// (per input dims, for a node whose choice depends on shapes the static types left unknown).
// No kernel hands its node to another engine itself: the engine that is picked runs. A run with a
// plan also takes its tensor buffers from the plan's BufferPool. run() is const and keeps all
// per-run state on the stack, so concurrent runs are safe.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/run_options.h"
#include "graph/ir.h"
#include "kernels/kernel.h"
#include "runtime/plan_cache.h"
#include "runtime/profiler.h"

namespace gearbox {

class NodeObserver;

class Executor {
 public:
  // `engine`: the priority list ("cpu.dnnl,cpu.ref"); `forced`: nodes an --engine override
  // placed, which run on their engine only.
  static Result<std::unique_ptr<Executor>> create(const Model& model, std::string engine,
                                                  std::unordered_set<const Node*> forced = {});
  // Inputs in the main graph's input order; outputs in its output order. With a plan, the
  // run reuses (and fills in) its kernel choices and allocates from its buffer pool.
  // With a profiler, every node executed is recorded under run index `run`; with an observer
  // (runtime/node_observer.h), it sees every node's inputs before and outputs after it runs.
  // With run options (base/run_options.h), the run stops with RUN_CANCELLED or
  // RUN_DEADLINE_EXCEEDED at the first check after its flag is set or its deadline passes:
  // before every node of every graph, and wherever a kernel calls check_run_stop() (Loop/Scan
  // iterations, long kernels' outer loops). What a stopped run held goes back to the plan's
  // buffer pool and arena as it unwinds, and the kernel choices it made are kept, so the next
  // run of the plan is unaffected.
  Result<std::vector<RuntimeValue>> run(std::vector<RuntimeValue> inputs, PreparedPlan* plan = nullptr,
                                        Profiler* profiler = nullptr, int run = 0, NodeObserver* observer = nullptr,
                                        const RunOptions* run_options = nullptr) const;
  // Nodes of every graph (main and subgraphs): the size of PreparedPlan::kernels.
  size_t num_nodes() const { return num_nodes_; }

 private:
  struct NodePlan {
    const Node* node = nullptr;
    size_t index = 0;  // across all graphs: the slot in PreparedPlan::kernels
    OpInfo info;
    std::vector<const KernelDef*> candidates;  // same (domain, op, opset); in engine priority order
    bool shape_dependent = false;              // a candidate's predicate needs run-time dims
    std::vector<bool> wanted;                  // which outputs the graph uses
    std::vector<bool> constant_inputs;         // which inputs are initializers
    std::vector<bool> overwritable_inputs;     // KernelContext::may_overwrite_input's plan half
    std::vector<const Value*> release_after;   // values whose last use is this node
  };
  struct GraphPlan {
    std::vector<NodePlan> nodes;
  };
  struct Frame;
  // What every frame of one run shares.
  struct RunContext {
    PreparedPlan* plan = nullptr;
    Profiler* profiler = nullptr;
    int run = 0;  // the profiler's run index
    NodeObserver* observer = nullptr;
    Arena* arena = nullptr;               // the plan's arena when this run leased it (runtime/arena.h)
    const RunOptions* options = nullptr;  // deadline and terminate flag; null: never stops
  };

  explicit Executor(std::string engine);
  Status plan_graph(const Graph& graph);
  Result<std::vector<RuntimeValue>> run_graph(const Graph& graph, std::vector<RuntimeValue> inputs, const Frame* outer,
                                              const RunContext& rc) const;
  Status run_node(const NodePlan& plan, Frame& frame) const;
  void record(const NodePlan& np, const KernelDef& def, const KernelContext& ctx, const std::vector<RuntimeValue>& outs,
              const Frame& frame, int64_t begin_ns) const;
  Result<const KernelDef*> pick_kernel(const NodePlan& np, const KernelContext& ctx) const;

  std::string engine_;                // as given: "cpu.dnnl,cpu.ref"
  std::vector<std::string> engines_;  // split, in priority order
  std::unordered_set<const Node*> forced_;
  const Graph* main_ = nullptr;
  size_t num_nodes_ = 0;
  std::unordered_map<const Graph*, GraphPlan> plans_;
};

}  // namespace gearbox
