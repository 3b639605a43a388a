// The strategy search of gearbox plan: every data x tensor x pipeline split of N devices, each
// with its micro-batch counts, schedules (GPipe, 1F1B), ZeRO stages and recomputation, is costed
// by the cost model (cost_model.h) with the stage cut points chosen per candidate; layouts over
// the memory limit are dropped, the rest ranked by predicted step time.
//
// Per-layer split choices: for tp > 1 each candidate is also costed with the units that gain
// from running whole on every tensor-parallel rank replicated (choose_replication), both kept.
//
// Stage cuts: the cut that minimises the slowest stage's forward + backward time subject to
// each stage's memory limit (stage i holds in_flight(i) micro-batches' activations). Found by
// bisection on that time with a greedy packing as the feasibility test; the packing is exact
// for contiguous cuts under per-stage limits that only grow tighter as a stage takes more
// units, so the result is the optimum cut up to the bisection's tolerance (1e-9 relative). The
// makespan then comes from playing the schedule out (simulate_pipeline).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/plan/cost_model.h"

namespace gearbox::comm::plan {

struct Candidate {
  Layout layout;
  Estimate estimate;
};

struct SearchOptions {
  double memory_limit = 0;  // bytes per device
  int keep = 5;             // the best layouts returned
  bool allow_zero = true;
  bool allow_recompute = true;
  bool allow_gpipe = true;
  bool allow_replication = true;  // per-layer split choices (Layout::replicated_units)
};

struct PlanResult {
  std::vector<Candidate> best;  // fitting layouts, fastest first (at most options.keep)
  int64_t evaluated = 0;        // layouts costed
  int64_t fitting = 0;          // of which fit in memory
  double smallest_memory = 0;   // the least memory per device any layout needs
  // Plain data parallelism over every device (tp = pp = 1, no ZeRO, no recomputation, one
  // micro-batch when the batch allows it), for comparison; unset when the batch does not split.
  bool has_data_parallel = false;
  Candidate data_parallel;
  // The best layout of each dp x tp x pp (the fastest that fits, else the one needing the least
  // memory), in the order tried: what the plot shows.
  struct PerDegrees {
    Candidate best;
    bool fits = false;
  };
  std::vector<PerDegrees> per_degrees;
};

// The stage cut for a layout whose other fields are set: fills layout->stage_units and returns
// true when every stage fits `memory_limit`; false when no cut does.
bool choose_stage_cut(const TransformerSpec& spec, const Hardware& hw, double memory_limit, Layout* layout);

// The per-layer split choice for a layout with tp > 1 whose stage cut fits `memory_limit`:
// replicates the units that gain by running whole on every tensor-parallel rank, as many of
// them, most time saved per byte first, as still fit, and re-cuts the stages. False (layout
// untouched) when no unit gains or none fits.
bool choose_replication(const TransformerSpec& spec, const Hardware& hw, double memory_limit, Layout* layout);

// PLAN_INFEASIBLE when nothing fits (the message gives the smallest memory a layout needs),
// INVALID_ARGUMENT for devices < 1.
Result<PlanResult> search(const TransformerSpec& spec, int devices, const Hardware& hw, const SearchOptions& options);

}  // namespace gearbox::comm::plan
