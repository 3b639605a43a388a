// `gearbox profile` and `gearbox demo`: the figures the advisor and the report read besides the
// profiler's records (see profile_collect.h).
#include "tools/profile_collect.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "device/calibration.h"
#include "device/device.h"
#include "device/memory_pool.h"
#include "graph/onnx_importer.h"
#include "graph/optimizer.h"
#include "runtime/plan_cache.h"

namespace gearbox::cli {

Roofline measure_roofline() {
  Roofline r;
  auto dev = device::get_device(device::DeviceKind::CPU, 0);
  if (!dev.ok()) return r;
  const auto& caps = (*dev)->capabilities();
  std::optional<device::Peaks> peaks = device::load_cached_peaks(caps);
  r.source = "calibration cache";
  if (!peaks) {
    auto measured = (*dev)->measure_peaks(100);
    if (!measured.ok()) return r;
    peaks = *measured;
    r.source = "quick measurement (gearbox smi --calibrate caches a longer one)";
  }
  r.peak_gflops = peaks->fp32_gflops.value_or(0);
  r.bandwidth_gbs = peaks->bandwidth_gbs.value_or(0);
  return r;
}

namespace {

// Passes switched off for this run that would have matched: the advisor's "unfused"
// evidence. What ran comes from the session's own report; what would have matched needs one
// more import with every pass on, so it is only done when some pass was off.
std::vector<std::string> unfused_patterns(const std::string& model_path, const OptimizerReport& as_run) {
  if (std::none_of(as_run.passes.begin(), as_run.passes.end(), [](const PassReport& p) { return !p.ran; })) return {};
  auto model = import_onnx_file(model_path);
  if (!model.ok()) return {};
  OptimizerOptions all_on;
  all_on.use_env = false;
  auto full = optimize(*model, all_on);
  if (!full.ok()) return {};
  std::vector<std::string> out;
  for (const PassReport& p : as_run.passes) {
    int m = full->matches(p.name);
    if (!p.ran && m > 0)
      out.push_back(fmt::format("pass {} is off; with it on it matches {} time(s) in this model", p.name, m));
  }
  return out;
}

// The memory planner's arena plan of the session's main graph, by value and node name;
// none when the planner did not run (a .gbm: its optimizer is off) or planned nothing.
std::optional<ArenaPlan> arena_plan(const Session& session) {
  const MemoryPlan& plan = session.optimizer_report().memory;
  const PlanCacheStats runs = session.plan_cache_stats();
  if (plan.placements.empty() && plan.unsized_values == 0 && runs.arenas == 0) return std::nullopt;
  const auto& nodes = session.model().graph->nodes;
  // A graph output lives to the end: index nodes.size().
  auto name = [&](int i) {
    return i >= 0 && static_cast<size_t>(i) < nodes.size() ? nodes[i]->name : std::string("(end of graph)");
  };
  ArenaPlan a;
  a.planned_bytes = plan.planned_bytes;
  a.naive_bytes = plan.naive_bytes;
  a.lower_bound_bytes = plan.lower_bound_bytes;
  a.unsized_values = plan.unsized_values;
  a.not_made = plan.not_made;
  a.run_arena_bytes = runs.arena_bytes;
  a.run_arena_fallbacks = runs.arena_fallbacks;
  a.run_arena_not_made = runs.arenas ? std::string() : runs.arena_not_made;
  for (const BufferPlacement& p : plan.placements)
    a.rows.push_back({p.value->name, p.offset, p.bytes, p.first, p.last, name(p.first), name(p.last),
                      p.in_place_of ? p.in_place_of->name : std::string()});
  std::sort(a.rows.begin(), a.rows.end(), [](const ArenaRow& x, const ArenaRow& y) {
    return x.first != y.first ? x.first < y.first : x.offset < y.offset;
  });
  return a;
}
}  // namespace

ProfileData collect_profile(const Session& session, const Profiler& profiler, const std::string& model_path) {
  ProfileData d;
  d.model = model_path;
  d.ops = profiler.ops();
  d.runs = profiler.runs();
  d.roofline = measure_roofline();
  d.unfused_patterns = unfused_patterns(model_path, session.optimizer_report());
  d.arena = arena_plan(session);
  if (auto dev = device::get_device(device::DeviceKind::CPU, 0); dev.ok())
    if (auto pool = (*dev)->pool(); pool.ok()) d.pool_capacity = (*pool)->stats().capacity;
  return d;
}

}  // namespace gearbox::cli
