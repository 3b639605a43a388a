// `gearbox bench MODEL`: load time, first-run time and the latency distribution of repeated
// runs on .npy or deterministic random inputs (`--shape` fixes symbolic dims of the random
// ones). `--json` prints the same as one JSON object; `--rounds-stdin` keeps the loaded,
// warmed-up session and runs rounds on request, so a driver (bench/ort_compare.py) can
// alternate it with another runtime without reloading either.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/logging.h"
#include "base/npy.h"
#include "tools/commands.h"
#include "tools/engine_option.h"
#include "tools/latency_stats.h"
#include "tools/model_inputs.h"

namespace gearbox::cli {
namespace {

struct BenchOptions {
  std::string model;
  // --input NAME=FILE.npy, ...; the inputs not given always get random data (with --shape's dims).
  InputFlags input;
  std::vector<std::string> shapes;  // NAME:D0,D1,...
  int loop = 10;
  int warmup = 1;
  bool json = false;
  std::string output_dir;  // outputs of the first run, as .npy
  bool rounds_stdin = false;
  bool prepare = false;  // Session::prepare() inside the load time
  SessionFlags session;  // --threads, --engines, --engine, --disable-pass, ...
};

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// "NAME:1,3,224,224" -> (NAME, dims). A scalar is "NAME:" (no dims).
Result<std::pair<std::string, Dims>> parse_shape(const std::string& spec) {
  auto colon = spec.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return make_error(ErrorCode::USAGE, "--shape '", spec, "' must be NAME:D0,D1,... (e.g. input:1,3,224,224)");
  std::string name = spec.substr(0, colon), rest = spec.substr(colon + 1);
  Dims dims;
  std::stringstream ss(rest);
  std::string item;
  while (!rest.empty() && std::getline(ss, item, ',')) {
    char* end = nullptr;
    errno = 0;
    long long v = item.empty() ? -1 : std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || v < 0)
      return make_error(ErrorCode::USAGE, "--shape '", spec, "': '", item, "' is not a non-negative integer dim");
    dims.push_back(v);
  }
  if (!rest.empty() && rest.back() == ',') return make_error(ErrorCode::USAGE, "--shape '", spec, "' ends with ','");
  return std::make_pair(name, dims);
}

// The inputs: files from --input, random data for the rest with --shape's dims in place of
// the model's (which must agree with the model's fixed dims).
Result<std::map<std::string, Tensor>> make_feeds(const Session& session, const BenchOptions& o) {
  std::map<std::string, Dims> shapes;
  for (const std::string& spec : o.shapes) {
    GBX_ASSIGN_OR_RETURN(auto parsed, parse_shape(spec));
    shapes[parsed.first] = parsed.second;
  }
  InputFlags files = o.input;
  files.random = false;  // the random data below takes --shape's dims
  GBX_ASSIGN_OR_RETURN(auto feeds, load_inputs(session, files));
  std::vector<std::string> names;
  for (const IoInfo& io : session.inputs()) names.push_back(io.name);
  auto known = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  for (const auto& [name, dims] : shapes) {
    if (!known(name))
      return make_error(ErrorCode::INPUT_UNKNOWN, "--shape names '", name,
                        "', which is not an input of the model (inputs: ", fmt::format("{}", fmt::join(names, ", ")),
                        ")");
    if (feeds.count(name))
      return make_error(ErrorCode::USAGE, "input '", name, "' has both --input and --shape; the file fixes its shape");
  }
  for (const IoInfo& io : session.inputs()) {
    if (feeds.count(io.name)) continue;
    IoInfo fixed = io;
    if (auto it = shapes.find(io.name); it != shapes.end()) {
      const Shape& declared = io.type.shape;
      if (io.type.kind == ValueType::Kind::Tensor && declared.ranked && !declared.accepts(it->second))
        return make_error(ErrorCode::INPUT_SHAPE_MISMATCH, "--shape ", io.name, ":",
                          fmt::format("{}", fmt::join(it->second, ",")), " does not fit the model's ",
                          to_string(io.type));
      fixed.type.shape = Shape::from_dims(it->second);
    }
    GBX_ASSIGN_OR_RETURN(feeds[io.name], random_input(fixed));
  }
  GBX_RETURN_IF_ERROR(session.validate(feeds));
  return feeds;
}

Status write_outputs(const Session& session, const std::vector<Tensor>& outputs, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::FILE_WRITE_FAILED, "cannot create output folder '", dir, "': ", ec.message());
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string file = (std::filesystem::path(dir) / (sanitize_file_name(session.outputs()[i].name) + ".npy")).string();
    GBX_RETURN_IF_ERROR(write_npy(file, outputs[i]));
  }
  return Status::OK();
}

nlohmann::json stats_json(const LatencyStats& s) {
  return {{"min", s.min}, {"median", s.median}, {"mean", s.mean}, {"p90", s.p90}, {"max", s.max}};
}

// One line per request on stdin, "W N": W untimed runs, then N timed ones; answers one JSON
// line {"times_ms": [...]} per request. Ends at EOF or on an empty line.
int serve_rounds(const Session& session, const std::map<std::string, Tensor>& feeds) {
  std::string line;
  while (std::getline(std::cin, line) && !line.empty()) {
    std::istringstream in(line);
    int warm = -1, runs = -1;
    if (!(in >> warm >> runs) || warm < 0 || runs < 1)
      return report(
          make_error(ErrorCode::USAGE, "--rounds-stdin expects lines 'WARMUP RUNS' (RUNS >= 1), got '", line, "'"));
    std::vector<double> times;
    for (int i = 0; i < warm + runs; ++i) {
      auto t0 = Clock::now();
      auto r = session.run(feeds);
      const double ms = ms_since(t0);
      if (!r.ok()) return report(r.status());
      if (i >= warm) times.push_back(ms);
    }
    std::cout << nlohmann::json{{"times_ms", times}}.dump() << std::endl;
  }
  return 0;
}

