// `gearbox doctor --ops`: every operator this gearbox runs, from the kernel registry (so the
// list cannot drift from the code): per domain and op, the opsets served, the engines and the
// dtypes, then the contrib ops rewritten at import. The build writes docs/ops.md with it.
#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include "graph/contrib_ops.h"
#include "kernels/kernel.h"
#include "tools/commands.h"

namespace gearbox::cli {
namespace {

struct OpRow {
  std::set<int> opsets;
  std::set<std::string> engines;
  std::set<std::string> dtypes;
  bool any_dtype = false;
  bool open_ended = false;  // a custom domain's kernel registered for every later opset
};

// "1-5, 7-21": the opsets as runs. Kernels registered to "any later" opset (plugins, custom
// domains) are shown from their first opset on.
std::string runs(const std::set<int>& opsets, bool open_ended) {
  std::string out;
  for (auto it = opsets.begin(); it != opsets.end();) {
    int lo = *it, hi = lo;
    for (++it; it != opsets.end() && *it == hi + 1; ++it) hi = *it;
    if (!out.empty()) out += ", ";
    out += std::to_string(lo);
    if (open_ended && it == opsets.end()) out += "+";
    else if (hi != lo) out += "-" + std::to_string(hi);
  }
  return out;
}

std::string joined(const std::set<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

}  // namespace

int print_ops_markdown() {
  // Opsets are probed through KernelDef::serves, the registry's own rule (ai.onnx kernels
  // registered to 18 also serve 19-21 unless their op changed there).
  constexpr int kProbeLimit = 64;
  std::map<std::pair<std::string, std::string>, OpRow> rows;
  for (const KernelDef& d : KernelRegistry::global().all()) {
    const std::string domain = d.domain.empty() ? "ai.onnx" : std::string(d.domain);
    OpRow& row = rows[{domain, std::string(d.op_type)}];
    const int last = d.domain.empty() ? kNewestOnnxOpset : std::min(d.end_version, kProbeLimit);
    for (int v = d.since_version; v <= last; ++v)
      if (d.serves(v)) row.opsets.insert(v);
    row.open_ended |= !d.domain.empty() && d.end_version > kProbeLimit;
    row.engines.insert(std::string(d.engine));
    if (d.dtypes.empty()) row.any_dtype = true;
    for (DType t : d.dtypes) row.dtypes.insert(std::string(dtype_name(t)));
  }
  std::cout << "# Operators gearbox runs\n\n"
               "Generated from the kernel registry by the build (`gearbox doctor --ops`); do not edit. An op "
               "runs at the opsets listed (ai.onnx accepts opsets 1-"
            << kNewestOnnxOpset
            << "); each engine runs the opsets and dtypes it registered, and the session picks per node "
               "(docs/engines.md). \"any\": the kernel checks the dtype itself. Custom-op plugins add their "
               "own (docs/custom_ops.md); docs/conformance.md says how each op is tested.\n\n";
  std::string domain;
  size_t count = 0;
  for (const auto& [key, row] : rows) {
    if (row.opsets.empty()) continue;
    if (key.first != domain) {
      domain = key.first;
      std::cout << "\n## " << domain << "\n\n| op | opsets | engines | dtypes |\n|---|---|---|---|\n";
    }
    std::string dtypes = joined(row.dtypes);
    if (row.any_dtype) dtypes = dtypes.empty() ? "any" : "any (" + dtypes + " on some engines)";
    std::cout << "| " << key.second << " | " << runs(row.opsets, row.open_ended) << " | " << joined(row.engines)
              << " | " << dtypes << " |\n";
    ++count;
  }
  std::cout << "\n## Rewritten at import\n\nThese run as the ai.onnx and com.gearbox ops above "
               "(src/graph/contrib_ops.cc; their forms: docs/conformance.md).\n\n";
  for (const std::string& op : contrib_rewritten_ops()) std::cout << "- " << op << "\n";
  std::cout << "\n" << count << " operators with kernels.\n";
  return 0;
}

}  // namespace gearbox::cli
