// NodeObserver: a hook the executor calls around every node it runs (subgraph nodes
// included), with the node's input values before its kernel and its output values after.
// The tensor dumper (runtime/tensor_dump.h) is one; attach one per run with
// Session::run_values(inputs, profiler, observer). With none attached the executor pays one
// pointer test per node, as for the profiler.
//
// An error returned by either call stops the run with that error. Concurrent runs may share
// an observer, so implementations must be thread-safe.
#pragma once

#include <vector>

#include "base/status.h"
#include "graph/ir.h"
#include "kernels/kernel.h"

namespace gearbox {

class NodeObserver {
 public:
  virtual ~NodeObserver() = default;
  // Before the kernel runs: the node's inputs in order (nullptr for an omitted optional one).
  // `depth` is 0 in the main graph, 1+ inside If/Loop/Scan bodies.
  virtual Status before_node(const Node& node, int depth, const std::vector<const RuntimeValue*>& inputs) = 0;
  // After the kernel succeeded: the node's outputs in order (none for outputs not produced).
  virtual Status after_node(const Node& node, int depth, const std::vector<RuntimeValue>& outputs) = 0;
};

}  // namespace gearbox
