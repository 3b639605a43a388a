// The accuracy budget of `gearbox compile --precision-mode MODE --accuracy-budget
// "cosine>=0.9999,top1>=0.995"` (issue 23, docs/precision.md): the fewest lowered layers kept in
// fp32 for the reduced model to stay within the budget on a calibration set.
//
// How: the model runs in force_fp32 and in MODE on every calibration sample; where MODE already
// meets the budget nothing falls back. Otherwise each lowered node's sensitivity is measured
// alone: the model with only that node in MODE (every other one kept in fp32) runs on the first
// samples, and the error of its outputs against fp32 ranks it. A node's own gain (the error it
// adds to what it is given, from the precision debugger, precision_compare.h) is not enough: a
// network's first convolution adds little error itself and yet, amplified by every layer after
// it, costs the outputs more than most (ResNet-50). The search then keeps the first k of that
// ranking in fp32, k = 1, 2, 4, ... until the budget holds, then bisects to the smallest k
// that holds. Each try
// is a session built with those nodes in SessionOptions::keep_dtype_nodes and measured on the
// whole calibration set, so what is reported is measured, not estimated. The fp32 and the
// final sessions are then timed against each other, alternating, for the speed the budget
// leaves.
//
// The budget is never unattainable: with every lowered node kept, the model is the fp32 one.
// When only that meets it, the result says so (met, but nothing is faster than force_fp32), so
// the caller can tell the user to loosen the budget or compile in force_fp32.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/progress.h"
#include "runtime/session.h"

namespace gearbox {

// "cosine>=0.9999,top1>=0.995,relative<=0.01", any subset, in any order:
//   cosine    the smallest cosine similarity of a float output to its fp32 twin, over outputs
//             and samples;
//   top1      the share of rows (a float output's last axis; rank >= 1, at least 2 classes)
//             whose argmax agrees with fp32's, over outputs and samples;
//   relative  the largest max |reduced - fp32| / max |fp32| of an output, over outputs and samples.
// ACCURACY_BUDGET_INVALID for anything else (an unknown metric, a wrong comparison, a value out
// of range, an empty budget).
struct AccuracyBudget {
  std::optional<double> cosine, top1, relative;
  std::string text() const;  // as parsed, normalized: "cosine>=0.9999,top1>=0.995"
};
Result<AccuracyBudget> parse_accuracy_budget(std::string_view text);

// What a budget's metrics measured on a calibration set.
struct AccuracyMeasure {
  double cosine = 1, top1 = 1, relative = 0;
  size_t rows = 0;  // the rows top1 counted (0: no output has classes)
  bool meets(const AccuracyBudget& budget) const;
  // The metrics the budget names, with what they need: "cosine 0.99821 (>= 0.9999: no)".
  std::string describe(const AccuracyBudget& budget) const;
};

// Measures the reduced session's outputs against the fp32 ones, sample by sample.
AccuracyMeasure measure_accuracy(const std::vector<std::vector<Tensor>>& fp32,
                                 const std::vector<std::vector<Tensor>>& reduced);

struct Fallback {
  std::string node, op_type;
  std::vector<std::string> from;  // the model's nodes the passes fused into it
  double gain = 0;                // its error over what it was given (precision_compare.h)
  double error = 0;               // its outputs' relative error against fp32, everything lowered
  // The model's outputs with only this node lowered (the ranking: 1 - cosine, then relative).
  AccuracyMeasure alone;
};

struct BudgetTry {
  size_t kept = 0;  // the first `kept` of the ranking in fp32
  AccuracyMeasure measure;
  bool met = false;
};

struct BudgetResult {
  AccuracyBudget budget;
  std::string mode;
  size_t samples = 0;
  size_t lowered = 0;             // nodes the mode lowers without a budget
  AccuracyMeasure without;        // the mode's accuracy with nothing kept
  std::vector<Fallback> ranking;  // every lowered node, most sensitive first
  std::vector<BudgetTry> tries;   // in the order made
  size_t kept = 0;                // the first `kept` of the ranking stay fp32
  AccuracyMeasure achieved;
  bool met = false;                    // always true unless a run failed (then an error is returned)
  bool all_kept = false;               // met only with every lowered node in fp32: no faster than fp32
  double fp32_ms = 0, reduced_ms = 0;  // median run times, alternating, on the first sample
  size_t timing_runs = 0;              // of each

  std::vector<std::string> kept_nodes() const;  // the names, for SessionOptions::keep_dtype_nodes
  std::string summary() const;                  // the report's lines: the budget, what was kept and why, the speed
  nlohmann::json to_json() const;
};

// Builds a session of the model with the given options (the caller's model: a path it loads,
// or bytes it parses).
using SessionFactory = std::function<Result<std::unique_ptr<Session>>(const SessionOptions&)>;

struct BudgetOptions {
  size_t rank_samples = 2;  // the samples the ranking runs on (the first ones)
  size_t timing_runs = 5;   // per session, alternating, after one warm-up each
  Progress* progress = nullptr;
};

// `reduced`: the options of the model in its reduced mode (force_fp32 is USAGE: nothing to
// keep). `calibration`: one feed map per sample (USAGE when empty). A failed session or run is
// returned as it failed.
Result<BudgetResult> fit_accuracy_budget(const SessionFactory& make_session, const SessionOptions& reduced,
                                         const AccuracyBudget& budget,
                                         const std::vector<std::map<std::string, Tensor>>& calibration,
                                         const BudgetOptions& options = {});

}  // namespace gearbox
