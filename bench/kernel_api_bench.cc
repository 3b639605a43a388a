// The cpu.simd kernels written with the kernel API (include/gearbox/kernel_api.hpp;
// src/kernels/cpu/simd/tile_*.cc) against hand-written Highway loops of the same algorithm
// (below: raw hn:: intrinsics, the tail through simd_math-inl.h's LoadN/StoreN, threaded with
// cpu.simd's for_each_index as the engine's other kernels are). Same formula on both sides,
// so the ratio is what the API's abstractions (Map's lambda, the dispatch per chunk,
// parallel_for) cost.
//
//   ninja -C build gearbox_bench_kernel_api && build/bench/gearbox_bench_kernel_api [--rounds R] [--threads T]
//                                                                             [--cpu-time]
//
// The two versions alternate sample by sample (A B A B ...), so load from other processes
// hits both alike; each sample times enough calls to last ~5 ms. Prints per op the median
// sample of each (us per call) and tile/hand (the median of the per-round ratios; < 1.10 is
// the issue-28 criterion), and the largest difference between the two outputs; then the
// kernel API's tile matmul in fp32 and bf16 (GFLOP/s on one thread). --cpu-time
// times with the calling thread's CPU time: with --threads 1 on a loaded machine that is the
// kernels' own speed, not the time the scheduler gave other processes (meaningless with more
// threads).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernel_api_bench.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/simd/simd_math-inl.h"

// The kernel API's tile matmul, timed below in fp32 and bf16 (a public header: by path).
#include "../include/gearbox/kernel_api.hpp"

GBX_KAPI_BEGIN(bench_tile)
// C[m x n] = A[m x k] B[k x n], row-major, `reps` times (the tile stays in L1/L2).
void TileMatMulF32(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, int reps) {
  for (int r = 0; r < reps; ++r) MatMul({a, m, k, k}, {b, k, n, n}, {c, m, n, n});
}
void TileMatMulBf16(const gbx::kapi::bf16* a, const gbx::kapi::bf16* b, float* c, int64_t m, int64_t n, int64_t k,
                    int reps) {
  for (int r = 0; r < reps; ++r) MatMulBF16({a, m, k, k}, {b, k, n, n}, {c, m, n, n});
}
GBX_KAPI_END(bench_tile)

HWY_BEFORE_NAMESPACE();
namespace bench_hand {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using gearbox::simd::HWY_NAMESPACE::LoadN;
using gearbox::simd::HWY_NAMESPACE::StoreN;

void MishHand(const float* x, float* y, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t l = static_cast<int64_t>(hn::Lanes(d));
  const auto two = hn::Set(d, 2.f), big = hn::Set(d, 20.f), lo = hn::Set(d, -104.f);
  for (int64_t i = 0; i < n; i += l) {
    const auto v = LoadN(d, x + i, n - i);
    const auto e = hn::Exp(d, hn::Max(hn::Min(v, big), lo));
    const auto num = hn::Mul(e, hn::Add(e, two));
    const auto r = hn::Mul(v, hn::Div(num, hn::Add(num, two)));
    StoreN(hn::IfThenElse(hn::Gt(v, big), v, r), d, y + i, n - i);
  }
}

void HardSwishHand(const float* x, float* y, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t l = static_cast<int64_t>(hn::Lanes(d));
  const auto six = hn::Set(d, 6.f), half = hn::Set(d, 0.5f), zero = hn::Zero(d), one = hn::Set(d, 1.f);
  for (int64_t i = 0; i < n; i += l) {
    const auto v = LoadN(d, x + i, n - i);
    StoreN(hn::Mul(v, hn::Max(hn::Min(hn::Add(hn::Div(v, six), half), one), zero)), d, y + i, n - i);
  }
}

void InstanceNormHand(const float* x, float* y, int64_t p, int64_t channels, int64_t plane, const float* scale,
                      const float* bias, float eps) {
  const hn::ScalableTag<float> d;
  const int64_t l = static_cast<int64_t>(hn::Lanes(d));
  const float* xp = x + p * plane;
  float* yp = y + p * plane;
  const auto pivot = hn::Set(d, xp[0]);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * l <= plane; i += 2 * l) {
    s0 = hn::Add(s0, hn::Sub(hn::LoadU(d, xp + i), pivot));
    s1 = hn::Add(s1, hn::Sub(hn::LoadU(d, xp + i + l), pivot));
  }
  for (; i < plane; i += l)
    s0 = hn::Add(s0, hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(plane - i)),
                                        hn::Sub(LoadN(d, xp + i, plane - i), pivot)));
  const float mean = xp[0] + hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1))) / static_cast<float>(plane);
  const auto vm = hn::Set(d, mean);
  s0 = s1 = hn::Zero(d);
  for (i = 0; i + 2 * l <= plane; i += 2 * l) {
    const auto a = hn::Sub(hn::LoadU(d, xp + i), vm), b = hn::Sub(hn::LoadU(d, xp + i + l), vm);
    s0 = hn::MulAdd(a, a, s0);
    s1 = hn::MulAdd(b, b, s1);
  }
  for (; i < plane; i += l) {
    const auto a =
        hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(plane - i)), hn::Sub(LoadN(d, xp + i, plane - i), vm));
    s0 = hn::MulAdd(a, a, s0);
  }
  const float var = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1))) / static_cast<float>(plane);
  const int64_t c = p % channels;
  const auto va = hn::Set(d, scale[c] / std::sqrt(var + eps)), vb = hn::Set(d, bias[c]);
  for (i = 0; i < plane; i += l)
    StoreN(hn::MulAdd(hn::Sub(LoadN(d, xp + i, plane - i), vm), va, vb), d, yp + i, plane - i);
}

