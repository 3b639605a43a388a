#include "device/calibration.h"

#include <immintrin.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <vector>

#include "base/atomic_file.h"
#include "base/logging.h"

namespace gearbox::device {
namespace {

using Clock = std::chrono::steady_clock;

// Each kernel runs `iters` rounds of kChains independent FMA chains (enough to cover the
// FMA latency x ports of current cores) and returns a value that depends on every result,
// so the compiler cannot drop the work. Returns flops done.
constexpr int kChains = 12;

// Sums two lanes of every chain (enough to keep all of them live).
__attribute__((target("avx512f"))) double sum_lanes(const __m512* acc) {
  double total = 0;
  for (int i = 0; i < kChains; ++i) {
    float lanes[16];
    _mm512_storeu_ps(lanes, acc[i]);
    total += lanes[0] + lanes[15];
  }
  return total;
}

__attribute__((target("avx512f"))) double fma_avx512(long iters, float seed) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  return sum_lanes(acc);
}

__attribute__((target("avx2,fma"))) double fma_avx2(long iters, float seed) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  float out[8];
  __m256 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, acc[i]);
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}

double fma_scalar(long iters, float seed) {
  float acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = seed + static_cast<float>(i);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = acc[i] * 0.999999f + 1e-7f;
  double s = 0;
  for (float v : acc) s += v;
  return s;
}

// vdpbf16ps: per fp32 lane, two bf16 products accumulated = 4 flops per lane.
__attribute__((target("avx512f,avx512bf16"))) double dp_bf16(long iters, float seed) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80);  // bf16 1.0
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3380);  // bf16 ~6e-8
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  return sum_lanes(acc);
}

// clang before 15 has neither the avx512fp16 intrinsics nor _Float16 on x86 (the GEARBOX_FUZZ
// tree is built with Debian's clang-14): such a build measures no fp16 rate.
#if !defined(__clang__) || __clang_major__ >= 15
#define GEARBOX_HAVE_AVX512FP16_INTRINSICS 1
__attribute__((target("avx512fp16"))) double fma_fp16(long iters, float seed) {
  __m512h acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ph(static_cast<_Float16>(seed));
  const __m512h a = _mm512_set1_ph(static_cast<_Float16>(0.999f)), b = _mm512_set1_ph(static_cast<_Float16>(0.001f));
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ph(acc[i], a, b);
  float out[16];
  __m512h s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ph(s, acc[i]);
  _mm512_storeu_ps(out, _mm512_castph_ps(s));
  return out[0] + out[15];
}
#endif

std::atomic<double> g_sink{0};

// Runs `kernel(iters)` on `threads` threads, doubling iters until a run takes budget_ms/4,
// then reports the best rate of 3 runs. flops_per_iter counts all threads' lanes of one
// iteration of one thread.
double measure_rate(int threads, int budget_ms, double flops_per_iter,
                    const std::function<double(long, float)>& kernel) {
  auto run = [&](long iters) {
    std::vector<std::thread> pool;
    std::atomic<bool> go{false};
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        g_sink = g_sink + kernel(iters, 1.0f + static_cast<float>(t));
      });
    auto t0 = Clock::now();
    go.store(true, std::memory_order_release);
    for (auto& th : pool) th.join();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  long iters = 1 << 12;
  double target = budget_ms / 4000.0, secs = run(iters);
  while (secs < target && iters < (1L << 40)) {
    iters *= 2;
    secs = run(iters);
  }
  double best = 0;
  for (int rep = 0; rep < 3; ++rep)
    best = std::max(best, flops_per_iter * static_cast<double>(iters) * threads / run(iters));
  return best / 1e9;
}

// Read bandwidth: every thread sums its slice of a buffer much larger than the caches.
double measure_bandwidth(int threads, int budget_ms, size_t bytes) {
  size_t n = bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[n]);
  for (size_t i = 0; i < n; ++i) buf[i] = i;  // commit the pages before timing
  double best = 0;
  auto deadline = Clock::now() + std::chrono::milliseconds(budget_ms);
  int reps = 0;
  do {
    std::vector<std::thread> pool;
    auto t0 = Clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        size_t lo = n * t / threads, hi = n * (t + 1) / threads;
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t i = lo; i + 3 < hi; i += 4) {
          s0 += buf[i];
          s1 += buf[i + 1];
          s2 += buf[i + 2];
          s3 += buf[i + 3];
        }
        g_sink = g_sink + static_cast<double>(s0 + s1 + s2 + s3);
      });
    for (auto& th : pool) th.join();
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / secs / 1e9);
    ++reps;
  } while (Clock::now() < deadline || reps < 2);
  return best;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

