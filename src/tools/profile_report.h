// What `gearbox profile` writes, computed from a Profiler's records: per-op summaries with
// roofline figures, the Chrome trace, the memory timeline, the advisor's findings and the
// self-contained HTML page.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/profiler.h"

namespace gearbox::cli {

// The device's peak rates the roofline is drawn against.
struct Roofline {
  double peak_gflops = 0;    // fp32
  double bandwidth_gbs = 0;  // memory
  std::string source;        // "calibration cache", "quick measurement"
  double ridge() const { return bandwidth_gbs > 0 ? peak_gflops / bandwidth_gbs : 0; }
};

// One row of op_summary.csv: an op type ("op_type" rows) or one node ("node" rows).
struct OpSummary {
  std::string kind;  // "op_type" or "node"
  std::string name;  // the op type, or the node name
  std::string op_type;
  std::string engine;
  int calls = 0;
  double total_ms = 0, min_ms = 0, max_ms = 0;
  double flops = 0;
  double bytes = 0;
  double mean_ms() const { return calls ? total_ms / calls : 0; }
  double gflops_per_s() const { return total_ms > 0 ? flops / (total_ms * 1e6) : 0; }
  double gb_per_s() const { return total_ms > 0 ? bytes / (total_ms * 1e6) : 0; }
  double intensity() const { return bytes > 0 ? flops / bytes : 0; }
};

struct Finding {
  std::string rule;      // "idle-gaps", "copies", "below-roofline", "memory-peak", "unfused", "preprocessing"
  std::string evidence;  // figures from this profile
  std::string fix;
};

// One value of the memory planner's arena plan (graph/memory_plan.h), by name: the plan's
// Value pointers belong to the session's graph.
struct ArenaRow {
  std::string value;
  size_t offset = 0, bytes = 0;
  int first = 0, last = 0;              // main-graph node indices of its lifetime, inclusive
  std::string first_node, last_node;    // their names
  std::string in_place_of;              // the input whose memory it reuses, if any
};

struct ArenaPlan {
  std::vector<ArenaRow> rows;
  size_t planned_bytes = 0, naive_bytes = 0, lower_bound_bytes = 0;
  int unsized_values = 0;  // intermediates without a static shape: not in the plan
  std::string not_made;    // why no plan was made (symbolic dims no --input-shape fixed); empty: made
  // What the profiled runs used: the arenas of the session's prepared plans (runtime/arena.h),
  // or why they had none.
  size_t run_arena_bytes = 0;
  uint64_t run_arena_fallbacks = 0;
  std::string run_arena_not_made;
};

struct ProfileData {
  std::string model;
  std::vector<OpRecord> ops;
  std::vector<RunRecord> runs;
  Roofline roofline;
  std::optional<size_t> pool_capacity;     // the device pool's capacity, when known
  // Passes switched off that would have matched: "pass conv_fusion is off; with it on it matches 3 ..."
  std::vector<std::string> unfused_patterns;
  std::optional<ArenaPlan> arena;  // when the memory planner ran on the session's graph
};

// Rows by op type, then by node; each group sorted by total time, largest first.
std::vector<OpSummary> summarize(const ProfileData& d);
// Total wall time of the profiled runs, ms.
double total_run_ms(const ProfileData& d);
// Sum of the main-graph op slices, ms (subgraph ops are inside their If/Loop node's slice).
double total_op_ms(const ProfileData& d);
double attainable_gflops(const Roofline& r, double intensity);

std::vector<Finding> advise(const ProfileData& d);

std::string trace_json(const ProfileData& d);
std::string op_summary_csv(const ProfileData& d);
std::string memory_csv(const ProfileData& d);
std::string report_html(const ProfileData& d);

}  // namespace gearbox::cli
