#include "device/runtime_libraries.h"

#include <dlfcn.h>
#include <link.h>

#include <filesystem>

#include "device/openmp.h"

#if __has_include(<oneapi/dnnl/dnnl_version.h>)
#include <oneapi/dnnl/dnnl_types.h>
#include <oneapi/dnnl/dnnl_version.h>
#define GEARBOX_HAVE_DNNL_HEADERS 1
#endif

#ifndef GEARBOX_BUILD_PROTOBUF_VERSION
#define GEARBOX_BUILD_PROTOBUF_VERSION ""
#endif
#ifndef GEARBOX_BUILD_PROTOBUF_LIB
#define GEARBOX_BUILD_PROTOBUF_LIB ""
#endif
#ifndef GEARBOX_BUILD_ONNX_VERSION
#define GEARBOX_BUILD_ONNX_VERSION ""
#endif
#ifndef GEARBOX_BUILD_ONNX_LIB
#define GEARBOX_BUILD_ONNX_LIB ""
#endif

namespace gearbox::device {
namespace {

std::string resolve(const std::string& p) {
  std::error_code ec;
  auto r = std::filesystem::canonical(p, ec);
  return ec ? p : r.string();
}

// The resolved path of a loaded shared object whose file name starts with `prefix`.
std::string find_loaded(const std::string& prefix) {
  struct Ctx {
    std::string prefix, found;
  } ctx{prefix, ""};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* c = static_cast<Ctx*>(data);
        if (!info->dlpi_name || !*info->dlpi_name) return 0;
        std::string file = std::filesystem::path(info->dlpi_name).filename().string();
        if (file.rfind(c->prefix, 0) == 0) {
          c->found = info->dlpi_name;
          return 1;
        }
        return 0;
      },
      &ctx);
  return ctx.found.empty() ? "" : resolve(ctx.found);
}

LibraryVersion linked(const std::string& name, const std::string& file_prefix, const std::string& build_version,
                      const std::string& build_lib) {
  LibraryVersion v;
  v.name = name;
  v.build_version = build_version;
  v.build_path = build_lib.empty() ? "" : resolve(build_lib);
  v.runtime_path = find_loaded(file_prefix);
  v.loaded = !v.runtime_path.empty();
  // The file name carries the soname version ("libprotobuf.so.32.0.12"), which need not
  // read like the release number ("3.21.12").
  v.runtime_version = v.loaded ? std::filesystem::path(v.runtime_path).filename().string() : "";
  if (!v.loaded) {
    v.note = "not loaded in this process (linked statically, or not used by this program)";
    v.match = true;
  } else {
    v.match = v.build_path.empty() || v.build_path == v.runtime_path;
    v.note = v.match ? "the loaded file is the one linked at build time"
                     : "the loaded file differs from the one linked at build time";
  }
  return v;
}

LibraryVersion onednn() {
  LibraryVersion v;
  v.name = "oneDNN";
#ifdef GEARBOX_HAVE_DNNL_HEADERS
  v.build_version = std::to_string(DNNL_VERSION_MAJOR) + "." + std::to_string(DNNL_VERSION_MINOR) + "." +
                    std::to_string(DNNL_VERSION_PATCH);
  std::string soname = "libdnnl.so." + std::to_string(DNNL_VERSION_MAJOR);
  // Loaded on demand (RTLD_NOLOAD first: reuse it if the process already has it).
  void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    v.note = std::string("cannot load ") + soname + ": " + dlerror();
    return v;
  }
  using VersionFn = const dnnl_version_t* (*)();
  auto fn = reinterpret_cast<VersionFn>(dlsym(h, "dnnl_version"));
  if (fn) {
    const dnnl_version_t* rv = fn();
    v.runtime_version = std::to_string(rv->major) + "." + std::to_string(rv->minor) + "." + std::to_string(rv->patch);
    v.loaded = true;
    v.match = rv->major == DNNL_VERSION_MAJOR && rv->minor == DNNL_VERSION_MINOR;
    v.note = v.match ? "dnnl_version() matches the headers" : "dnnl_version() differs from the headers' major.minor";
  } else {
    v.note = soname + " has no dnnl_version symbol";
  }
  v.runtime_path = find_loaded("libdnnl.so");
  dlclose(h);
#else
  v.note = "built without oneDNN headers";
#endif
  return v;
}

// The runtime serving OpenMP's calls against the one linked at build time: a process can load
// both libgomp (oneDNN's) and libomp, and the first in the dynamic linker's lookup serves all.
LibraryVersion openmp() {
  LibraryVersion v;
  v.name = "OpenMP";
  const OpenMpRuntime rt = openmp_runtime();
  v.build_path = openmp_build_library();
  v.build_version = v.build_path.empty() ? "" : std::filesystem::path(v.build_path).filename().string();
  v.runtime_path = rt.path;
  v.loaded = !rt.path.empty();
  v.runtime_version = v.loaded ? std::filesystem::path(rt.path).filename().string() : "";
  if (!v.loaded) {
    v.note = "no OpenMP runtime is loaded";
    return v;
  }
  v.match = v.build_path.empty() || v.build_path == v.runtime_path;
  v.note = v.match ? "every parallel region (gearbox's and oneDNN's) runs on " + rt.library
                   : "parallel regions run on " + rt.library + ", not on the runtime linked at build time";
  if (rt.llvm) v.note += "; idle threads spin " + std::to_string(openmp_blocktime_ms()) + " ms (KMP_BLOCKTIME)";
  return v;
}

}  // namespace

std::vector<LibraryVersion> runtime_libraries() {
  return {onednn(), openmp(),
          linked("protobuf", "libprotobuf.so", GEARBOX_BUILD_PROTOBUF_VERSION, GEARBOX_BUILD_PROTOBUF_LIB),
          linked("onnx", "libonnx.so", GEARBOX_BUILD_ONNX_VERSION, GEARBOX_BUILD_ONNX_LIB)};
}

}  // namespace gearbox::device
