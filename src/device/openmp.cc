#include "device/openmp.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>

#ifndef GEARBOX_BUILD_OPENMP_LIB
#define GEARBOX_BUILD_OPENMP_LIB ""
#endif

namespace gearbox::device {

OpenMpRuntime openmp_runtime() {
  OpenMpRuntime r;
  // RTLD_DEFAULT: the global lookup oneDNN's own calls go through.
  void* sym = dlsym(RTLD_DEFAULT, "GOMP_parallel");
  Dl_info info{};
  if (!sym || !dladdr(sym, &info) || !info.dli_fname) return r;
  std::error_code ec;
  const std::filesystem::path resolved = std::filesystem::canonical(info.dli_fname, ec);
  r.path = ec ? std::string(info.dli_fname) : resolved.string();
  const std::string file = std::filesystem::path(r.path).filename().string();
  // Debian names libomp's file libomp.so.5 (llvm-14/lib/libomp.so.5); Intel's copy is libiomp5.
  r.llvm = file.rfind("libomp", 0) == 0 || file.rfind("libiomp", 0) == 0;
  r.library = r.llvm ? "libomp" : file.rfind("libgomp", 0) == 0 ? "libgomp" : file;
  return r;
}

std::string openmp_build_library() {
  std::string p = GEARBOX_BUILD_OPENMP_LIB;
  if (p.empty()) return p;
  std::error_code ec;
  const std::filesystem::path resolved = std::filesystem::canonical(p, ec);
  return ec ? p : resolved.string();
}

void configure_openmp() {
  static std::once_flag once;
  std::call_once(once, [] {
    // overwrite = 0: the user's KMP_BLOCKTIME wins.
    setenv("KMP_BLOCKTIME", std::to_string(kDefaultBlocktimeMs).c_str(), 0);
  });
}

int openmp_blocktime_ms() {
  using GetBlocktime = int (*)();
  auto fn = reinterpret_cast<GetBlocktime>(dlsym(RTLD_DEFAULT, "kmp_get_blocktime"));
  return fn ? fn() : -1;
}

}  // namespace gearbox::device
