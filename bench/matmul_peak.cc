// Matmul micro-benchmark: the cpu.dnnl MatMul kernel (oneDNN) and the cpu.simd MatMul
// kernel (the engine's own GEMM, kernels/cpu/simd/gemm*.cc) side by side, against the fp32
// peak the device calibration measures in the same run (the largest of three calibrations).
//
//   ninja -C build gearbox_bench_matmul && build/bench/gearbox_bench_matmul [--threads T] [--runs R] [--json]
//                                                          [--cpu-time] [--fresh-output] [--cold] [--shape MxKxN[c]]...
//
// Shapes: 1024^3 and 2048^3 with a run-time B (packed per call by both engines), and
// BERT-base's linear layers (M = 128 tokens) with a constant B (an initializer: both engines
// pack it once and cache it). The two engines alternate sample by sample, so load from
// other processes hits both alike; each sample times enough calls to last ~10 ms. Prints,
// per shape and engine, the median sample's GFLOP/s (2 M K N / t) and its ratio to the
// measured peak, the simd/dnnl speed ratio, and the largest difference between the two
// engines' outputs. --json prints the same as one JSON object. --cpu-time times with the
// calling thread's CPU time instead of wall time: with --threads 1 (all the work on that
// thread) on a loaded machine that is the kernel's own speed, unaffected by time the
// scheduler gives other processes (meaningless with more threads). --shape
// replaces the shapes with the given ones (suffix c: constant B). Outputs come from recycled
// buffers as in a session (ReusingSource below); --fresh-output allocates each call's anew.
// --cold gives each constant-B shape a ring of distinct B matrices (at least 64 MiB in all)
// used in turn, so every call's weights come from memory, not from a cache that the previous
// call warmed: that is how a model's layers meet their weights (BERT-base holds 340 MB).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/buffer_source.h"
#include "device/device.h"
#include "kernels/cpu/dnnl/dnnl_util.h"
#include "kernels/cpu/simd/simd_util.h"
#include "kernels/kernel.h"

using namespace gearbox;

namespace {

// Recycles output buffers the way a session's buffer pool does (runtime/buffer_pool.h): a
// block freed by one call serves the next call of the same size, so the timing does not
// include the page faults of a fresh multi-MiB allocation (glibc maps blocks that large
// anew per call; 2048^3's 16 MiB output cost ~10% of a call that way). --fresh-output turns
// it off. The free list is shared with every block's deleter, so a block a kernel's cache
// still holds at exit returns to a live list.
class ReusingSource : public BufferSource {
 public:
  std::shared_ptr<void> acquire(size_t bytes, bool zero) override {
    void* p = pool_->take(bytes);
    if (!p) p = std::aligned_alloc(kTensorAlignment, bytes);
    if (!p) return nullptr;
    if (zero) std::memset(p, 0, bytes);
    return std::shared_ptr<void>(p, [pool = pool_, bytes](void* q) { pool->give(bytes, q); });
  }

 private:
  struct Pool {
    std::mutex mu;
    std::vector<std::pair<size_t, void*>> free;
    ~Pool() {
      for (const auto& [bytes, p] : free) std::free(p);
    }
    void* take(size_t bytes) {
      std::lock_guard<std::mutex> lock(mu);
      for (size_t i = 0; i < free.size(); ++i)
        if (free[i].first == bytes) {
          void* p = free[i].second;
          free.erase(free.begin() + static_cast<std::ptrdiff_t>(i));
          return p;
        }
      return nullptr;
    }
    void give(size_t bytes, void* p) {
      std::lock_guard<std::mutex> lock(mu);
      free.emplace_back(bytes, p);
    }
  };
  std::shared_ptr<Pool> pool_ = std::make_shared<Pool>();
};
ReusingSource* g_outputs = nullptr;  // null: --fresh-output

struct Case {
  const char* name;
  int64_t m, k, n;
  bool constant_b;
};

Tensor run_once(const KernelDef& def, const Tensor& a, const Tensor& b, bool constant_b) {
  ScopedBufferSource scope(g_outputs);  // null: the heap
  RuntimeValue va(a), vb(b);
  std::vector<RuntimeValue> outs(1);
  AttributeMap attrs;
  OpInfo info{"bench", "MatMul", "", 13, &attrs};
  KernelContext ctx(info, {&va, &vb}, &outs, {true});
  ctx.set_constant_inputs({false, constant_b});
  Status st = def.fn(ctx);
  if (!st.ok()) {
    std::fprintf(stderr, "MatMul failed: %s\n", st.to_string().c_str());
    std::exit(1);
  }
  return outs[0].tensor();
}

Tensor random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  Tensor t(DType::F32, {rows, cols});
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(g);
  return t;
}

