// resolve_session_options: the one place a session's environment variables are read
// (GEARBOX_ENGINES, GEARBOX_NUM_THREADS, GEARBOX_PLAN_CACHE_SIZE, GEARBOX_DISABLE_PASSES,
// GEARBOX_CONV_WINOGRAD, GEARBOX_OP_PATH), once, when a session is created or gearbox compile starts. Nothing
// on a run's path and no kernel reads the environment: they get the resolved SessionOptions.
#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <optional>
#include <set>

#include "base/strings.h"
#include "device/openmp.h"
#include "kernels/kernel.h"
#include "runtime/plugin_loader.h"
#include "runtime/precision.h"
#include "runtime/session.h"

namespace gearbox {

namespace {

std::string env_value(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// A whole decimal integer in [lo, hi]; nullopt for anything else ("abc", "4x", "", " 4").
std::optional<long> parse_int(const std::string& s, long lo, long hi) {
  if (s.empty() || s.front() == ' ' || s.front() == '+') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || !end || *end != '\0' || v < lo || v > hi) return std::nullopt;
  return v;
}

Status invalid_env(const char* name, const std::string& value, const std::string& want) {
  return make_error(ErrorCode::ENV_VALUE_INVALID, "environment variable ", name, "='", value, "' is not ", want, "; set it to ",
                    want, " or unset it for the default (docs/cli.md)");
}

// Every engine some kernel is registered for, sorted.
std::vector<std::string> registered_engines() {
  std::set<std::string> names;
  for (const KernelDef& def : KernelRegistry::global().all()) names.insert(std::string(def.engine));
  return {names.begin(), names.end()};
}

// OpenMP's own default (OMP_NUM_THREADS, else the processors it may use), taken once, before
// any session has set a count: a session's count is restored after each run, so this is what
// the threads of the process have when no session runs on them.
int openmp_default_threads() {
  static const int n = [] {
    device::configure_openmp();
    return std::max(1, omp_get_max_threads());
  }();
  return n;
}

}  // namespace

std::string resolve_engines(const std::string& requested) {
  if (!requested.empty()) return requested;
  std::string env = env_value("GEARBOX_ENGINES");
  return !env.empty() ? env : std::string(kDefaultEngines);
}

Result<SessionOptions> resolve_session_options(SessionOptions o) {
  // Plugins first: their engines ("plugin.<name>") are engines of this gearbox from then on,
  // which a --engines list may name. The option's entries come before GEARBOX_OP_PATH's;
  // once resolved, op_path holds both, so resolving again loads nothing new.
  std::vector<OpPathEntry> op_path;
  std::vector<std::string> op_path_list;
  auto add_entries = [&](const std::string& list, const char* source) {
    for (const std::string& e : split_list(list, ':'))
      if (std::find(op_path_list.begin(), op_path_list.end(), e) == op_path_list.end()) {
        op_path_list.push_back(e);
        op_path.push_back({e, source});
      }
  };
  add_entries(o.op_path, "--op-path");
  add_entries(env_value("GEARBOX_OP_PATH"), "GEARBOX_OP_PATH");
  o.op_path = join(op_path_list, ":");
  GBX_ASSIGN_OR_RETURN(std::vector<std::string> plugin_engines, load_op_path(op_path));

  // Engines: each name of the list must be an engine of this gearbox; a misspelt one would
  // otherwise be skipped silently and its nodes run elsewhere.
  const bool engines_from_env = o.engine.empty() && !env_value("GEARBOX_ENGINES").empty();
  o.engine = resolve_engines(o.engine);
  std::vector<std::string> list = split_list(o.engine);
  const std::vector<std::string> known = registered_engines();
  const char* engines_where = engines_from_env ? "GEARBOX_ENGINES" : "the engine list (--engines)";
  if (list.empty())
    return make_error(ErrorCode::ENGINE_UNKNOWN, engines_where, " '", o.engine, "' names no engine; the engines are ",
                      join(known));
  for (const std::string& e : list)
    if (std::find(known.begin(), known.end(), e) == known.end())
      return make_error(ErrorCode::ENGINE_UNKNOWN, engines_where, " '", o.engine, "': '", e,
                        "' is not an engine of this gearbox; the engines are ", join(known));
  // A plugin's engine comes after the built-in ones: a built-in kernel keeps its ops.
  for (const std::string& e : plugin_engines)
    if (std::find(list.begin(), list.end(), e) == list.end()) list.push_back(e);
  o.engine = join(list, ",");

  if (o.threads < 0)
    return make_error(ErrorCode::USAGE, "the thread count must be >= 1 (0: the default), not ", o.threads);
  if (o.threads == 0) {
    std::string env = env_value("GEARBOX_NUM_THREADS");
    if (!env.empty()) {
      auto n = parse_int(env, 1, 4096);
      if (!n) return invalid_env("GEARBOX_NUM_THREADS", env, "a thread count from 1 to 4096");
      o.threads = static_cast<int>(*n);
    } else {
      o.threads = openmp_default_threads();
    }
  }

  if (o.plan_cache_size < -1)
    return make_error(ErrorCode::USAGE, "the plan cache size must be >= 0 (-1: the default), not ", o.plan_cache_size);
  if (o.plan_cache_size == -1) {
    std::string env = env_value("GEARBOX_PLAN_CACHE_SIZE");
    if (!env.empty()) {
      auto n = parse_int(env, 0, INT_MAX);
      if (!n) return invalid_env("GEARBOX_PLAN_CACHE_SIZE", env, "a non-negative integer");
      o.plan_cache_size = static_cast<int>(*n);
    } else {
      o.plan_cache_size = 8;
    }
  }

  if (o.conv_winograd < -1 || o.conv_winograd > 1)
    return make_error(ErrorCode::USAGE, "conv_winograd must be 0 (off), 1 (on) or -1 (the default), not ",
                      o.conv_winograd);
  if (o.conv_winograd == -1) {
    std::string env = env_value("GEARBOX_CONV_WINOGRAD");
    if (!env.empty()) {
      auto n = parse_int(env, 0, 1);
      if (!n) return invalid_env("GEARBOX_CONV_WINOGRAD", env, "0 or 1");
      o.conv_winograd = static_cast<int>(*n);
    } else {
      o.conv_winograd = 1;
    }
  }

  if (o.optimizer.use_env) {
    std::string env = env_value("GEARBOX_DISABLE_PASSES");
    std::vector<std::string> names = split_list(env);
    if (names.size() == 1 && names[0] == "all") {
      o.optimizer.enabled = false;
    } else if (!names.empty()) {
      GBX_RETURN_IF_ERROR(check_pass_names(names, "GEARBOX_DISABLE_PASSES"));
      o.optimizer.disabled_passes.insert(o.optimizer.disabled_passes.end(), names.begin(), names.end());
    }
    o.optimizer.use_env = false;
  }
  // Passes that pay only on some engine (layout_nhwc) need to know which ones will run.
  o.optimizer.engines = o.engine;

  if (o.precision.empty()) o.precision = env_value("GEARBOX_PRECISION_MODE");
  GBX_ASSIGN_OR_RETURN(PrecisionMode mode, parse_precision_mode(o.precision));
  o.precision = std::string(precision_mode_name(mode));
  return o;
}

}  // namespace gearbox
