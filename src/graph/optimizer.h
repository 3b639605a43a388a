// The graph optimizer: named passes in one default pipeline, each switchable by name, with
// a report per pass (nodes before and after, matches, time), logged under [GRAPH_OPTIMIZER].
//
//   OptimizerOptions opts;
//   opts.disabled_passes = {"attention_fusion"};
//   GBX_ASSIGN_OR_RETURN(OptimizerReport report, optimize(model, opts));
//
// Switches, in order of precedence: GEARBOX_DISABLE_PASSES (comma list of names, or "all")
// turns passes off for every session of the process (so whole test suites can run with the
// optimizer off); `switches` (from a --fusion-switch JSON file) turns a pass on or off;
// `disabled_passes` (--disable-pass NAME) turns it off. An unknown name is PASS_UNKNOWN,
// listing the valid names. See docs/graph_engine.md.
#pragma once

#include <cstddef>
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
  bool use_env = true;                        // honour GEARBOX_DISABLE_PASSES
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

struct PassReport {
  std::string name;
  bool ran = false;  // false when switched off
  size_t nodes_before = 0, nodes_after = 0;
  int matches = 0;
  double ms = 0;
};

struct OptimizerReport {
  std::vector<PassReport> passes;
  size_t nodes_before = 0, nodes_after = 0;
  double ms = 0;
  MemoryPlan memory;  // of the optimized graph, when options.plan_memory
  // Matches of one pass (0 if it did not run or does not exist).
  int matches(const std::string& pass) const;
  // {"nodes_before":..,"nodes_after":..,"ms":..,"passes":[{"name":..,"ran":..,...}],
  //  "memory":{"naive_bytes":..,...}}
  std::string to_json() const;
};

// Runs the enabled passes over the model's main graph in place (the graph is shared with
// copies of the Model). The graph stays topologically sorted.
Result<OptimizerReport> optimize(Model& model, const OptimizerOptions& options = {});

}  // namespace gearbox
