// `gearbox run MODEL`: runs a model on .npy inputs (or deterministic random ones), writes
// outputs as .npy and reports latency; `--json` prints exactly one JSON object on stdout.
// `--timeout SECONDS` gives each run a deadline (RUN_DEADLINE_EXCEEDED, exit 1).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/npy.h"
#include "tools/commands.h"
#include "tools/engine_option.h"
#include "tools/latency_stats.h"
#include "tools/model_inputs.h"
#include "tools/profile_dump.h"

namespace gearbox::cli {
namespace {

struct RunOptions {
  std::string model;
  InputFlags input;  // --input, --random-inputs, --npy-allow-trailing-bytes, --strict-input-dtype
  std::string output_dir;
  int loop = 1;
  int warmup = 0;
  bool json = false;
  double timeout = 0;  // --timeout: seconds each run may take
  bool timeout_given = false;
  SessionFlags session;  // --threads, --engines, --engine, --disable-pass, ...
  DumpOptions dump;      // --dump-tensors, --dump-dir
};

// A short preview of a tensor's first values, for the human-readable report.
std::string preview(const Tensor& t) {
  std::string out = "[";
  int64_t n = std::min<int64_t>(t.numel(), 6);
  for (int64_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    if (t.dtype() == DType::String) out += "\"" + t.strings()[i] + "\"";
    else out += fmt::format("{:.6g}", t.at_double(i));
  }
  return out + (t.numel() > n ? ", ...]" : "]");
}

int run(const RunOptions& o) {
  if (o.loop < 1 || o.warmup < 0)
    return report(
        make_error(ErrorCode::USAGE, "--loop must be >= 1 and --warmup >= 0 (got ", o.loop, " and ", o.warmup, ")"));
  if (o.timeout_given && !(std::isfinite(o.timeout) && o.timeout > 0))
    return report(make_error(ErrorCode::USAGE, "--timeout must be a number of seconds > 0 (got ", o.timeout, ")"));
  auto so = o.session.to_session_options();
  if (!so.ok()) return report(so.status());
  auto session = Session::load(o.model, *so);
  if (!session.ok()) return report(session.status());
  if (Status st = check_dump(o.dump, **session, o.model); !st.ok()) return report(st);
  auto feeds = load_inputs(**session, o.input);
  if (!feeds.ok()) return report(feeds.status());

  std::vector<Tensor> outputs;
  std::vector<double> times;
  for (int i = 0; i < o.warmup + o.loop; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    gearbox::RunOptions run_options;  // each run gets --timeout seconds from its start
    if (o.timeout_given)
      run_options.deadline = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(o.timeout));
    auto r = (*session)->run(*feeds, run_options);
    auto t1 = std::chrono::steady_clock::now();
    if (!r.ok()) return report(r.status());
    if (i >= o.warmup) times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    outputs = std::move(r).value();
  }
  // The dump gets a run of its own, so its file writes are not in the latency figures.
  size_t dumped = 0;
  if (o.dump.enabled()) {
    auto n = run_dump(o.dump, **session, *feeds);
    if (!n.ok()) return report(n.status());
    dumped = *n;
  }

  nlohmann::json out_list = nlohmann::json::array();
  if (!o.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.output_dir, ec);
    if (ec)
      return report(
          make_error(ErrorCode::FILE_WRITE_FAILED, "cannot create output folder '", o.output_dir, "': ", ec.message()));
  }
  const auto& infos = (*session)->outputs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    nlohmann::json entry{{"name", infos[i].name},
                         {"shape", outputs[i].dims()},
                         {"dtype", std::string(dtype_name(outputs[i].dtype()))},
                         {"file", nullptr}};
    if (!o.output_dir.empty()) {
      std::string file = (std::filesystem::path(o.output_dir) / (sanitize_file_name(infos[i].name) + ".npy")).string();
      Status st = write_npy(file, outputs[i]);
      if (!st.ok()) return report(st);
      entry["file"] = file;
    }
    out_list.push_back(entry);
  }
  LatencyStats lat = summarize_latency(times);
  const int threads = (*session)->threads();  // what ran: the session's own count
  if (o.json) {
    nlohmann::json j{
        {"model", o.model},
        {"outputs", out_list},
        {"latency_ms",
         {{"min", lat.min}, {"median", lat.median}, {"mean", lat.mean}, {"p90", lat.p90}, {"max", lat.max}}},
        {"loop", o.loop},
        {"warmup", o.warmup},
        {"threads", threads}};
    if (o.dump.enabled()) j["dump"] = {{"dir", o.dump.dir}, {"files", dumped}};
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::cout << "model: " << o.model << "  (" << (*session)->model().graph->nodes.size() << " nodes, engine "
            << (*session)->engines() << ", " << threads << " threads)\n";
  std::cout << "partition: " << (*session)->partition().summary() << "\n";
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::cout << "output " << infos[i].name << ": " << describe(outputs[i]) << " " << preview(outputs[i]);
    if (!out_list[i]["file"].is_null()) std::cout << " -> " << out_list[i]["file"].get<std::string>();
    std::cout << "\n";
  }
  std::cout << fmt::format(
      "latency over {} run(s) after {} warm-up: median {:.3f} ms, min {:.3f} ms, p90 {:.3f} ms, max {:.3f} ms\n",
      o.loop, o.warmup, lat.median, lat.min, lat.p90, lat.max);
  if (o.dump.enabled())
    std::cout << "dumped " << dumped << " tensor(s) to " << o.dump.dir << " (see index.json there)\n";
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, std::function<int()>* action) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run", "Run a model on .npy inputs and report outputs and latency");
  sub->add_option("model", o->model, "The model (.onnx)")->required();
  add_input_flags(sub, &o->input);
  sub->add_option("--output-dir", o->output_dir, "Write each output as DIR/<name>.npy");
  sub->add_option("--loop", o->loop, "Timed iterations (default 1)");
  sub->add_option("--warmup", o->warmup, "Untimed iterations before timing (default 0)");
  sub->add_flag("--json", o->json, "Print one JSON object on stdout (logs stay on stderr)");
  CLI::Option* timeout =
      sub->add_option("--timeout", o->timeout,
                      "Stop a run that takes longer than SECONDS (RUN_DEADLINE_EXCEEDED; each warm-up and timed run)");
  add_session_flags(sub, &o->session);
  add_dump_options(sub, &o->dump);
  sub->callback([o, action, timeout] {
    o->timeout_given = timeout->count() > 0;
    *action = [o] { return run(*o); };
  });
}

}  // namespace gearbox::cli
