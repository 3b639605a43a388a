// Matmul micro-benchmark: the cpu.dnnl MatMul kernel (oneDNN sgemm) on N x N x N float32
// products, against the fp32 peak the device calibration measures in the same run.
//
//   ninja -C build gearbox_bench_matmul && build/gearbox_bench_matmul [--threads T] [--runs R]
//
// Prints, per size: the median time of R runs (after one warm-up), GFLOP/s (2 N^3 / t) and
// the ratio to the measured fp32 peak. Threads: OpenMP's (OMP_NUM_THREADS), as oneDNN uses.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "device/device.h"
#include "kernels/cpu/dnnl/dnnl_util.h"
#include "kernels/kernel.h"

using namespace gearbox;

namespace {

double run_once(const KernelDef& def, const Tensor& a, const Tensor& b) {
  RuntimeValue va(a), vb(b);
  std::vector<RuntimeValue> outs(1);
  AttributeMap attrs;
  OpInfo info{"bench", "MatMul", "", 13, &attrs};
  KernelContext ctx(info, {&va, &vb}, &outs, {true});
  const auto t0 = std::chrono::steady_clock::now();
  Status st = def.fn(ctx);
  const auto t1 = std::chrono::steady_clock::now();
  if (!st.ok()) {
    std::fprintf(stderr, "MatMul failed: %s\n", st.to_string().c_str());
    std::exit(1);
  }
  return std::chrono::duration<double>(t1 - t0).count();
}

Tensor random_matrix(int64_t n, uint32_t seed) {
  Tensor t(DType::F32, {n, n});
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(g);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0) omp_set_num_threads(std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
  }
  const KernelDef* def = KernelRegistry::global().find("", "MatMul", 13, kEngineDnnl, DType::F32);
  if (!def) {
    std::fprintf(stderr, "no cpu.dnnl MatMul kernel\n");
    return 1;
  }
  auto dev = device::get_device(device::DeviceKind::CPU, 0);
  if (!dev.ok()) {
    std::fprintf(stderr, "%s\n", dev.status().to_string().c_str());
    return 1;
  }
  auto peaks = dev.value()->measure_peaks(300);
  if (!peaks.ok() || !peaks.value().fp32_gflops) {
    std::fprintf(stderr, "calibration failed\n");
    return 1;
  }
  const double peak = *peaks.value().fp32_gflops;
  std::printf("threads %d, measured fp32 peak %.1f GFLOP/s (%d calibration threads)\n", omp_get_max_threads(), peak,
              peaks.value().threads);
  std::printf("%-8s %12s %12s %10s\n", "N", "median ms", "GFLOP/s", "of peak");
  for (int64_t n : {1024, 2048}) {
    const Tensor a = random_matrix(n, 1), b = random_matrix(n, 2);
    run_once(*def, a, b);  // warm-up: primitive creation, page faults
    std::vector<double> t;
    for (int r = 0; r < runs; ++r) t.push_back(run_once(*def, a, b));
    std::sort(t.begin(), t.end());
    const double med = t[t.size() / 2];
    const double gflops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / med / 1e9;
    std::printf("%-8lld %12.2f %12.1f %9.1f%%\n", static_cast<long long>(n), med * 1e3, gflops, 100.0 * gflops / peak);
  }
  return 0;
}
