// Loading plugin libraries from the op path. See plugin_loader.h.
#include "runtime/plugin_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "base/strings.h"
#include "gearbox/plugin.h"

namespace gearbox {
namespace {

struct LoaderState {
  std::mutex mu;                                 // one load at a time: registration is not safe concurrently
  std::map<std::string, std::string> engine_of;  // canonical library path -> its engine
  std::vector<std::string> searched;
};

LoaderState& state() {
  static LoaderState s;
  return s;
}

// The libraries an entry stands for: a folder's *.so files in name order, or the file.
Result<std::vector<std::string>> libraries_of(const OpPathEntry& e) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(e.path, ec);
  if (ec || !fs::exists(st) || access(e.path.c_str(), R_OK) != 0)
    return make_error(ErrorCode::USAGE, "op path entry '", e.path, "' (", e.source,
                      ") does not exist or cannot be read");
  if (!fs::is_directory(st)) return std::vector<std::string>{e.path};
  std::vector<std::string> libs;
  for (const auto& f : fs::directory_iterator(e.path, ec))
    if (f.path().extension() == ".so" && f.is_regular_file(ec)) libs.push_back(f.path().string());
  if (ec)
    return make_error(ErrorCode::USAGE, "op path folder '", e.path, "' (", e.source,
                      ") cannot be listed: ", ec.message());
  std::sort(libs.begin(), libs.end());
  return libs;
}

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

// Opens, checks, initializes and registers one library (mutex held). Its engine.
Result<std::string> load_library(LoaderState& s, const std::string& file) {
  std::error_code ec;
  const std::string path = std::filesystem::canonical(file, ec).string();
  if (ec) return make_error(ErrorCode::USAGE, "plugin library '", file, "' cannot be resolved: ", ec.message());
  if (auto it = s.engine_of.find(path); it != s.engine_of.end()) return it->second;

  // RTLD_LOCAL: two plugins' own symbols never bind to each other's.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return make_error(ErrorCode::PLUGIN_LOAD_FAILED, "cannot load plugin library '", path, "': ", dl_error());
  // Closed on every refusal before the plugin's own code (init) ran.
  auto refuse = [&](Status st) {
    dlclose(handle);
    return st;
  };
  void* sym = dlsym(handle, GBX_PLUGIN_ENTRY_POINT);
  if (!sym)
    return refuse(make_error(ErrorCode::PLUGIN_ENTRY_MISSING, "library '", path, "' on the op path exports no ",
                             GBX_PLUGIN_ENTRY_POINT, " (extern \"C\", GBX_PLUGIN_EXPORT): it is not a gearbox plugin"));
  auto get = reinterpret_cast<gbx_plugin_get_fn>(sym);
  const gbx_plugin* plugin = get();
  if (!plugin)
    return refuse(make_error(ErrorCode::PLUGIN_LOAD_FAILED, "plugin library '", path, "': ", GBX_PLUGIN_ENTRY_POINT,
                             " returned NULL"));
  if (plugin->abi_version != GBX_PLUGIN_ABI_VERSION)
    return refuse(make_error(ErrorCode::PLUGIN_ABI_MISMATCH, "plugin library '", path,
                             "' was built for plugin ABI version ", plugin->abi_version,
                             "; this gearbox loads plugin ABI version ", GBX_PLUGIN_ABI_VERSION,
                             ": rebuild it against this gearbox's gearbox/plugin.h"));
  if (plugin->init) {
    char error[1024] = {0};
    const int32_t rc = plugin->init(error, sizeof(error));
    error[sizeof(error) - 1] = '\0';
    // The plugin's code has run (it may have started threads): the library stays mapped.
    if (rc != GBX_PLUGIN_OK)
      return make_error(ErrorCode::PLUGIN_INIT_FAILED, "plugin '", plugin->name ? plugin->name : "(unnamed)", "' (",
                        path, ") failed its init (returned ", rc, "): ", error[0] ? error : "(no message)");
  }
  PluginInfo info;
  info.name = plugin->name ? plugin->name : "";
  info.version = plugin->version ? plugin->version : "";
  info.path = path;
  GBX_RETURN_IF_ERROR(register_plugin_ops(*plugin, &info));
  s.engine_of.emplace(path, info.engine);
  return info.engine;
}

}  // namespace

Result<std::vector<std::string>> load_op_path(const std::vector<OpPathEntry>& entries) {
  LoaderState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  std::vector<std::string> engines;
  for (const OpPathEntry& e : entries) {
    if (std::find(s.searched.begin(), s.searched.end(), e.path) == s.searched.end()) s.searched.push_back(e.path);
    GBX_ASSIGN_OR_RETURN(std::vector<std::string> libs, libraries_of(e));
    for (const std::string& lib : libs) {
      GBX_ASSIGN_OR_RETURN(std::string engine, load_library(s, lib));
      if (std::find(engines.begin(), engines.end(), engine) == engines.end()) engines.push_back(engine);
    }
  }
  return engines;
}

std::vector<std::string> searched_op_path() {
  LoaderState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.searched;
}

std::string op_path_note() {
  const std::vector<std::string> searched = searched_op_path();
  if (searched.empty())
    return "; no op path was searched for plugins (GEARBOX_OP_PATH, --op-path): a custom op's plugin library is "
           "loaded from there (docs/custom_ops.md)";
  std::vector<std::string> plugins;
  for (const PluginInfo& p : registered_plugins())
    plugins.push_back(p.name + " " + p.version + " (" + join(p.ops) + ")");
  return "; op path searched: " + join(searched, ":") +
         "; plugins loaded: " + (plugins.empty() ? std::string("none") : join(plugins, "; "));
}

namespace {
void collect_plugin_versions(const Graph& g, const std::vector<PluginInfo>& loaded,
                             std::map<std::string, std::string>* out) {
  for (const auto& n : g.nodes) {
    if (n->engine.rfind("plugin.", 0) == 0)
      for (const PluginInfo& p : loaded)
        if (p.engine == n->engine) (*out)[p.name] = p.version;
    for_each_subgraph(*n, [&](const Graph& sub) { collect_plugin_versions(sub, loaded, out); });
  }
}
}  // namespace

std::map<std::string, std::string> plugin_versions_used(const Graph& g) {
  std::map<std::string, std::string> out;
  collect_plugin_versions(g, registered_plugins(), &out);
  return out;
}

}  // namespace gearbox
