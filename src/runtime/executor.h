// The sequential executor: runs a model's nodes in topological order on one engine's
// kernels, keeping only live values (each intermediate is released after its last use).
// Subgraphs (If/Loop/Scan bodies) run through the same code with a frame chained to the
// enclosing one, so they read outer-scope values without copies.
//
// Kernels are resolved once at creation (OP_UNSUPPORTED for any node no engine serves);
// the dtype-specific kernel is picked per run from that short candidate list. run() is
// const and keeps all per-run state on the stack, so concurrent runs are safe.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/ir.h"
#include "kernels/kernel.h"

namespace gearbox {

class Executor {
 public:
  static Result<std::unique_ptr<Executor>> create(const Model& model, std::string engine);
  // Inputs in the main graph's input order; outputs in its output order.
  Result<std::vector<RuntimeValue>> run(std::vector<RuntimeValue> inputs) const;

 private:
  struct NodePlan {
    const Node* node = nullptr;
    OpInfo info;
    std::vector<const KernelDef*> candidates;  // same (domain, op, opset, engine); differ in dtypes
    std::vector<bool> wanted;                  // which outputs the graph uses
    std::vector<const Value*> release_after;   // values whose last use is this node
  };
  struct GraphPlan {
    std::vector<NodePlan> nodes;
  };
  struct Frame;

  explicit Executor(std::string engine) : engine_(std::move(engine)) {}
  Status plan_graph(const Graph& graph);
  Result<std::vector<RuntimeValue>> run_graph(const Graph& graph, std::vector<RuntimeValue> inputs,
                                              const Frame* outer) const;
  Status run_node(const NodePlan& plan, Frame& frame) const;

  std::string engine_;
  const Graph* main_ = nullptr;
  std::unordered_map<const Graph*, GraphPlan> plans_;
};

}  // namespace gearbox
