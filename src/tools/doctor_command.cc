// `gearbox doctor [MODEL] [--json]`: checks this machine and environment against what this
// build (and a model) needs, one PASS/WARN/FAIL line each, every non-PASS line with its fix.
// Exit code 1 when any check FAILs.
//
// A model states the CPU features it was compiled for: a .gbm records them (gearbox compile
// --target native), an .onnx in its metadata under the key `gearbox.required_isa`
// (comma-separated, e.g. "avx512f,avx512bw"); a model without them needs nothing beyond the
// build.
#include <fmt/format.h>
#include <onnx/onnx_pb.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "base/strings.h"
#include "device/calibration.h"
#include "device/device.h"
#include "device/runtime_libraries.h"
#include "graph/gbm/gbm_format.h"
#include "graph/gbm/gbm_reader.h"
#include "runtime/plugin_loader.h"
#include "runtime/precision.h"
#include "runtime/session.h"
#include "tools/commands.h"

extern char** environ;

#ifndef GEARBOX_VERSION_STRING
#define GEARBOX_VERSION_STRING "unknown"
#endif

namespace gearbox::cli {
namespace {

using namespace gearbox::device;

struct DoctorOptions {
  std::string model;
  bool json = false;
  std::string op_path;  // --op-path, as the session flag
  bool ops = false;     // --ops: list the operators instead
};

struct Check {
  std::string status;  // PASS, WARN, FAIL
  std::string name;
  std::string detail;
  std::string fix;
};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

Check check_build_isa(const Capabilities& caps) {
  std::vector<std::string> need = build_required_isa(), missing;
  for (const auto& f : need)
    if (!caps.has(f)) missing.push_back(f);
  if (!missing.empty())
    return {"FAIL", "cpu.build_isa",
            "this build was compiled for " + join(need) + " but the CPU lacks " + join(missing) +
                (caps.simulated_missing.empty() ? "" : " (GEARBOX_SIMULATE_MISSING_ISA)"),
            "Rebuild gearbox on this machine without -march flags for a newer CPU (make build), or run on a CPU with " +
                join(missing)};
  return {"PASS", "cpu.build_isa", "the CPU has every feature this build targets (" + join(need) + ")", ""};
}

Check check_fast_isa(const Capabilities& caps) {
  if (caps.has("avx512f")) {
    std::string extra = caps.has("avx512_bf16") || caps.has("amx_bf16") ? " with native bf16" : " without native bf16";
    return {"PASS", "cpu.vector_isa", "AVX-512 available" + extra, ""};
  }
  if (caps.has("avx2") && caps.has("fma"))
    return {"PASS", "cpu.vector_isa", "AVX2 + FMA available (no AVX-512: optimized kernels use 256-bit vectors)", ""};
  return {"WARN", "cpu.vector_isa", "no AVX2/FMA: only the portable reference kernels run at full correctness, slowly",
          "Run on an x86-64 CPU with AVX2 and FMA (2013 or later) for usable speed"};
}

// A .gbm's record, through the reader: it refuses a CPU that lacks one of the required
// features (GBM_ISA_MISSING, a FAIL here), a required file feature this gearbox does not
// implement (GBM_FEATURE_UNKNOWN) and any damaged file with its own code.
Result<gbm::Info> gbm_info(const std::string& path) {
  gbm::Info info;
  GBX_RETURN_IF_ERROR(gbm::read_file(path, &info).status());
  return info;
}

// The precision the model runs in (docs/precision.md): a .gbm's compiled mode, or the mode an
// .onnx gets from GEARBOX_PRECISION_MODE. WARN when nodes compute in bf16 on paper and this
// CPU has no bf16 arithmetic: they run in fp32 (the conversion path), no faster than fp32.
Check check_model_precision(const std::string& path, const Session& session, const Capabilities& caps) {
  const Model& m = session.model();
  const std::string mode = m.precision_mode.empty() ? "force_fp32" : m.precision_mode;
  const size_t bf16 = count_lowered(m, DType::BF16);
  const std::string where = gbm::is_gbm_file(path)                  ? " (compiled in)"
                            : env("GEARBOX_PRECISION_MODE").empty() ? " (the default)"
                                                                    : " (GEARBOX_PRECISION_MODE)";
  if (bf16 == 0)
    return {"PASS", "model.precision", path + ": " + mode + where + ": every node computes in its own dtype", ""};
  const std::string lowered = fmt::format("{}: {}{}: {} nodes compute in bfloat16", path, mode, where, bf16);
  if (!caps.has("avx512_bf16") && !caps.has("amx_bf16"))
    return {"WARN", "model.precision",
            lowered + ", but this CPU has no bf16 arithmetic (AVX512_BF16 or AMX-BF16)" +
                (caps.simulated_missing.empty() ? "" : " (GEARBOX_SIMULATE_MISSING_ISA)") +
                ": they compute in fp32, no faster than force_fp32",
            "Run on a CPU with AVX512_BF16, or compile the .onnx on this CPU (it then stores nothing in bf16)"};
  return {"PASS", "model.precision", lowered + " with fp32 accumulation (this CPU has AVX512_BF16 or AMX-BF16)", ""};
}

// The pre-load verdict: the model imported (or read), optimized and partitioned exactly as
// `gearbox run` would with this environment, so an op no engine serves (OP_UNSUPPORTED), a
// bad GEARBOX_ENGINES or any other load error FAILs here, naming it, instead of at the run.
// Then the precision it runs in.
std::vector<Check> check_model_loads(const std::string& path, const std::string& op_path, const Capabilities& caps) {
  SessionOptions options;
  options.op_path = op_path;
  auto session = Session::load(path, options);
  if (!session.ok()) {
    const Status& st = session.status();
    return {{"FAIL", "model.partition", st.to_string(), std::string(error_info(st.code()).fix)}};
  }
  return {{"PASS", "model.partition",
           path + " loads with engines " + (*session)->engines() + ": " + (*session)->partition().summary(), ""},
          check_model_precision(path, **session, caps)};
}

std::vector<Check> check_model(const std::string& path, const Capabilities& caps, const std::string& op_path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return {{"FAIL", "model.open", "cannot open " + path, "Check the path and its permissions (ls -l " + path + ")"}};
  std::vector<std::string> need;
  std::vector<Check> out;
  if (gbm::is_gbm_file(path)) {
    auto r = gbm_info(path);
    if (!r.ok()) {
      const Status& st = r.status();
      return {{"FAIL", st.code() == ErrorCode::GBM_ISA_MISSING ? "model.isa" : "model.parse", st.to_string(),
               std::string(error_info(st.code()).fix)}};
    }
    out.push_back({"PASS", "model.gbm",
                   path + ": format version " + std::to_string(r->format_version) + ", compiled by gearbox " +
                       (r->gearbox_version.empty() ? std::string("(not recorded)") : r->gearbox_version) +
                       " (this is gearbox " + GEARBOX_VERSION_STRING + ")",
                   ""});
    need = std::move(r->required_isa);
  } else {
    onnx::ModelProto m;
    if (!m.ParseFromIstream(&in) || !m.has_graph())
      return {{"FAIL", "model.parse", path + " is neither an ONNX model nor a compiled .gbm",
               "Pass the exported .onnx or a .gbm from gearbox compile; gearbox explain 2001 describes the fix for a "
               "corrupt file"}};
    for (const auto& p : m.metadata_props())
      if (p.key() == gbm::kRequiredIsaKey) need = split_list(p.value());
  }
  std::vector<std::string> missing;
  for (const auto& f : need)
    if (!caps.has(f)) missing.push_back(f);
  if (need.empty()) {
    out.push_back({"PASS", "model.isa", path + " declares no CPU feature requirement", ""});
  } else if (!missing.empty()) {
    out.push_back({"FAIL", "model.isa",
                   path + " was compiled for " + join(need) + " but the CPU lacks " + join(missing) +
                       (caps.simulated_missing.empty() ? "" : " (GEARBOX_SIMULATE_MISSING_ISA)"),
                   "Recompile the model for this machine (gearbox compile on this CPU, or for a baseline target), "
                   "or run it on a CPU with " +
                       join(missing)});
    return out;
  } else {
    out.push_back({"PASS", "model.isa", path + " needs " + join(need) + ": all present", ""});
  }
  for (Check& c : check_model_loads(path, op_path, caps)) out.push_back(std::move(c));
  return out;
}

// The session options this environment gives (GEARBOX_ENGINES, GEARBOX_NUM_THREADS, ...),
// resolved and validated as Session::create does: an engine this gearbox does not have
// (GEARBOX_ENGINES=cuda) FAILs here rather than passing unchecked.
// An error of the op path (a missing entry, a plugin that does not load): check_op_path's to report.
bool is_op_path_error(const Status& st) {
  const int code = static_cast<int>(st.code());
  return (code >= 12001 && code <= 12019) ||
         (st.code() == ErrorCode::USAGE && st.message().find("op path entry") != std::string::npos);
}

Check check_session_options() {
  auto o = resolve_session_options(SessionOptions{});
  if (!o.ok() && is_op_path_error(o.status()))
    return {"WARN", "engines", "not checked: the op path does not load (op_plugins says why)",
            "Fix the op path as op_plugins says"};
  if (!o.ok())
    return {"FAIL", o.status().code() == ErrorCode::ENGINE_UNKNOWN ? "engines" : "session.options",
            o.status().to_string(), std::string(error_info(o.status().code()).fix)};
  return {"PASS", "engines",
          "engines " + o->engine + (env("GEARBOX_ENGINES").empty() ? " (default)" : " (GEARBOX_ENGINES)") +
              ", every one of them built in; " + std::to_string(o->threads) + " threads per run, plan cache " +
              std::to_string(o->plan_cache_size) + (o->conv_winograd ? "" : ", Winograd off"),
          ""};
}

std::vector<Check> check_libraries() {
  std::vector<Check> out;
  for (const auto& l : runtime_libraries()) {
    std::string name = "library." + l.name;
    std::string build = l.build_version.empty() ? "unknown" : l.build_version;
    if (l.name == "oneDNN" && !l.loaded) {
      out.push_back({"WARN", name, "built against " + build + "; " + l.note,
                     "Install oneDNN (scripts/install-deps.sh installs libdnnl-dev) so the oneDNN engine can load"});
    } else if (l.name == "OpenMP" && !l.match) {
      // Still correct, only slower: another runtime came first in the dynamic linker's lookup.
      out.push_back({"WARN", name,
                     "built against " + build + " (" + l.build_path + "), running with " + l.runtime_version + " (" +
                         l.runtime_path + "); " + l.note,
                     "Do not LD_PRELOAD another OpenMP runtime; a program embedding libgearbox should link libomp "
                     "(-lomp) before libgomp, or build gearbox with -DGEARBOX_OPENMP_RUNTIME=gnu"});
    } else if (!l.match) {
      out.push_back({"FAIL", name,
                     "built against " + build + " (" + l.build_path + "), running with " + l.runtime_version + " (" +
                         l.runtime_path + "); " + l.note,
                     "Rebuild gearbox against the installed library (make build), or remove the other copy from "
                     "LD_LIBRARY_PATH"});
    } else {
      std::string at_run = l.loaded ? ", running with " + l.runtime_version + " (" + l.runtime_path + ")" : "";
      out.push_back({"PASS", name, "built against " + build + at_run + "; " + l.note, ""});
    }
  }
  return out;
}

std::vector<Check> check_environment(const Capabilities& caps) {
  static const std::set<std::string> known{"GEARBOX_NUM_THREADS",    "GEARBOX_OP_PATH",
                                           "GEARBOX_LOG_LEVEL",      "GEARBOX_LOG_FILE",
                                           "GEARBOX_DEVICE_MEMORY",  "GEARBOX_SIMULATE_MISSING_ISA",
                                           "GEARBOX_ENGINES",        "GEARBOX_PLAN_CACHE_SIZE",
                                           "GEARBOX_DISABLE_PASSES", "GEARBOX_CONV_WINOGRAD"};
  std::vector<Check> out;
  std::vector<std::string> seen;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e, key = kv.substr(0, kv.find('='));
    if (key.rfind("GEARBOX_", 0) == 0 || key.rfind("OMP_", 0) == 0) seen.push_back(kv);
    if (key.rfind("GEARBOX_", 0) == 0 && !known.count(key))
      out.push_back({"WARN", "env." + key, key + " is not a variable gearbox reads (misspelt?)",
                     "Unset it or use one of: " + join({known.begin(), known.end()})});
  }
  out.insert(out.begin(),
             {"PASS", "env.variables", seen.empty() ? "no GEARBOX_* or OMP_* variables set" : join(seen, " "), ""});