void LogSoftmaxHand(const float* x, float* y, int64_t r, int64_t len) {
  const hn::ScalableTag<float> d;
  const int64_t l = static_cast<int64_t>(hn::Lanes(d));
  const float* xr = x + r * len;
  const auto ninf = hn::Set(d, -HUGE_VALF);
  auto m = ninf;
  for (int64_t i = 0; i < len; i += l)
    m = hn::Max(
        m, hn::IfThenElse(hn::FirstN(d, static_cast<size_t>(std::min(l, len - i))), LoadN(d, xr + i, len - i), ninf));
  const auto vmx = hn::MaxOfLanes(d, m);
  auto s = hn::Zero(d);
  for (int64_t i = 0; i < len; i += l) {
    const auto valid = hn::FirstN(d, static_cast<size_t>(std::min(l, len - i)));
    s = hn::Add(
        s, hn::IfThenElseZero(valid, hn::Exp(d, hn::Max(hn::Sub(LoadN(d, xr + i, len - i), vmx), hn::Set(d, -104.f)))));
  }
  const auto lse = hn::Log(d, hn::SumOfLanes(d, s));
  for (int64_t i = 0; i < len; i += l)
    StoreN(hn::Sub(hn::Sub(LoadN(d, xr + i, len - i), vmx), lse), d, y + r * len + i, len - i);
}

}  // namespace HWY_NAMESPACE
}  // namespace bench_hand
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/simd/simd_util.h"
#include "kernels/cpu/simd/tile_kernels.h"

namespace bench_hand {
HWY_EXPORT(MishHand);
HWY_EXPORT(HardSwishHand);
HWY_EXPORT(InstanceNormHand);
HWY_EXPORT(LogSoftmaxHand);
}  // namespace bench_hand
namespace bench_tile {
HWY_EXPORT(TileMatMulF32);
HWY_EXPORT(TileMatMulBf16);
}  // namespace bench_tile

namespace {

using gearbox::simd::for_each_index;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool g_cpu_time = false;

double now_us() {
  if (g_cpu_time) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Microseconds per call of f, over `reps` calls.
double time_us(const std::function<void()>& f, int reps) {
  const double t0 = now_us();
  for (int i = 0; i < reps; ++i) f();
  return (now_us() - t0) / reps;
}

struct Case {
  std::string name;
  std::function<void()> tile, hand;
  const std::vector<float>* out_tile;
  const std::vector<float>* out_hand;
};

}  // namespace

int main(int argc, char** argv) {
  int rounds = 21;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) omp_set_num_threads(std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--cpu-time")) g_cpu_time = true;
    else {
      std::fprintf(stderr, "usage: %s [--rounds R] [--threads T] [--cpu-time]\n", argv[0]);
      return 2;
    }
  }
  std::mt19937 g(1);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  const auto fill = [&](std::vector<float>& v) {
    for (float& x : v) x = u(g);
  };
  // Mish and HardSwish: 1M floats (4 MiB, a ResNet-sized activation). InstanceNorm: 8 x 64 x 56 x 56.
  // LogSoftmax: 512 rows of 4096 (a language model's logits).
  const int64_t mish_n = 1 << 20;
  const int64_t in_n = 8, in_c = 64, in_plane = 56 * 56;
  const int64_t ls_rows = 512, ls_len = 4096;
  std::vector<float> mx(mish_n), my_t(mish_n), my_h(mish_n), hy_t(mish_n), hy_h(mish_n);
  std::vector<float> ix(in_n * in_c * in_plane), iy_t(ix.size()), iy_h(ix.size()), sc(in_c), bi(in_c);
  std::vector<float> lx(ls_rows * ls_len), ly_t(lx.size()), ly_h(lx.size());
  fill(mx), fill(ix), fill(sc), fill(bi), fill(lx);
  constexpr int64_t kChunk = 16384;