Result<Peaks> calibrate_cpu(const Capabilities& caps, int budget_ms) {
  auto t0 = Clock::now();
  Peaks p;
  p.threads = std::max(1, caps.logical_cores);
  budget_ms = std::max(budget_ms, 20);
  if (caps.has("avx512f")) p.fp32_gflops = measure_rate(p.threads, budget_ms, kChains * 16 * 2.0, fma_avx512);
  else if (caps.has("avx2") && caps.has("fma"))
    p.fp32_gflops = measure_rate(p.threads, budget_ms, kChains * 8 * 2.0, fma_avx2);
  else p.fp32_gflops = measure_rate(p.threads, budget_ms, kChains * 2.0, fma_scalar);
  if (caps.has("avx512_bf16")) {
    p.bf16_gflops = measure_rate(p.threads, budget_ms, kChains * 16 * 4.0, dp_bf16);
    p.bf16_note = "avx512_bf16 vdpbf16ps (bf16 products, fp32 accumulation)";
  } else {
    p.bf16_note = "no native bf16 dot product (avx512_bf16 or amx_bf16) on this CPU; bf16 runs converted to fp32";
  }
  if (caps.has("avx512_fp16")) {
#ifdef GEARBOX_HAVE_AVX512FP16_INTRINSICS
    p.fp16_gflops = measure_rate(p.threads, budget_ms, kChains * 32 * 2.0, fma_fp16);
    p.fp16_note = "avx512_fp16 vfmadd (fp16 accumulation)";
#else
    p.fp16_note = "not measured: this gearbox was built by a compiler without avx512_fp16 intrinsics";
#endif
  } else {
    p.fp16_note = "no native fp16 FMA (avx512_fp16) on this CPU; fp16 runs converted to fp32";
  }
  p.bandwidth_gbs = measure_bandwidth(p.threads, budget_ms, size_t{256} << 20);
  p.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  p.measured_at = utc_now();
  GBX_LOG_INFO("DEVICE", "calibrated in {:.2f} s: fp32 {:.1f} GFLOP/s, read bandwidth {:.1f} GB/s", p.seconds,
               *p.fp32_gflops, *p.bandwidth_gbs);
  return p;
}

std::string calibration_cache_path() {
  std::string dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = x;
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache";
  else dir = "/tmp";
  return dir + "/gearbox/calibration.json";
}

std::string calibration_key(const Capabilities& caps) { return caps.model + "|" + std::to_string(caps.logical_cores); }

nlohmann::json peaks_to_json(const Peaks& p) {
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"fp32_gflops", opt(p.fp32_gflops)},
          {"bf16_gflops", opt(p.bf16_gflops)},
          {"fp16_gflops", opt(p.fp16_gflops)},
          {"bandwidth_gbs", opt(p.bandwidth_gbs)},
          {"bf16_note", p.bf16_note},
          {"fp16_note", p.fp16_note},
          {"threads", p.threads},
          {"seconds", p.seconds},
          {"measured_at", p.measured_at}};
}

Peaks peaks_from_json(const nlohmann::json& j) {
  auto opt = [&](const char* k) -> std::optional<double> {
    if (j.contains(k) && j[k].is_number()) return j[k].get<double>();
    return std::nullopt;
  };
  Peaks p;
  p.fp32_gflops = opt("fp32_gflops");
  p.bf16_gflops = opt("bf16_gflops");
  p.fp16_gflops = opt("fp16_gflops");
  p.bandwidth_gbs = opt("bandwidth_gbs");
  p.bf16_note = j.value("bf16_note", "");
  p.fp16_note = j.value("fp16_note", "");
  p.threads = j.value("threads", 0);
  p.seconds = j.value("seconds", 0.0);
  p.measured_at = j.value("measured_at", "");
  return p;
}

std::optional<Peaks> load_cached_peaks(const Capabilities& caps) {
  std::ifstream in(calibration_cache_path());
  if (!in) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("machines") || !j["machines"].is_object()) return std::nullopt;
  auto it = j["machines"].find(calibration_key(caps));
  if (it == j["machines"].end() || !it->is_object()) return std::nullopt;
  return peaks_from_json(*it);
}

Status save_cached_peaks(const Capabilities& caps, const Peaks& peaks) {
  std::string path = calibration_cache_path();
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  nlohmann::json j;
  if (std::ifstream in(path); in) j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) j = nlohmann::json::object();
  if (!j.contains("machines") || !j["machines"].is_object()) j["machines"] = nlohmann::json::object();
  j["version"] = 1;
  j["machines"][calibration_key(caps)] = peaks_to_json(peaks);
  return write_file_atomically(path, j.dump(2) + "\n");  // concurrent readers see old or new
}

}  // namespace gearbox::device