double now(bool cpu_time) {
  if (!cpu_time) return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 9;
  bool json = false, cpu_time = false, fresh_output = false, cold = false;
  std::vector<Case> custom;
  std::vector<std::string> names;  // keeps the custom cases' names alive
  names.reserve(static_cast<size_t>(argc));
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) json = true;
    if (std::strcmp(argv[i], "--cpu-time") == 0) cpu_time = true;
    if (std::strcmp(argv[i], "--fresh-output") == 0) fresh_output = true;
    if (std::strcmp(argv[i], "--cold") == 0) cold = true;
    if (i + 1 < argc && std::strcmp(argv[i], "--threads") == 0) omp_set_num_threads(std::atoi(argv[i + 1]));
    if (i + 1 < argc && std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
    long long m = 0, k = 0, n = 0;
    char c = 0;
    if (i + 1 < argc && std::strcmp(argv[i], "--shape") == 0 &&
        std::sscanf(argv[i + 1], "%lldx%lldx%lld%c", &m, &k, &n, &c) >= 3 && m > 0 && k > 0 && n > 0) {
      names.push_back(argv[i + 1]);
      custom.push_back({names.back().c_str(), m, k, n, c == 'c'});
    }
  }
  ReusingSource outputs;
  if (!fresh_output) g_outputs = &outputs;
  const KernelDef* defs[2] = {KernelRegistry::global().find("", "MatMul", 13, kEngineDnnl, DType::F32),
                              KernelRegistry::global().find("", "MatMul", 13, kEngineSimd, DType::F32)};
  if (!defs[0] || !defs[1]) {
    std::fprintf(stderr, "missing a cpu.dnnl or cpu.simd MatMul kernel\n");
    return 1;
  }
  auto dev = device::get_device(device::DeviceKind::CPU, 0);
  if (!dev.ok()) {
    std::fprintf(stderr, "%s\n", dev.status().to_string().c_str());
    return 1;
  }
  // The peak is the largest of three calibrations: on a shared machine one calibration can
  // be slowed by other processes, which would inflate every "of peak" figure.
  double peak = 0;
  int calibration_threads = 0;
  std::string calibrations;
  for (int i = 0; i < 3; ++i) {
    auto peaks = dev.value()->measure_peaks(300);
    if (!peaks.ok() || !peaks.value().fp32_gflops) {
      std::fprintf(stderr, "calibration failed\n");
      return 1;
    }
    peak = std::max(peak, *peaks.value().fp32_gflops);
    calibration_threads = peaks.value().threads;
    calibrations += (i ? ", " : "") + std::to_string(static_cast<int>(*peaks.value().fp32_gflops + 0.5));
  }
  if (!json) {
    std::printf("threads %d, measured fp32 peak %.1f GFLOP/s (largest of %s; %d calibration threads), simd dispatch %s%s\n",
                omp_get_max_threads(), peak, calibrations.c_str(), calibration_threads, simd::dispatch_target_name(),
                cold ? ", constant B cold (a ring of copies)" : "");
    std::printf("%-22s %6s | %9s %8s | %9s %8s | %9s %10s\n", "shape (M x K x N)", "B", "dnnl GF/s", "of peak",
                "simd GF/s", "of peak", "simd/dnnl", "max |diff|");
  }
  std::vector<Case> shapes = {
      {"1024^3", 1024, 1024, 1024, false},         {"2048^3", 2048, 2048, 2048, false},
      {"bert 128x768x768", 128, 768, 768, true},   {"bert 128x768x2304", 128, 768, 2304, true},
      {"bert 128x768x3072", 128, 768, 3072, true}, {"bert 128x3072x768", 128, 3072, 768, true},
  };
  if (!custom.empty()) shapes = custom;
  std::string out = "{\"threads\": " + std::to_string(omp_get_max_threads()) +
                    ", \"peak_gflops\": " + std::to_string(peak) + ", \"shapes\": [";
  bool first = true;
  for (const Case& s : shapes) {
    const Tensor a = random_matrix(s.m, s.k, 1), b = random_matrix(s.k, s.n, 2);
    // The B of each call: one matrix, or with --cold a ring of copies in distinct buffers
    // (each packed once and cached by both engines, as a model's weights are).
    std::vector<Tensor> ring{b};
    if (cold && s.constant_b) {
      const int64_t bytes = static_cast<int64_t>(b.nbytes());
      const int64_t copies = std::max<int64_t>(2, ((int64_t{64} << 20) + bytes - 1) / bytes);
      for (int64_t c = 1; c < copies; ++c) ring.push_back(b.clone());
    }
    size_t next = 0;
    auto next_b = [&]() -> const Tensor& { return ring[next++ % ring.size()]; };
    const double flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.k) * static_cast<double>(s.n);
    // Calls per sample: about 10 ms at ~200 GFLOP/s.
    const int reps = std::max(1, static_cast<int>(2e9 / flops));
    // Warm-up (primitive creation, packing of a constant B, page faults), and the outputs.
    const Tensor y0 = run_once(*defs[0], a, b, s.constant_b), y1 = run_once(*defs[1], a, b, s.constant_b);
    double diff = 0;
    for (int64_t i = 0; i < y0.numel(); ++i)
      diff = std::max(diff, static_cast<double>(std::fabs(y0.data<float>()[i] - y1.data<float>()[i])));
    // Untimed alternation first: the first timed samples of a process ran at a third of the
    // speed for either engine at random (thread start-up, clock ramp), so give it ~0.2 s.
    for (int r = 0; r < 10; ++r)
      for (int e = 0; e < 2; ++e)
        for (size_t c = 0; c < ring.size(); ++c) run_once(*defs[e], a, next_b(), s.constant_b);
    std::vector<double> t[2];
    for (int r = 0; r < runs; ++r) {
      for (int e = 0; e < 2; ++e) {
        const double t0 = now(cpu_time);
        for (int i = 0; i < reps; ++i) run_once(*defs[e], a, next_b(), s.constant_b);
        t[e].push_back((now(cpu_time) - t0) / reps);
      }
    }
    const double gf[2] = {flops / median(t[0]) / 1e9, flops / median(t[1]) / 1e9};
    if (json) {
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "%s{\"shape\": \"%s\", \"m\": %lld, \"k\": %lld, \"n\": %lld, \"constant_b\": %s, "
                    "\"dnnl_gflops\": %.1f, \"simd_gflops\": %.1f, \"dnnl_of_peak\": %.3f, \"simd_of_peak\": %.3f, "
                    "\"max_abs_diff\": %.3g}",
                    first ? "" : ", ", s.name, static_cast<long long>(s.m), static_cast<long long>(s.k),
                    static_cast<long long>(s.n), s.constant_b ? "true" : "false", gf[0], gf[1], gf[0] / peak,
                    gf[1] / peak, diff);
      out += buf;
      first = false;
    } else {
      std::printf("%-22s %6s | %9.1f %7.1f%% | %9.1f %7.1f%% | %9.2f %10.2g\n", s.name,
                  s.constant_b ? "const" : "run", gf[0], 100.0 * gf[0] / peak, gf[1], 100.0 * gf[1] / peak,
                  gf[1] / gf[0], diff);
    }
  }
  if (json) std::printf("%s]}\n", out.c_str());
  return 0;
}
