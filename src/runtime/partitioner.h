// Partitioning: which engine runs each node. Every node of the main graph and of every
// subgraph (If/Loop/Scan bodies) gets Node::engine, the first engine of the priority list
// ("cpu.dnnl,cpu.simd,cpu.ref") whose kernel for its (domain, op, opset) accepts it
// (kernels/kernel.h kernel_accepts: the kernel's declared dtypes and its supports() predicate,
// over the node's attributes and static types) -- unless an override ("NODE_OR_OPTYPE=ENGINE",
// gearbox --engine) forces one. When a predicate needs shapes that are only known at run time,
// the node goes to that engine provisionally and the executor makes the same choice per shape
// (Partition::decided_at_run_time); the profiler and the trace name the engine that ran. Maximal runs of consecutive nodes
// (in execution order, per graph) on one engine are the regions the report and the
// [PARTITION] log list; the executor runs the nodes where they were placed
// (runtime/executor.h).
//
// It lives in the runtime layer, not graph/: the choice needs every registered kernel, and
// the control-flow kernels (If/Loop/Scan) are registered by the runtime.
#pragma once

#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "graph/ir.h"
#include "kernels/kernel_support.h"

namespace gearbox {

// One "--engine TARGET=ENGINE": TARGET is a node name, an op type ("Conv") or a qualified
// op type ("com.gearbox.FusedConv").
struct EngineOverride {
  std::string target;
  std::string engine;
};

// "Conv=cpu.ref" -> {Conv, cpu.ref}. USAGE for a spec without '=', an empty side, or the same
// target given twice with different engines.
Result<std::vector<EngineOverride>> parse_engine_overrides(const std::vector<std::string>& specs);

// Consecutive nodes of one graph on one engine.
struct PartitionRegion {
  int id = 0;              // 0, 1, ... across all graphs, main graph first
  std::string graph;       // the graph's name (a subgraph's is its body's name)
  std::string engine;
  size_t first = 0;        // index of its first node in the graph's execution order
  size_t nodes = 0;
  std::string first_node, last_node;
};

struct Partition {
  std::vector<std::string> engines;           // the priority list used
  std::map<std::string, size_t> node_counts;  // engine -> nodes placed on it (all graphs)
  std::vector<PartitionRegion> regions;
  size_t nodes = 0;                           // all graphs
  std::unordered_set<const Node*> forced;     // nodes an override placed: no fall-through
  // Nodes whose kernel's predicate needs run-time shapes: Node::engine is the first engine that
  // may take them; the executor picks per shape (it may run a later engine of the list).
  std::unordered_set<const Node*> decided_at_run_time;
  // "node 'conv1' (Conv): cpu.dnnl: <reason>" for every engine passed over because its kernel
  // refused the node; logged at debug level under [PARTITION].
  std::vector<std::string> refusals;
  size_t reassigned = 0;  // nodes that came with an engine this session cannot use (a .gbm)

  // "12 nodes, 3 regions: cpu.dnnl 2, cpu.ref 10" (+ ", 1 decided at run time")
  std::string summary() const;
};

// Sets Node::engine on every node of `model`. With `keep_placed` (a loaded .gbm, whose nodes
// carry the engines they were compiled for), a node that has an engine keeps it when that
// engine is in `engines` and has the kernel; otherwise it is placed again, with a WARN.
// Without it, earlier choices are ignored (a Model shared by sessions with other lists). Errors: OP_UNSUPPORTED when no engine of the list serves a node (the
// message names node, op, opset, engines tried and what to do); ENGINE_UNKNOWN for an override
// naming an engine no kernel is registered for, ENGINE_OVERRIDE_UNMATCHED for one that matches
// no node, ENGINE_LACKS_KERNEL for one whose engine has no kernel for a node it forces.
// What `n` offers a kernel's supports() predicate before any run: its attributes and the static
// types and shapes of its inputs (initializers with their dims).
KernelQuery static_query(const Node& n);

// The kernel of `engine` that takes n (statically), or with `or_later` also one that may once
// the run-time shapes are known; null when none. kernel_on(n, n.engine, true) is the kernel
// partitioning chose.
const KernelDef* kernel_on(const Node& n, std::string_view engine, bool or_later);

Result<Partition> partition(Model& model, const std::vector<std::string>& engines,
                            const std::vector<EngineOverride>& overrides = {}, bool keep_placed = false);

}  // namespace gearbox
