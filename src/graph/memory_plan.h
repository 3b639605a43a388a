// Memory planning: every intermediate tensor of a graph gets an offset in one arena.
//
// Lifetimes run over the execution order (a value lives from the node that produces it to
// its last reader; graph outputs to the end). Offsets come from greedy-by-size best fit:
// largest tensors first, each into the smallest gap left by the already placed tensors whose
// lifetimes overlap it, else on top. Element-wise operators may write their output over an
// input whose last reader they are (in-place). Sizes are 64-byte aligned.
//
// The report gives naive bytes (every intermediate side by side), planned bytes (the arena)
// and the lower bound (the largest set of simultaneously live bytes); logged under
// [MEM_ALLOC]. Values whose shape is not static (after binding named dims) are left out and
// counted; when none is left, the plan is not made, and `not_made` says why (the symbolic
// dims that no --input-shape fixed).
//
// Two modes. The default is the estimate a compiled model (.gbm) records: any element-wise
// operator may write over its input. `as_executed` is what the executor's arena places
// (runtime/arena.h): in place only where a kernel really writes an output over an input (the
// fused convolutions' residual Z), the output of a view operator (Reshape, Flatten, Squeeze,
// Unsqueeze, Identity, Dropout: the kernel returns its input's buffer) shares its input's
// buffer for as long as either lives, and a buffer that holds a graph output (handed to the
// caller, who may keep it past the run) is left out of the arena.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "graph/ir.h"

namespace gearbox {

struct MemoryPlanOptions {
  size_t alignment = 64;
  bool in_place = true;
  bool as_executed = false;  // see the header comment
  std::map<std::string, int64_t> dim_values;  // values for symbolic dims ("batch" -> 1)
};

struct BufferPlacement {
  const Value* value = nullptr;
  size_t offset = 0;
  size_t bytes = 0;               // aligned
  int first = 0, last = 0;        // node indices of the lifetime, inclusive
  const Value* in_place_of = nullptr;  // the input whose memory it reuses, if any
};

struct MemoryPlan {
  std::vector<BufferPlacement> placements;
  size_t naive_bytes = 0;
  size_t planned_bytes = 0;
  size_t lower_bound_bytes = 0;
  int in_place_reuses = 0;
  int unsized_values = 0;  // intermediates without a static size: not planned
  int escaping_values = 0;  // as_executed: graph outputs and values sharing their buffer, left out
  // Empty when a plan was made; otherwise why not ("3 intermediates have symbolic dims (batch,
  // seq) that no --input-shape fixed").
  std::string not_made;
  bool made() const { return not_made.empty(); }
  // {"made":..,"naive_bytes":..,"planned_bytes":..,"lower_bound_bytes":..,"in_place_reuses":..,...}
  // with "not_made" (the reason) when no plan was made.
  nlohmann::json summary() const;
};

// Plans the intermediates (node outputs) of g, one level (subgraph values are not planned).
MemoryPlan plan_memory(const Graph& g, const MemoryPlanOptions& options = {});

}  // namespace gearbox
