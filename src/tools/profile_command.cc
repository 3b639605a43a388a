// `gearbox profile MODEL --output-dir DIR`: runs a model under the executor's profiling hooks
// and writes trace.json (Chrome trace events), op_summary.csv, memory.csv and report.html,
// with the advisor's findings also printed on stdout.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "base/atomic_file.h"
#include "device/calibration.h"
#include "device/device.h"
#include "device/memory_pool.h"
#include "graph/onnx_importer.h"
#include "graph/optimizer.h"
#include "runtime/plan_cache.h"
#include "runtime/profiler.h"
#include "runtime/session.h"
#include "tools/commands.h"
#include "tools/engine_option.h"
#include "tools/model_inputs.h"
#include "tools/profile_dump.h"
#include "tools/profile_report.h"

namespace gearbox::cli {
namespace {

struct ProfileOptions {
  std::string model;
  std::vector<std::string> inputs;
  NpyReadOptions npy;
  bool random_inputs = false;
  int loop = 10;
  int warmup = 1;
  std::string output_dir;
  SessionFlags session;  // --threads, --engines, --engine, --disable-pass, ...
  DumpOptions dump;      // --dump-tensors, --dump-dir
};

Status write_file(const std::filesystem::path& path, const std::string& text) {
  return write_file_atomically(path.string(), text);
}

// The roofline: cached calibration when there is one, else a quick measurement (~0.1 s a rate).
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

int profile(const ProfileOptions& o) {
  if (o.loop < 1 || o.warmup < 0)
    return report(
        make_error(ErrorCode::USAGE, "--loop must be >= 1 and --warmup >= 0 (got ", o.loop, " and ", o.warmup, ")"));
  SessionOptions base;
  base.optimizer.plan_memory = true;  // memory.csv shows the arena plan next to the pool's use
  auto so = o.session.to_session_options(base);
  if (!so.ok()) return report(so.status());
  auto session = Session::load(o.model, *so);
  if (!session.ok()) return report(session.status());
  if (Status st = check_dump(o.dump, **session, o.model); !st.ok()) return report(st);
  auto feeds = load_inputs(**session, o.inputs, o.random_inputs, o.npy);
  if (!feeds.ok()) return report(feeds.status());
  std::error_code ec;
  std::filesystem::create_directories(o.output_dir, ec);
  if (ec)
    return report(
        make_error(ErrorCode::FILE_WRITE_FAILED, "cannot create output folder '", o.output_dir, "': ", ec.message()));

  for (int i = 0; i < o.warmup; ++i) {
    auto r = (*session)->run(*feeds);
    if (!r.ok()) return report(r.status());
  }
  // Tensors are dumped in a run of their own, before and outside the profiled ones.
  size_t dumped = 0;
  if (o.dump.enabled()) {
    auto n = run_dump(o.dump, **session, *feeds);
    if (!n.ok()) return report(n.status());
    dumped = *n;
  }
  Profiler profiler;
  for (int i = 0; i < o.loop; ++i) {
    auto r = (*session)->run(*feeds, &profiler);
    if (!r.ok()) return report(r.status());
  }

  ProfileData d;
  d.model = o.model;
  d.ops = profiler.ops();
  d.runs = profiler.runs();
  d.roofline = measure_roofline();
  d.unfused_patterns = unfused_patterns(o.model, (*session)->optimizer_report());
  d.arena = arena_plan(**session);
  if (auto dev = device::get_device(device::DeviceKind::CPU, 0); dev.ok())
    if (auto pool = (*dev)->pool(); pool.ok()) d.pool_capacity = (*pool)->stats().capacity;

  const std::filesystem::path dir(o.output_dir);
  for (const auto& [name, text] : {std::pair<const char*, std::string>{"trace.json", trace_json(d)},
                                   {"op_summary.csv", op_summary_csv(d)},
                                   {"memory.csv", memory_csv(d)},
                                   {"report.html", report_html(d)}}) {
    Status st = write_file(dir / name, text);
    if (!st.ok()) return report(st);
  }
  const double run_ms = total_run_ms(d);
  std::cout << fmt::format("profiled {} run(s) of {}: {:.3f} ms per run, {} op executions\n", d.runs.size(), o.model,
                           run_ms / static_cast<double>(d.runs.size()), d.ops.size());
  int shown = 0;
  for (const OpSummary& s : summarize(d)) {
    if (s.kind != "op_type" || shown++ >= 5) continue;
    std::cout << fmt::format("  {:<28} {:>5} calls {:>10.3f} ms {:>5.1f}%  {:>8.2f} GFLOP/s\n", s.op_type, s.calls,
                             s.total_ms, run_ms > 0 ? 100 * s.total_ms / run_ms : 0, s.gflops_per_s());
  }
  for (const Finding& f : advise(d))
    std::cout << "advisor [" << f.rule << "] " << f.evidence << "\n  fix: " << f.fix << "\n";
  std::cout << "wrote " << (dir / "trace.json").string() << ", op_summary.csv, memory.csv, report.html\n";
  if (o.dump.enabled())
    std::cout << "dumped " << dumped << " tensor(s) to " << o.dump.dir << " (see index.json there)\n";
  return 0;
}

}  // namespace

void add_profile_command(CLI::App& app, std::function<int()>* action) {
  auto o = std::make_shared<ProfileOptions>();
  CLI::App* sub = app.add_subcommand("profile", "Profile a model: timeline, op and memory views, roofline, advisor");
  sub->add_option("model", o->model, "The model (.onnx)")->required();
  sub->add_option("--input", o->inputs, "NAME=FILE.npy for a model input (repeatable)");
  sub->add_flag("--random-inputs", o->random_inputs, "Fill inputs not given with deterministic random data");
  sub->add_flag("--npy-allow-trailing-bytes", o->npy.allow_trailing_bytes,
                "Read .npy inputs that have bytes after their data, ignoring them (as numpy does)");
  sub->add_option("--loop", o->loop, "Profiled runs (default 10)");
  sub->add_option("--warmup", o->warmup, "Unprofiled runs first (default 1)");
  add_session_flags(sub, &o->session);
  sub->add_option("--output-dir", o->output_dir, "Where trace.json, op_summary.csv, memory.csv, report.html go")
      ->required();
  add_dump_options(sub, &o->dump);
  sub->callback([o, action] { *action = [o] { return profile(*o); }; });
}

}  // namespace gearbox::cli
