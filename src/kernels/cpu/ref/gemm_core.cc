// The shared GEMM (see gemm_core.h). Layout of the work:
//
//   for each C tile (MC rows x NC cols) of each batch entry   <- OpenMP, dynamic schedule
//     for each K block of KC                                  <- accumulate into C
//       pack B[KC x NC] into NR-wide strips (stays in L2)
//       pack A[MC x KC] into MR-tall strips (one strip stays in L1 while B strips stream)
//       for each MR strip, for each NR strip: micro-kernel MR x NR
//
// The micro-kernel keeps an MR x NR block of C in vector registers. It is written once with
// GCC vector extensions (64-byte vectors) and compiled per ISA by wrapping the tile routine
// in target-attributed functions with `flatten`, so everything below is inlined and
// vectorized for that ISA; MR/NR are chosen per ISA to fit its register file (32 zmm on
// AVX-512, 16 ymm on AVX2, 16 xmm on baseline x86-64). The variant is picked once at run
// time with __builtin_cpu_supports.
#include "kernels/cpu/ref/gemm_core.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/scratch.h"

namespace gearbox::ref {
namespace {

constexpr int64_t kKC = 256;  // K block: an NR-wide B strip of KC rows is 32 KiB
constexpr int64_t kMC = 96;   // rows of C per tile (a multiple of every MR below)
constexpr int64_t kNC = 256;  // cols of C per tile (a multiple of every NR below)

typedef float VF __attribute__((vector_size(64)));
typedef double VD __attribute__((vector_size(64)));
template <typename T>
struct Vec;
template <>
struct Vec<float> {
  using type = VF;
};
template <>
struct Vec<double> {
  using type = VD;
};

template <typename T>
struct TileJob {
  const GemmShape* s;
  T alpha, beta;
  GemmPtrs<T> p;
  int64_t m0, mc, n0, nc;
  T* pack_a;  // >= (kMC rounded up to MR) * kKC
  T* pack_b;  // >= (kNC rounded up to NR) * kKC
};

// Packs rows [m0, m0+mc) x cols [k0, k0+kc) of op(A) into MR-row strips: strip r holds
// kc groups of MR values (row-interleaved), zero-padded past mc.
template <typename T, int MR>
inline void pack_a(const GemmShape& s, const T* a, int64_t m0, int64_t mc, int64_t k0, int64_t kc, T* dst) {
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {
    const int64_t rows = std::min<int64_t>(MR, mc - i0);
    T* d = dst + i0 * kc;
    if (!s.trans_a) {
      for (int64_t r = 0; r < rows; ++r) {
        const T* src = a + (m0 + i0 + r) * s.lda + k0;
        for (int64_t k = 0; k < kc; ++k) d[k * MR + r] = src[k];
      }
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        const T* src = a + (k0 + k) * s.lda + m0 + i0;
        for (int64_t r = 0; r < rows; ++r) d[k * MR + r] = src[r];
      }
    }
    if (rows < MR)
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t r = rows; r < MR; ++r) d[k * MR + r] = T(0);
  }
}

// Packs rows [k0, k0+kc) x cols [n0, n0+nc) of op(B) into NR-col strips, zero-padded.
template <typename T, int NR>
inline void pack_b(const GemmShape& s, const T* b, int64_t k0, int64_t kc, int64_t n0, int64_t nc, T* dst) {
  for (int64_t j0 = 0; j0 < nc; j0 += NR) {
    const int64_t cols = std::min<int64_t>(NR, nc - j0);
    T* d = dst + j0 * kc;
    if (!s.trans_b) {
      for (int64_t k = 0; k < kc; ++k) {
        const T* src = b + (k0 + k) * s.ldb + n0 + j0;
        T* dk = d + k * NR;
        if (cols == NR) {
          std::memcpy(dk, src, sizeof(T) * NR);
        } else {
          for (int64_t c = 0; c < cols; ++c) dk[c] = src[c];
          for (int64_t c = cols; c < NR; ++c) dk[c] = T(0);
        }
      }
    } else {
      for (int64_t c = 0; c < cols; ++c) {
        const T* src = b + (n0 + j0 + c) * s.ldb + k0;
        for (int64_t k = 0; k < kc; ++k) d[k * NR + c] = src[k];
      }
      for (int64_t c = cols; c < NR; ++c)
        for (int64_t k = 0; k < kc; ++k) d[k * NR + c] = T(0);
    }
  }
}

