// The precision debugger behind `gearbox compare MODEL --precision-mode X` (issue 23): the
// same model in force_fp32 and in a reduced mode, run side by side on the same inputs, with
// every node's outputs measured against its fp32 twin, in execution order.
//
// Both sessions are built from the same model with the same passes, so their nodes and values
// carry the same names; a value is matched by name (a layout twin is compared in the engine's
// layout, the same on both sides). Per node the error is the largest relative error of its
// outputs (max |reduced - fp32| / max |fp32|); what it was given is the largest error among
// its inputs. The node that "jumps" is one whose error is more than kJumpFactor times what it
// was given (at least the reduced format's unit roundoff, so a first rounding is no jump): the
// first such node in execution order is where the accuracy was lost, not merely passed on.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/session.h"

namespace gearbox {

struct ValueError {
  std::string value;
  double max_abs = 0;    // max |reduced - fp32|
  double max_ref = 0;    // max |fp32|
  double relative = 0;   // max_abs / max_ref (infinite when a value is not finite on one side only)
  double cosine = 1;     // of the two as vectors (1 when both are zero)
  int64_t elements = 0;
};

struct NodeError {
  std::string node, engine;
  std::string op_type;            // as the lists name it (precision_op_type: FusedConv is "Conv")
  std::vector<std::string> from;  // the model's nodes the passes fused into this one
  DType compute_dtype = DType::Undefined;  // Undefined: the node's own dtype
  std::vector<ValueError> outputs;
  double error = 0;  // the largest relative error of its outputs
  double given = 0;  // the largest relative error among its inputs (0 for model inputs, weights)
  double gain = 0;   // error / max(given, the reduced format's unit roundoff)
  bool jump = false;  // gain > kJumpFactor
};

struct PrecisionComparison {
  std::string mode;          // the reduced session's precision mode
  DType reduced = DType::Undefined;
  std::vector<NodeError> nodes;  // main-graph nodes in the reduced session's execution order
  std::optional<size_t> first_jump;  // index into nodes
  std::vector<ValueError> model_outputs;
  size_t unmatched = 0;  // values the fp32 twin has no counterpart of (not compared)

  // The human-readable report: the per-node table (`limit` rows at most, the jumps and the
  // largest gains always shown), the first jump with the way to keep it in fp32, the outputs.
  std::string table(size_t limit) const;
  nlohmann::json to_json() const;
};

constexpr double kJumpFactor = 8;

// One value's error: `reduced` against `fp32` (same element count; non-numeric tensors give
// zero elements). NaN or infinity on one side only is an infinite relative error.
ValueError compare_values(const std::string& name, const Tensor& reduced, const Tensor& fp32);

// Runs `inputs` through `fp32` and `reduced` (the same model; only their precision options may
// differ) and measures every node. USAGE when the two sessions' graphs do not match (different
// models or passes); a failed run is returned as it failed.
Result<PrecisionComparison> compare_precision(const Session& fp32, const Session& reduced,
                                              const std::map<std::string, Tensor>& inputs);

}  // namespace gearbox