int bench(const BenchOptions& o) {
  if (o.loop < 1 || o.warmup < 0)
    return report(
        make_error(ErrorCode::USAGE, "--loop must be >= 1 and --warmup >= 0 (got ", o.loop, " and ", o.warmup, ")"));
  // Syntax errors first, before paying for the load.
  for (const std::string& spec : o.shapes)
    if (auto p = parse_shape(spec); !p.ok()) return report(p.status());

  auto so = o.session.to_session_options();
  if (!so.ok()) return report(so.status());
  auto t_load = Clock::now();
  auto session = Session::load(o.model, *so);
  if (!session.ok()) return report(session.status());
  if (o.prepare) {
    auto prepared = (*session)->prepare();
    if (!prepared.ok()) return report(prepared.status().with_context("--prepare: "));
    if (!*prepared) GBX_LOG_WARN("BENCH", "--prepare: the model has a dynamic input; nothing was prepared at load");
  }
  const double load_ms = ms_since(t_load);
  auto feeds = make_feeds(**session, o);
  if (!feeds.ok()) return report(feeds.status());

  auto t_first = Clock::now();
  auto first = (*session)->run(*feeds);
  const double first_ms = ms_since(t_first);
  if (!first.ok()) return report(first.status());
  if (!o.output_dir.empty())
    if (Status st = write_outputs(**session, *first, o.output_dir); !st.ok()) return report(st);

  const int threads = (*session)->threads();  // what ran: the session's own count
  nlohmann::json inputs = nlohmann::json::array();
  for (const auto& [name, t] : *feeds)
    inputs.push_back({{"name", name}, {"shape", t.dims()}, {"dtype", std::string(dtype_name(t.dtype()))}});
  if (o.rounds_stdin) {
    std::cout << nlohmann::json{{"ready", true},
                                {"load_ms", load_ms},
                                {"first_run_ms", first_ms},
                                {"threads", threads},
                                {"engines", (*session)->engines()},
                                {"inputs", inputs}}
                     .dump()
              << std::endl;
    return serve_rounds(**session, *feeds);
  }

  std::vector<double> times;
  for (int i = 0; i < o.warmup + o.loop; ++i) {
    auto t0 = Clock::now();
    auto r = (*session)->run(*feeds);
    const double ms = ms_since(t0);
    if (!r.ok()) return report(r.status());
    if (i >= o.warmup) times.push_back(ms);
  }
  const LatencyStats lat = summarize_latency(times);
  if (o.json) {
    nlohmann::json outputs = nlohmann::json::array();
    for (size_t i = 0; i < first->size(); ++i)
      outputs.push_back({{"name", (*session)->outputs()[i].name},
                         {"shape", (*first)[i].dims()},
                         {"dtype", std::string(dtype_name((*first)[i].dtype()))}});
    nlohmann::json j{{"model", o.model},         {"engines", (*session)->engines()},
                     {"threads", threads},       {"inputs", inputs},
                     {"outputs", outputs},       {"load_ms", load_ms},
                     {"first_run_ms", first_ms}, {"warmup", o.warmup},
                     {"loop", o.loop},           {"latency_ms", stats_json(lat)},
                     {"runs_ms", times}};
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::cout << "model: " << o.model << "  (engines " << (*session)->engines() << ", " << threads << " threads)\n";
  for (const auto& in : inputs)
    std::cout << "input " << in["name"].get<std::string>() << ": " << in["dtype"].get<std::string>() << " "
              << in["shape"].dump() << "\n";
  std::cout << fmt::format("load {:.1f} ms, first run {:.3f} ms\n", load_ms, first_ms);
  std::cout << fmt::format(
      "latency over {} run(s) after {} warm-up: min {:.3f}  median {:.3f}  mean {:.3f}  p90 {:.3f}  max {:.3f} ms\n",
      o.loop, o.warmup, lat.min, lat.median, lat.mean, lat.p90, lat.max);
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, std::function<int()>* action) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "Measure a model's load time, first run and latency distribution");
  sub->add_option("model", o->model, "The model (.onnx or .gbm)")->required();
  add_input_flags(sub, &o->input, "Accepted as run takes it: bench fills the inputs not given with random data anyway");
  sub->add_option("--shape", o->shapes, "NAME:D0,D1,... dims of a random input, fixing its symbolic dims (repeatable)");
  add_session_flags(sub, &o->session);
  sub->add_option("--loop", o->loop, "Timed runs (default 10)");
  sub->add_option("--warmup", o->warmup, "Untimed runs after the first run (default 1)");
  sub->add_flag("--json", o->json, "Print one JSON object on stdout (logs stay on stderr)");
  sub->add_option("--output-dir", o->output_dir, "Write the first run's outputs as DIR/<name>.npy");
  sub->add_flag("--prepare", o->prepare,
                "Prepare at load (Session::prepare: one run on zeros, so primitives and packed weights exist before "
                "the first run); the load time includes it");
  sub->add_flag("--rounds-stdin", o->rounds_stdin,
                "After load and first run print a JSON 'ready' line, then per stdin line 'W N' run W untimed and N "
                "timed runs and print {\"times_ms\": [...]} (for bench/ort_compare.py)");
  sub->callback([o, action] { *action = [o] { return bench(*o); }; });
}

}  // namespace gearbox::cli