// C[rows x cols] (ldc) = alpha * (packed A strip * packed B strip) + beta * C, where
// beta == 0 means "do not read C". rows <= MR, cols <= NR.
template <typename T, int MR, int NV>
inline void micro_kernel(int64_t kc, const T* __restrict a, const T* __restrict b, T* c, int64_t ldc, int64_t rows,
                         int64_t cols, T alpha, T beta) {
  using V = typename Vec<T>::type;
  constexpr int L = 64 / sizeof(T);
  constexpr int NR = NV * L;
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = V{};
  for (int64_t k = 0; k < kc; ++k) {
    V bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) std::memcpy(&bv[j], b + k * NR + j * L, sizeof(V));
    const T* ak = a + k * MR;
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const T ai = ak[i];
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] += ai * bv[j];
    }
  }
  if (rows == MR && cols == NR) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        T* cp = c + i * ldc + j * L;
        V r = alpha * acc[i][j];
        if (beta != T(0)) {
          V old;
          std::memcpy(&old, cp, sizeof(V));
          r += beta * old;
        }
        std::memcpy(cp, &r, sizeof(V));
      }
    }
    return;
  }
  alignas(64) T tmp[MR][NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) std::memcpy(&tmp[i][j * L], &acc[i][j], sizeof(V));
  for (int64_t i = 0; i < rows; ++i) {
    T* cp = c + i * ldc;
    if (beta != T(0)) {
      for (int64_t j = 0; j < cols; ++j) cp[j] = alpha * tmp[i][j] + beta * cp[j];
    } else {
      for (int64_t j = 0; j < cols; ++j) cp[j] = alpha * tmp[i][j];
    }
  }
}

template <typename T, int MR, int NV>
inline void run_tile(const TileJob<T>& j) {
  constexpr int NR = NV * (64 / sizeof(T));
  const GemmShape& s = *j.s;
  T* c = j.p.c + j.m0 * s.ldc + j.n0;
  for (int64_t k0 = 0; k0 < s.k; k0 += kKC) {
    const int64_t kc = std::min(kKC, s.k - k0);
    pack_b<T, NR>(s, j.p.b, k0, kc, j.n0, j.nc, j.pack_b);
    pack_a<T, MR>(s, j.p.a, j.m0, j.mc, k0, kc, j.pack_a);
    const T beta = k0 == 0 ? j.beta : T(1);
    for (int64_t i0 = 0; i0 < j.mc; i0 += MR) {
      for (int64_t j0 = 0; j0 < j.nc; j0 += NR) {
        micro_kernel<T, MR, NV>(kc, j.pack_a + i0 * kc, j.pack_b + j0 * kc, c + i0 * s.ldc + j0, s.ldc,
                                std::min<int64_t>(MR, j.mc - i0), std::min<int64_t>(NR, j.nc - j0), j.alpha, beta);
      }
    }
  }
}

// One function per (ISA, dtype); `flatten` inlines the whole tile routine so it is compiled
// for that ISA.
#define GBX_AVX512 "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,bmi2"
#define GBX_AVX2 "avx2,fma,bmi2"
__attribute__((target(GBX_AVX512), flatten)) void tile_f32_avx512(const TileJob<float>& j) {
  run_tile<float, 12, 2>(j);
}
__attribute__((target(GBX_AVX512), flatten)) void tile_f64_avx512(const TileJob<double>& j) {
  run_tile<double, 12, 2>(j);
}
__attribute__((target(GBX_AVX2), flatten)) void tile_f32_avx2(const TileJob<float>& j) { run_tile<float, 6, 1>(j); }
__attribute__((target(GBX_AVX2), flatten)) void tile_f64_avx2(const TileJob<double>& j) { run_tile<double, 6, 1>(j); }
__attribute__((flatten)) void tile_f32_generic(const TileJob<float>& j) { run_tile<float, 2, 1>(j); }
__attribute__((flatten)) void tile_f64_generic(const TileJob<double>& j) { run_tile<double, 2, 1>(j); }

