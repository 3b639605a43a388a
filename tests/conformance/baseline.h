// The conformance baseline: the names of the node-suite cases that pass, one per line, and
// the comparison of a run against it (what changed, and whether that fails the run).
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace gearbox::conformance {

// The case names in `text` (one per line; blank lines and lines starting with '#' skipped).
// nullopt when a line is not a case name (test_..., no spaces): e.g. the old single count.
std::optional<std::set<std::string>> parse_baseline(const std::string& text);

struct CaseResult {
  std::string name;
  bool passed = false;
  std::string status;  // "FAIL", "UNSUPPORTED", ... for the report
};

struct BaselineDiff {
  std::vector<std::string> regressed;       // listed, ran, did not pass ("name (STATUS)")
  std::vector<std::string> newly_passing;   // passed, not listed
  std::vector<std::string> missing;         // listed, selected by the filter, not in the suite
  size_t listed_ran = 0;                    // listed cases that ran
  // A regression or a missing case fails the run, whatever else started passing.
  bool failed() const { return !regressed.empty() || !missing.empty(); }
};

// `selected(name)`: whether the run's --filter selects a case (all, without a filter).
BaselineDiff diff_baseline(const std::vector<CaseResult>& results, const std::set<std::string>& baseline,
                           const std::function<bool(const std::string&)>& selected);

}  // namespace gearbox::conformance