  std::vector<Case> cases;
  cases.push_back({"Mish [1M]", [&] { gearbox::simd::tile_mish(mx.data(), my_t.data(), mish_n); },
                   [&] {
                     for_each_index((mish_n + kChunk - 1) / kChunk, mish_n > 2 * kChunk, [&](int64_t i) {
                       const int64_t c = i * kChunk;
                       HWY_DYNAMIC_DISPATCH(bench_hand::MishHand)
                       (mx.data() + c, my_h.data() + c, std::min(kChunk, mish_n - c));
                     });
                   },
                   &my_t, &my_h});
  cases.push_back({"HardSwish [1M]", [&] { gearbox::simd::tile_hard_swish(mx.data(), hy_t.data(), mish_n); },
                   [&] {
                     for_each_index((mish_n + kChunk - 1) / kChunk, mish_n > 2 * kChunk, [&](int64_t i) {
                       const int64_t c = i * kChunk;
                       HWY_DYNAMIC_DISPATCH(bench_hand::HardSwishHand)
                       (mx.data() + c, hy_h.data() + c, std::min(kChunk, mish_n - c));
                     });
                   },
                   &hy_t, &hy_h});
  cases.push_back({"InstanceNormalization [8,64,56,56]",
                   [&] {
                     gearbox::simd::tile_instance_norm(ix.data(), iy_t.data(), in_n * in_c, in_c, in_plane, sc.data(),
                                                       bi.data(), 1e-5f);
                   },
                   [&] {
                     for_each_index(in_n * in_c, true, [&](int64_t p) {
                       HWY_DYNAMIC_DISPATCH(bench_hand::InstanceNormHand)
                       (ix.data(), iy_h.data(), p, in_c, in_plane, sc.data(), bi.data(), 1e-5f);
                     });
                   },
                   &iy_t, &iy_h});
  cases.push_back({"LogSoftmax [512,4096]",
                   [&] { gearbox::simd::tile_log_softmax(lx.data(), ly_t.data(), ls_rows, ls_len); },
                   [&] {
                     for_each_index(ls_rows, true, [&](int64_t r) {
                       HWY_DYNAMIC_DISPATCH(bench_hand::LogSoftmaxHand)(lx.data(), ly_h.data(), r, ls_len);
                     });
                   },
                   &ly_t, &ly_h});

  std::printf("target %s, %d threads, %d rounds (tile and hand alternate), %s time\n",
              gearbox::simd::dispatch_target_name(), omp_get_max_threads(), rounds, g_cpu_time ? "thread CPU" : "wall");
  std::printf("%-36s %12s %12s %10s %12s\n", "op", "tile us", "hand us", "tile/hand", "max |diff|");
  for (const Case& c : cases) {
    c.tile();  // warm up both (page faults, dispatch tables)
    c.hand();
    const double once = std::max(1.0, time_us(c.hand, 3));
    const int reps = std::max(1, static_cast<int>(5000.0 / once));
    std::vector<double> a, b, ratio;
    for (int r = 0; r < rounds; ++r) {
      const double ta = time_us(c.tile, reps), tb = time_us(c.hand, reps);
      a.push_back(ta);
      b.push_back(tb);
      ratio.push_back(ta / tb);
    }
    double diff = 0;
    for (size_t i = 0; i < c.out_tile->size(); ++i)
      diff = std::max(diff, std::fabs(double((*c.out_tile)[i]) - (*c.out_hand)[i]));
    std::printf("%-36s %12.1f %12.1f %10.3f %12.3g\n", c.name.c_str(), median(a), median(b), median(ratio), diff);
  }

  // The tile matmul on one thread: a 96 x 256 x 256 tile, fp32 and bf16 inputs (fp32 sums;
  // VDPBF16PS when the CPU has AVX512_BF16), alternating, GFLOP/s of the median sample.
  const int64_t m = 96, n = 256, k = 256;
  std::vector<float> a(m * k), b(k * n), c32(m * n), c16(m * n);
  fill(a), fill(b);
  std::vector<gbx::kapi::bf16> ah(a.size()), bh(b.size());
  for (size_t i = 0; i < a.size(); ++i) ah[i] = gbx::kapi::to_bf16(a[i]);
  for (size_t i = 0; i < b.size(); ++i) bh[i] = gbx::kapi::to_bf16(b[i]);
  const int reps = 20;
  std::vector<double> t32, t16;
  for (int r = 0; r < rounds; ++r) {
    t32.push_back(
        time_us([&] { HWY_DYNAMIC_DISPATCH(bench_tile::TileMatMulF32)
                      (a.data(), b.data(), c32.data(), m, n, k, reps); },
                1) /
        reps);
    t16.push_back(
        time_us(
            [&] { HWY_DYNAMIC_DISPATCH(bench_tile::TileMatMulBf16)
                  (ah.data(), bh.data(), c16.data(), m, n, k, reps); },
            1) /
        reps);
  }
  const double flop = 2.0 * m * n * k;
  std::printf("tile MatMul %ldx%ldx%ld, 1 thread: fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s (%s)\n", static_cast<long>(m),
              static_cast<long>(n), static_cast<long>(k), flop / median(t32) * 1e-3, flop / median(t16) * 1e-3,
              gbx::kapi::cpu_has_avx512_bf16() ? "VDPBF16PS" : "no AVX512_BF16: widened");
  return 0;
}
#endif
