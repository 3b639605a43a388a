// The graph optimizer: named passes in one default pipeline, each switchable by name, with
// a report per pass (nodes before and after, matches, time), logged under [GRAPH_OPTIMIZER].
//
//   OptimizerOptions opts;
//   opts.disabled_passes = {"attention_fusion"};
//   GBX_ASSIGN_OR_RETURN(OptimizerReport report, optimize(model, opts));
//
// Switches: `switches` (from a --fusion-switch JSON file) turns a pass on or off;
// `disabled_passes` (--disable-pass NAME) turns it off, and wins. An unknown name is
// PASS_UNKNOWN, listing the valid names. GEARBOX_DISABLE_PASSES (comma list of names, or
// "all") is not read here: resolve_session_options (runtime/session.h) adds it to
// `disabled_passes` for every session of the process and for gearbox compile (so whole test
// suites can run with the optimizer off). See docs/graph_engine.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "graph/ir.h"
#include "graph/memory_plan.h"

namespace gearbox {

struct OptimizerOptions {
  bool enabled = true;                        // false: no pass runs
  std::vector<std::string> disabled_passes;   // names of passes not to run
  std::map<std::string, bool> switches;       // pass name -> on/off (a --fusion-switch file)
  size_t constant_fold_max_bytes = size_t(16) << 20;  // larger folded constants stay nodes
  // resolve_session_options adds GEARBOX_DISABLE_PASSES to these options (then clears it);
  // optimize() itself never reads the environment.
  bool use_env = true;
  // Plan the arena after the passes (graph/memory_plan.h), at the model's declared shapes.
  // Off by default: the executor's arena plans per input shape signature at run time
  // (runtime/arena.h), so only `gearbox compile` (which stores and reports it) and `gearbox
  // profile` ask for this one.
  bool plan_memory = false;
  MemoryPlanOptions memory;
  // The engine priority list the graph will run on; Session::create sets it to the session's
  // list. Passes that only pay on some engine read it: layout_nhwc runs only when cpu.dnnl
  // comes first. Empty means the sessions' default list (runtime/session.h kDefaultEngines,
  // cpu.dnnl first), so `gearbox compile` writes the graph a default session would run.
  std::string engines;
  // Told the phases "passes" (one unit per pass of the pipeline) and "plan" (gearbox compile).
  Progress* progress = nullptr;
};

struct PassInfo {
  std::string name;
  std::string description;
};

// Every pass of the default pipeline, in the order it runs.
const std::vector<PassInfo>& optimizer_passes();
// PASS_UNKNOWN for the first name that is not a pass (the message lists the valid names).
Status check_pass_names(const std::vector<std::string>& names, const std::string& where);
// Reads a --fusion-switch file: a JSON object {"pass_name": "on" | "off", ...}.
// FUSION_SWITCH_INVALID for unreadable files, bad JSON or values; PASS_UNKNOWN for names.
Result<std::map<std::string, bool>> read_fusion_switch_file(const std::string& path);

// A node a pass removed, and what computes its result now: the optimizer's own record, so
// that tools (--dump-tensors) can say which node replaced a node without redoing the passes.
struct NodeReplacement {
  std::string node;      // the removed node's name
  std::string op;        // its qualified op type ("Conv", "com.gearbox.FusedConv")
  std::string by;        // the node of the pass's output graph that computes its result; empty: none
  std::string by_op;     // that node's qualified op type
  std::string constant;  // the constant it was folded into (empty when not folded)
};

// A value a layout pass re-made in another layout: `value` (in `layout`) holds what `of`
// holds, in the layout `of` has; to_source() in runtime/tensor_dump.cc undoes it: Transpose
// by `perm`, then, when `merge_last_two`, the last two dims merged (a blocked C/16 x 16).
struct LayoutTwin {
  std::string value;
  std::string of;
  std::string layout;  // "nhwc", "nChw16c"
  std::vector<int64_t> perm;
  bool merge_last_two = false;
};

struct PassReport {
  std::string name;
  bool ran = false;  // false when switched off
  size_t nodes_before = 0, nodes_after = 0;
  int matches = 0;
  double ms = 0;
  std::vector<NodeReplacement> replaced;  // every node the pass removed, in graph order
  std::vector<LayoutTwin> twins;          // values the pass re-made in another layout
};

struct OptimizerReport {
  std::vector<PassReport> passes;
  size_t nodes_before = 0, nodes_after = 0;
  double ms = 0;
  MemoryPlan memory;  // of the optimized graph, when options.plan_memory
  // Matches of one pass (0 if it did not run or does not exist).
  int matches(const std::string& pass) const;
  // Every node the passes removed -> the node of the final graph that computes its result,
  // following each replacement through the later passes; "" for a node removed outright or
  // folded into a constant. Lets a name from the model (--keep-dtype, compare) find its node.
  std::map<std::string, std::string> final_nodes() const;
  // {"nodes_before":..,"nodes_after":..,"ms":..,"passes":[{"name":..,"ran":..,...}],
  //  "memory":{"naive_bytes":..,...}}
  // with_timings=false leaves out the "ms" fields: what goes into a .gbm must not depend on
  // how long the compile took, so that compiling twice gives byte-identical files.
  std::string to_json(bool with_timings = true) const;
};

// Runs the enabled passes over the model's main graph in place (the graph is shared with
// copies of the Model). The graph stays topologically sorted.
Result<OptimizerReport> optimize(Model& model, const OptimizerOptions& options = {});

}  // namespace gearbox
