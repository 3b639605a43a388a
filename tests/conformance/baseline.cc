// The per-case conformance baseline (baseline.h).
#include "baseline.h"

#include <sstream>

namespace gearbox::conformance {

std::optional<std::set<std::string>> parse_baseline(const std::string& text) {
  std::set<std::string> names;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    auto last = line.find_last_not_of(" \t\r");
    std::string name = line.substr(first, last - first + 1);
    if (name.rfind("test_", 0) != 0 || name.find_first_of(" \t") != std::string::npos) return std::nullopt;
    names.insert(name);
  }
  return names;
}

BaselineDiff diff_baseline(const std::vector<CaseResult>& results, const std::set<std::string>& baseline,
                           const std::function<bool(const std::string&)>& selected) {
  BaselineDiff d;
  std::set<std::string> ran;
  for (const CaseResult& r : results) {
    ran.insert(r.name);
    const bool listed = baseline.count(r.name) > 0;
    if (listed) ++d.listed_ran;
    if (listed && !r.passed) d.regressed.push_back(r.name + " (" + r.status + ")");
    if (!listed && r.passed) d.newly_passing.push_back(r.name);
  }
  for (const std::string& name : baseline)
    if (!ran.count(name) && selected(name)) d.missing.push_back(name);
  return d;
}

}  // namespace gearbox::conformance