struct Variant {
  const char* name;
  int mr;
  int nr_f32, nr_f64;
  void (*f32)(const TileJob<float>&);
  void (*f64)(const TileJob<double>&);
};

const Variant& variant() {
  static const Variant v = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma"))
      return Variant{"avx512", 12, 32, 16, tile_f32_avx512, tile_f64_avx512};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      return Variant{"avx2", 6, 16, 8, tile_f32_avx2, tile_f64_avx2};
    return Variant{"generic", 2, 16, 8, tile_f32_generic, tile_f64_generic};
  }();
  return v;
}

template <typename T>
void scale_c(const GemmShape& s, const GemmPtrs<T>* batch, int64_t count, T beta) {
  for (int64_t b = 0; b < count; ++b)
    for (int64_t i = 0; i < s.m; ++i) {
      T* row = batch[b].c + i * s.ldc;
      for (int64_t j = 0; j < s.n; ++j) row[j] = beta == T(0) ? T(0) : beta * row[j];
    }
}

template <typename T>
void gemm_batched_impl(const GemmShape& s, T alpha, const GemmPtrs<T>* batch, int64_t count, T beta) {
  if (count <= 0 || s.m <= 0 || s.n <= 0) return;
  if (s.k <= 0) {
    scale_c(s, batch, count, beta);
    return;
  }
  const Variant& v = variant();
  void (*tile_fn)(const TileJob<T>&);
  if constexpr (std::is_same_v<T, float>)
    tile_fn = v.f32;
  else
    tile_fn = v.f64;

  const int threads = omp_get_max_threads();
  // Smaller M tiles when there are too few tiles to keep every thread busy.
  int64_t mc = kMC;
  const int64_t tiles_n = (s.n + kNC - 1) / kNC;
  while (mc > v.mr && count * tiles_n * ((s.m + mc - 1) / mc) < 2 * threads)
    mc = std::max<int64_t>(v.mr, mc / 2 / v.mr * v.mr);
  const int64_t tiles_m = (s.m + mc - 1) / mc;
  const int64_t per_entry = tiles_m * tiles_n;
  const int64_t total = count * per_entry;
  const double flops =
      2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) * static_cast<double>(count);
  const bool parallel = threads > 1 && total > 1 && flops > 2e5;
  const size_t pack_a_size = static_cast<size_t>(kMC + 16) * kKC;
  const size_t pack_b_size = static_cast<size_t>(kNC + 64) * kKC;

#pragma omp parallel if (parallel)
  {
    // Per-thread packing buffers, reused across calls (OpenMP threads persist), 64-byte
    // aligned and counted in the pool statistics (base/scratch.h).
    static thread_local ThreadScratch<T> buf_a, buf_b;
    T* pa = buf_a.get(pack_a_size + 16, /*zero_on_growth=*/true);
    T* pb = buf_b.get(pack_b_size + 16, /*zero_on_growth=*/true);
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < total; ++t) {
      const int64_t e = t / per_entry;
      const int64_t r = t % per_entry;
      const int64_t tn = r % tiles_n, tm = r / tiles_n;
      TileJob<T> job{
          &s, alpha, beta, batch[e], tm * mc, std::min(mc, s.m - tm * mc), tn * kNC, std::min(kNC, s.n - tn * kNC),
          pa, pb};
      tile_fn(job);
    }
  }
}

}  // namespace

void gemm_batched(const GemmShape& s, float alpha, const GemmPtrs<float>* batch, int64_t count, float beta) {
  gemm_batched_impl<float>(s, alpha, batch, count, beta);
}
void gemm_batched(const GemmShape& s, double alpha, const GemmPtrs<double>* batch, int64_t count, double beta) {
  gemm_batched_impl<double>(s, alpha, batch, count, beta);
}

const char* gemm_isa_name() { return variant().name; }

}  // namespace gearbox::ref