  if (std::string t = env("GEARBOX_NUM_THREADS");
      !t.empty() && (t.find_first_not_of("0123456789") != std::string::npos || std::atoi(t.c_str()) <= 0))
    out.push_back({"FAIL", "env.GEARBOX_NUM_THREADS", "'" + t + "' is not a positive integer",
                   "Set GEARBOX_NUM_THREADS to a thread count such as " + std::to_string(caps.physical_cores)});
  std::string gt = env("GEARBOX_NUM_THREADS"), ot = env("OMP_NUM_THREADS");
  if (!gt.empty() && !ot.empty() && gt != ot)
    out.push_back({"WARN", "env.threads_conflict",
                   "GEARBOX_NUM_THREADS=" + gt + " and OMP_NUM_THREADS=" + ot +
                       " disagree: gearbox uses GEARBOX_NUM_THREADS "
                       "for its sessions, while OpenMP code outside gearbox uses OMP_NUM_THREADS",
                   "Set only GEARBOX_NUM_THREADS, or give both the same value"});
  // The names spdlog::level::from_str accepts (base/logging.cc); anything else is ignored there.
  if (std::string lvl = env("GEARBOX_LOG_LEVEL");
      !lvl.empty() &&
      !std::set<std::string>{"trace", "debug", "info", "warning", "warn", "error", "err", "critical", "off"}.count(lvl))
    out.push_back({"WARN", "env.GEARBOX_LOG_LEVEL", "'" + lvl + "' is not a log level (the default, warning, applies)",
                   "Use trace, debug, info, warn, error, critical or off"});
  if (std::string mem = env("GEARBOX_DEVICE_MEMORY"); !mem.empty()) {
    auto r = parse_memory_size(mem);
    if (!r.ok()) {
      out.push_back({"FAIL", "env.GEARBOX_DEVICE_MEMORY", r.status().to_string(),
                     std::string(error_info(r.status().code()).fix)});
    } else if (*r > caps.memory_bytes && caps.memory_bytes > 0) {
      out.push_back({"WARN", "env.GEARBOX_DEVICE_MEMORY",
                     mem + " (" + format_bytes(*r) + ") exceeds the machine's RAM (" + format_bytes(caps.memory_bytes) +
                         "): allocations near the cap will be killed by the OOM killer instead of failing cleanly",
                     "Set GEARBOX_DEVICE_MEMORY below the RAM, e.g. " + format_bytes(caps.memory_bytes / 2)});
    }
  }
  if (!caps.simulated_missing.empty())
    out.push_back(
        {"WARN", "env.GEARBOX_SIMULATE_MISSING_ISA",
         "simulating a CPU without " + join(caps.simulated_missing) + ": the results describe that CPU, not this one",
         "Unset GEARBOX_SIMULATE_MISSING_ISA for a real diagnosis"});
  return out;
}

Check check_threads(const Capabilities& caps) {
  cpu_set_t set;
  int allowed = caps.logical_cores;
  if (sched_getaffinity(0, sizeof set, &set) == 0) allowed = CPU_COUNT(&set);
  std::string src = "GEARBOX_NUM_THREADS";
  std::string t = env("GEARBOX_NUM_THREADS");
  if (t.empty()) {
    src = "OMP_NUM_THREADS";
    t = env("OMP_NUM_THREADS");
  }
  int threads = t.empty() ? allowed : std::atoi(t.c_str());
  std::string detail = std::to_string(threads) + " threads (" +
                       (t.empty() ? std::string("default: all allowed CPUs") : src) + ") on " +
                       std::to_string(caps.logical_cores) + " logical / " + std::to_string(caps.physical_cores) +
                       " physical cores, " + std::to_string(allowed) + " allowed by the affinity mask";
  if (threads > allowed)
    return {"WARN", "threads", detail + ": oversubscribed, threads will time-slice",
            "Set GEARBOX_NUM_THREADS=" + std::to_string(allowed) + " or fewer"};
  return {"PASS", "threads", detail, ""};
}

// The op path (--op-path, then GEARBOX_OP_PATH) loaded as a session loads it: the entries
// searched and the plugins loaded with their ops, or the error a session would stop with.
Check check_op_path(const std::string& op_path) {
  SessionOptions requested;
  requested.op_path = op_path;
  auto o = resolve_session_options(requested);
  if (!o.ok() && is_op_path_error(o.status()))
    return {"FAIL", "op_plugins", o.status().to_string(), std::string(error_info(o.status().code()).fix)};
  const std::vector<std::string> searched = searched_op_path();
  if (searched.empty())
    return {"PASS", "op_plugins", "no op path (GEARBOX_OP_PATH unset, no --op-path): no custom-op plugin is loaded",
            ""};
  std::vector<std::string> plugins;
  for (const PluginInfo& p : registered_plugins())
    plugins.push_back(p.name + " " + p.version + " (" + p.path + ", engine " + p.engine + "): " + join(p.ops));
  std::string where = op_path.empty()                  ? "GEARBOX_OP_PATH"
                      : env("GEARBOX_OP_PATH").empty() ? "--op-path"
                                                       : "--op-path, GEARBOX_OP_PATH";
  if (plugins.empty())
    return {"WARN", "op_plugins",
            "op path searched: " + join(searched, ":") + " (" + where + "): it holds no plugin library",
            "Put plugin .so files in those folders (docs/custom_ops.md), or unset GEARBOX_OP_PATH"};
  return {"PASS", "op_plugins",
          "op path searched: " + join(searched, ":") + " (" + where + "); " + std::to_string(plugins.size()) +
              " plugin(s) loaded: " + join(plugins, "; "),
          ""};
}

Check check_log_dir() {
  std::string file = env("GEARBOX_LOG_FILE");
  std::filesystem::path dir = file.empty() ? std::filesystem::path(calibration_cache_path()).parent_path()
                                           : std::filesystem::path(file).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::filesystem::path probe = dir / (".gearbox_doctor_" + std::to_string(getpid()));
  bool ok = static_cast<bool>(std::ofstream(probe) << "ok");
  std::filesystem::remove(probe, ec);
  std::string what = file.empty() ? "cache/log folder " : "GEARBOX_LOG_FILE folder ";
  if (!ok)
    return {"FAIL", "log_dir", what + dir.string() + " is not writable",
            "Create it with write permission, or point GEARBOX_LOG_FILE (or XDG_CACHE_HOME) at a writable folder"};
  return {"PASS", "log_dir", what + dir.string() + " is writable", ""};
}

Check check_pool() {
  auto cap = default_pool_capacity();
  if (!cap.ok())
    return {"FAIL", "device.pool", cap.status().to_string(), std::string(error_info(cap.status().code()).fix)};
  return {"PASS", "device.pool",
          "device memory pool capacity " + format_bytes(*cap) +
              (env("GEARBOX_DEVICE_MEMORY").empty() ? " (default: half the RAM, at most 8 GiB)"
                                                    : " (GEARBOX_DEVICE_MEMORY)"),
          ""};
}

int doctor(const DoctorOptions& o) {
  if (o.ops) return print_ops_markdown();
  const Capabilities& caps = devices().front()->capabilities();
  std::vector<Check> checks;
  checks.push_back(
      {"PASS", "device", "cpu:0 " + caps.model + ", " + std::to_string(caps.logical_cores) + " logical cores", ""});
  checks.push_back(check_build_isa(caps));
  checks.push_back(check_fast_isa(caps));
  if (!o.model.empty())
    for (auto& c : check_model(o.model, caps, o.op_path)) checks.push_back(c);
  for (auto& c : check_libraries()) checks.push_back(c);
  for (auto& c : check_environment(caps)) checks.push_back(c);
  checks.push_back(check_session_options());
  checks.push_back(check_threads(caps));
  checks.push_back(check_op_path(o.op_path));
  checks.push_back(check_log_dir());
  checks.push_back(check_pool());
  int pass = 0, warn = 0, fail = 0;
  for (const auto& c : checks) (c.status == "PASS" ? pass : c.status == "WARN" ? warn : fail)++;
  if (o.json) {
    nlohmann::json j;
    j["checks"] = nlohmann::json::array();
    for (const auto& c : checks)
      j["checks"].push_back({{"status", c.status}, {"name", c.name}, {"detail", c.detail}, {"fix", c.fix}});
    j["summary"] = {{"pass", pass}, {"warn", warn}, {"fail", fail}};
    std::cout << j.dump(2) << "\n";
  } else {
    for (const auto& c : checks) {
      std::cout << c.status << "  " << c.name << ": " << c.detail << "\n";
      if (!c.fix.empty()) std::cout << "      fix: " << c.fix << "\n";
    }
    std::cout << pass << " passed, " << warn << " warnings, " << fail << " failed\n";
  }
  return fail > 0 ? 1 : 0;
}

}  // namespace

void add_doctor_command(CLI::App& app, std::function<int()>* action) {
  auto o = std::make_shared<DoctorOptions>();
  CLI::App* sub =
      app.add_subcommand("doctor", "Check this machine, environment and a model: PASS/WARN/FAIL with fixes");
  sub->add_option("model", o->model, "A model (.onnx or .gbm) to check against this machine");
  sub->add_flag("--json", o->json, "Print the checks as JSON");
  sub->add_flag("--ops", o->ops,
                "List every operator this gearbox runs (opsets, engines, dtypes) as Markdown (docs/ops.md)");
  sub->add_option("--op-path", o->op_path,
                  "Custom-op plugins to load, as for gearbox run (folders and .so files, colon-separated; before "
                  "GEARBOX_OP_PATH)");
  sub->callback([o, action] { *action = [o] { return doctor(*o); }; });
}

}  // namespace gearbox::cli
