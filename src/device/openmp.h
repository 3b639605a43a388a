// The OpenMP runtime that gearbox's and oneDNN's threads come from, and its defaults.
//
// gearbox is compiled with GCC's -fopenmp (GNU OpenMP's GOMP_* ABI) and, by default, linked
// with LLVM's libomp, which serves that ABI ahead of the libgomp that Debian's oneDNN pulls in
// (CMakeLists.txt, GEARBOX_OPENMP_RUNTIME, says why). Which library a process really got
// depends on the dynamic linker's lookup order, so it is read at run time, not assumed.
#pragma once

#include <string>

namespace gearbox::device {

struct OpenMpRuntime {
  std::string library;  // "libomp", "libgomp", or the file name of whatever else serves it
  std::string path;     // the resolved file; "" when no OpenMP runtime is loaded
  bool llvm = false;    // LLVM's libomp (kmp_* extensions, KMP_BLOCKTIME)
};

// The library that GOMP_parallel, the call behind every `#pragma omp parallel` in gearbox and
// oneDNN, resolves to in this process.
OpenMpRuntime openmp_runtime();

// The file gearbox was linked against for OpenMP ("" when unknown).
std::string openmp_build_library();

// How long libomp's idle threads spin before they sleep, in ms, when the user has not chosen:
// libomp's own default is 200 ms of a core per thread after every parallel region, which a
// server between requests or the other runtime in an A/B benchmark pays for; libgomp, which
// gearbox used before, spins ~10 ms. 5 ms covers the gaps between one run's nodes (~microseconds)
// and between back-to-back runs.
inline constexpr int kDefaultBlocktimeMs = 5;

// Sets KMP_BLOCKTIME to kDefaultBlocktimeMs unless the environment already sets it. libomp
// reads it once, when it initializes at the first OpenMP call, so this must run before that:
// Session::create and the CLI's main call it first. Idempotent and thread-safe.
void configure_openmp();

// libomp's blocktime as the runtime applies it (kmp_get_blocktime), or -1 under another runtime.
int openmp_blocktime_ms();

}  // namespace gearbox::device
