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
#include "runtime/profiler.h"
#include "runtime/session.h"
#include "tools/commands.h"
#include "tools/engine_option.h"
#include "tools/model_inputs.h"
#include "tools/profile_collect.h"
#include "tools/profile_dump.h"
#include "tools/profile_report.h"

namespace gearbox::cli {
namespace {

struct ProfileOptions {
  std::string model;
  InputFlags input;  // --input, --random-inputs, --npy-allow-trailing-bytes, --strict-input-dtype
  int loop = 10;
  int warmup = 1;
  std::string output_dir;
  SessionFlags session;  // --threads, --engines, --engine, --disable-pass, ...
  DumpOptions dump;      // --dump-tensors, --dump-dir
};

Status write_file(const std::filesystem::path& path, const std::string& text) {
  return write_file_atomically(path.string(), text);
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
  auto feeds = load_inputs(**session, o.input);
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

  const ProfileData d = collect_profile(**session, profiler, o.model);

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
  add_input_flags(sub, &o->input);
  sub->add_option("--loop", o->loop, "Profiled runs (default 10)");
  sub->add_option("--warmup", o->warmup, "Unprofiled runs first (default 1)");
  add_session_flags(sub, &o->session);
  sub->add_option("--output-dir", o->output_dir, "Where trace.json, op_summary.csv, memory.csv, report.html go")
      ->required();
  add_dump_options(sub, &o->dump);
  sub->callback([o, action] { *action = [o] { return profile(*o); }; });
}

}  // namespace gearbox::cli
