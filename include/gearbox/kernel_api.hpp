// gearbox kernel API: a small, header-only layer over Highway (Debian's libhwy-dev) for writing
// CPU kernels -- inside gearbox (src/kernels/cpu/simd/tile_*.cc) or in a plugin
// (include/gearbox/plugin.h) -- that run on the best instruction set of the machine they run on.
// docs/custom_ops.md has a worked example.
//
// Two parts:
//  * generic (namespace gbx::kapi, compiled once): strided 2-D views of tensors, parallel_for
//    over tiles, bf16 scalar conversion, the CPU's AVX512_BF16 check;
//  * per instruction set (namespace gbx::kapi::HWY_NAMESPACE, compiled once per Highway target
//    when the including file uses hwy/foreach_target.h): Tile (a typed local buffer with strided
//    loads and stores), vector math (Exp, Log, Sigmoid, Tanh, Silu, Softplus, Sin, Cos, Rsqrt), span
//    helpers with tails (Map, Map2, LoadN, StoreN), reductions (Sum, Max, SumSquares, Dot) and a
//    register-blocked tile matmul (fp32; bf16 inputs with fp32 accumulation, on VDPBF16PS where
//    the CPU has AVX512_BF16).
//
// Run-time dispatch is Highway's: the kernel file defines HWY_TARGET_INCLUDE as its own path,
// includes <hwy/foreach_target.h> then this header, writes its per-target functions between
// GBX_KAPI_BEGIN and GBX_KAPI_END, and under `#if HWY_ONCE` exports them (HWY_EXPORT) and calls
// them with HWY_DYNAMIC_DISPATCH. parallel_for belongs to that dispatching (generic) code: an
// OpenMP region outlined from a per-target function would lose the target's instruction set.
//
// Threads: gearbox's kernels thread with OpenMP (libgomp), and a session's thread count is the
// OpenMP one (omp_set_num_threads around each run). parallel_for uses the same runtime when the
// including file is compiled with OpenMP (-fopenmp; CMake: OpenMP::OpenMP_CXX), so a plugin's
// kernel shares gearbox's worker threads and honours the session's thread count; without
// OpenMP it runs the tiles on the calling thread. (The plugin ABI passes no thread pool: a
// callback would change GBX_PLUGIN_ABI_VERSION, and OpenMP's pool is already the shared one.)

// ---- generic part (once per translation unit) -------------------------------------------
#ifndef GEARBOX_KERNEL_API_HPP_GENERIC
#define GEARBOX_KERNEL_API_HPP_GENERIC

#include <hwy/base.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace gbx::kapi {

using bf16 = hwy::bfloat16_t;

// A strided 2-D region of a tensor: `rows` rows of `cols` elements, row r at data + r * stride
// (elements). A contiguous row-major tensor [.., R, C] is view(data, numel / C, C).
template <class T>
struct View {
  T* data = nullptr;
  int64_t rows = 0, cols = 0, stride = 0;
  T* row(int64_t r) const { return data + r * stride; }
  View<const T> as_const() const { return {data, rows, cols, stride}; }
};
template <class T>
View<T> view(T* data, int64_t rows, int64_t cols, int64_t stride = -1) {
  return {data, rows, cols, stride < 0 ? cols : stride};
}

// Number of tiles of `tile` items that cover `n` (the last may be partial).
inline int64_t num_tiles(int64_t n, int64_t tile) { return n <= 0 ? 0 : (n + tile - 1) / tile; }

// Runs f(begin, end) over [0, count) in chunks of `grain` items (the last may be shorter), on
// OpenMP's worker team when compiled with OpenMP, there is more than one chunk and no team is
// running yet; otherwise on the calling thread. Chunks are distributed statically (equal work
// per item is the common case for tiles); pick `grain` so a chunk is at least ~10 us of work.
template <class F>
void parallel_for(int64_t count, int64_t grain, F&& f) {
  if (count <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = num_tiles(count, grain);
#ifdef _OPENMP
  if (chunks > 1 && !omp_in_parallel() && omp_get_max_threads() > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) f(c * grain, std::min(count, (c + 1) * grain));
    return;
  }
#endif
  for (int64_t c = 0; c < chunks; ++c) f(c * grain, std::min(count, (c + 1) * grain));
}

// bf16 <-> float32 (round to nearest even; NaN stays NaN).
inline float to_f32(bf16 v) {
  uint16_t bits;
  std::memcpy(&bits, &v, 2);
  const uint32_t w = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}
inline bf16 to_bf16(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  uint16_t bits = (w & 0x7fffffffu) > 0x7f800000u ? static_cast<uint16_t>((w >> 16) | 0x40u)
                                                  : static_cast<uint16_t>((w + 0x7fffu + ((w >> 16) & 1u)) >> 16);
  bf16 v;
  std::memcpy(&v, &bits, 2);
  return v;
}

// True when the CPU executes AVX512_BF16 (VDPBF16PS); Highway 1.0 has no target for it.
inline bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

namespace detail {
#if defined(__x86_64__) && defined(__GNUC__)
#define GBX_KAPI_HAVE_DPBF16 1
#define GBX_KAPI_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma")))
// One pair of k (kk, kk + 1; with kPair false, kk alone): the rows' 2 accumulators each.
template <int kRows, bool kPair>
GBX_KAPI_BF16_TARGET __attribute__((always_inline)) inline void bf16_pair_step(__m512 (&acc)[kRows][2], const bf16* a,
                                                                               int64_t lda, __m512i r0, __m512i r1,
                                                                               __m512i lo, __m512i hi) {
  const __m512bh b0 = (__m512bh)_mm512_permutex2var_epi16(r0, lo, r1);
  const __m512bh b1 = (__m512bh)_mm512_permutex2var_epi16(r0, hi, r1);
  for (int m = 0; m < kRows; ++m) {
    uint32_t ap = 0;
    std::memcpy(&ap, a + m * lda, kPair ? 4 : 2);  // a constant size: one load
    const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap));
    acc[m][0] = _mm512_dpbf16_ps(acc[m][0], av, b0);
    acc[m][1] = _mm512_dpbf16_ps(acc[m][1], av, b1);
  }
}
// C[m, 0..32) (+)= sum_k A[m, k] B[k, 0..32) for m < kRows, bf16 inputs, fp32 sums, with
// VDPBF16PS on pairs of k: B's rows k and k+1 are interleaved in registers (one permute per
// pair, shared by the rows), A's pair is one broadcast 32-bit value. Odd K: the last k pairs
// with a zero. kRows is a template argument so the 2 kRows accumulators stay in registers.
template <int kRows>
GBX_KAPI_BF16_TARGET inline void matmul_bf16_32_rows(const bf16* a, int64_t lda, const bf16* b, int64_t ldb, float* c,
                                                     int64_t ldc, int64_t k, bool accumulate) {
  __m512 acc[kRows][2];
  for (int m = 0; m < kRows; ++m) acc[m][0] = acc[m][1] = _mm512_setzero_ps();
  // idx[2j] = j (row k, lane j), idx[2j + 1] = 32 + j (row k + 1, lane j).
  alignas(64) static const uint16_t kLo[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                               8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  alignas(64) static const uint16_t kHi[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                               24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
  const __m512i lo = _mm512_load_si512(kLo), hi = _mm512_load_si512(kHi);
  int64_t kk = 0;
  for (; kk + 1 < k; kk += 2)
    bf16_pair_step<kRows, true>(acc, a + kk, lda, _mm512_loadu_si512(b + kk * ldb),
                                _mm512_loadu_si512(b + (kk + 1) * ldb), lo, hi);
  if (kk < k)
    bf16_pair_step<kRows, false>(acc, a + kk, lda, _mm512_loadu_si512(b + kk * ldb), _mm512_setzero_si512(), lo, hi);
  for (int m = 0; m < kRows; ++m) {
    float* cm = c + m * ldc;
    if (accumulate) {
      acc[m][0] = _mm512_add_ps(acc[m][0], _mm512_loadu_ps(cm));
      acc[m][1] = _mm512_add_ps(acc[m][1], _mm512_loadu_ps(cm + 16));
    }
    _mm512_storeu_ps(cm, acc[m][0]);
    _mm512_storeu_ps(cm + 16, acc[m][1]);
  }
}
#undef GBX_KAPI_BF16_TARGET
// The same for mr = 1..6 rows.
inline void matmul_bf16_32(const bf16* a, int64_t lda, const bf16* b, int64_t ldb, float* c, int64_t ldc, int64_t mr,
                           int64_t k, bool accumulate) {
  switch (mr) {
    case 1:
      return matmul_bf16_32_rows<1>(a, lda, b, ldb, c, ldc, k, accumulate);
    case 2:
      return matmul_bf16_32_rows<2>(a, lda, b, ldb, c, ldc, k, accumulate);
    case 3:
      return matmul_bf16_32_rows<3>(a, lda, b, ldb, c, ldc, k, accumulate);
    case 4:
      return matmul_bf16_32_rows<4>(a, lda, b, ldb, c, ldc, k, accumulate);
    case 5:
      return matmul_bf16_32_rows<5>(a, lda, b, ldb, c, ldc, k, accumulate);
    default:
      return matmul_bf16_32_rows<6>(a, lda, b, ldb, c, ldc, k, accumulate);
  }
}
#endif
}  // namespace detail
}  // namespace gbx::kapi

#endif  // GEARBOX_KERNEL_API_HPP_GENERIC

// ---- per instruction set (re-included by hwy/foreach_target.h: toggling guard) ------------
#if defined(GEARBOX_KERNEL_API_HPP_TARGET) == defined(HWY_TARGET_TOGGLE)
#ifdef GEARBOX_KERNEL_API_HPP_TARGET
#undef GEARBOX_KERNEL_API_HPP_TARGET
#else
#define GEARBOX_KERNEL_API_HPP_TARGET
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

// Open and close the per-target namespace of a kernel file (gbx::kapi's own helpers are visible
// unqualified inside, Highway's ops as hn::).
#define GBX_KAPI_BEGIN(NS)           \
  HWY_BEFORE_NAMESPACE();            \
  namespace NS {                     \
  namespace HWY_NAMESPACE {          \
  namespace hn = hwy::HWY_NAMESPACE; \
  using namespace ::gbx::kapi::HWY_NAMESPACE;
#define GBX_KAPI_END(NS) \
  }                      \
  }                      \
  HWY_AFTER_NAMESPACE();

HWY_BEFORE_NAMESPACE();
namespace gbx::kapi {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The float32 vector type of this target and its lane count.
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
HWY_INLINE int64_t Lanes() { return static_cast<int64_t>(hn::Lanes(DF())); }

// ---- loads and stores with tails ----------------------------------------------------------

// The first `count` floats at p, the other lanes zero (a copy through the stack: a masked load
// is not fault-free on every target).
HWY_INLINE VF LoadN(const float* p, int64_t count) {
  const DF d;
  if (count >= Lanes()) return hn::LoadU(d, p);
  alignas(64) float buf[HWY_MAX_BYTES / sizeof(float)] = {};
  std::memcpy(buf, p, static_cast<size_t>(std::max<int64_t>(count, 0)) * sizeof(float));
  return hn::Load(d, buf);
}
// Stores the first `count` lanes of v at p.
HWY_INLINE void StoreN(VF v, float* p, int64_t count) {
  const DF d;
  if (count >= Lanes()) return hn::StoreU(v, d, p);
  alignas(64) float buf[HWY_MAX_BYTES / sizeof(float)];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, static_cast<size_t>(std::max<int64_t>(count, 0)) * sizeof(float));
}
// bf16 loads widen to float32 (a vector of Lanes() values).
HWY_INLINE VF LoadN(const bf16* p, int64_t count) {
  const DF d;
  const hn::Rebind<bf16, DF> db;
  if (count >= Lanes()) return hn::PromoteTo(d, hn::LoadU(db, p));
  alignas(64) bf16 buf[HWY_MAX_BYTES / sizeof(float)] = {};
  std::memcpy(buf, p, static_cast<size_t>(std::max<int64_t>(count, 0)) * sizeof(bf16));
  return hn::PromoteTo(d, hn::Load(db, buf));
}

// ---- math (float32 lanes) -----------------------------------------------------------------
// Within a few ulp of libm over the finite range (Highway's contrib math); NaN in, NaN out.

// e^x; +inf above log(FLT_MAX), 0 below -104. Its guards cost ~4 vector ops: a hot loop whose
// argument is already clamped to [-104, 88] may call Highway's hn::Exp(DF(), x) directly.
HWY_INLINE VF Exp(VF x) {
  const DF d;
  const VF r = hn::Exp(d, hn::Max(x, hn::Set(d, -104.0f)));
  const VF big = hn::IfThenElse(hn::Gt(x, hn::Set(d, 88.72283935546875f)), hn::Set(d, HUGE_VALF), r);
  return hn::IfThenElse(hn::IsNaN(x), x, big);
}
// Natural log (x > 0; 0 gives -inf, negative NaN).
HWY_INLINE VF Log(VF x) {
  const DF d;
  VF r = hn::Log(d, x);
  r = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), hn::Set(d, -HUGE_VALF), r);
  r = hn::IfThenElse(hn::Eq(x, hn::Set(d, HUGE_VALF)), x, r);
  r = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Set(d, NAN), r);
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}
// 1 / (1 + e^-x), without overflow or cancellation for large |x|.
HWY_INLINE VF Sigmoid(VF x) {
  const DF d;
  // NaN lanes go into Exp as 0: Highway's emulated targets convert Exp's argument to int, and
  // NaN to int is undefined (UBSan); the result is replaced by NaN below anyway.
  const VF e = hn::Exp(d, hn::Neg(hn::Abs(hn::IfThenZeroElse(hn::IsNaN(x), x))));
  const VF inv = hn::Div(hn::Set(d, 1.f), hn::Add(hn::Set(d, 1.f), e));
  return hn::IfThenElse(hn::IsNaN(x), x, hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Mul(e, inv), inv));
}
HWY_INLINE VF Tanh(VF x) { return hn::IfThenElse(hn::IsNaN(x), x, hn::Tanh(DF(), x)); }
// x * sigmoid(x) (SiLU, Swish-1).
HWY_INLINE VF Silu(VF x) { return hn::Mul(x, Sigmoid(x)); }
// log(1 + e^x) = max(x, 0) + log1p(e^-|x|).
HWY_INLINE VF Softplus(VF x) {
  const DF d;
  const VF r = hn::Add(hn::Max(x, hn::Zero(d)), hn::Log1p(d, hn::Exp(d, hn::Neg(hn::Abs(x)))));
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}
// sin x and cos x (Highway's: a few ulp for |x| up to ~1e5 radians; rotary angles are far below).
HWY_INLINE VF Sin(VF x) { return hn::Sin(DF(), x); }
HWY_INLINE VF Cos(VF x) { return hn::Cos(DF(), x); }
// 1 / sqrt(x) to ~1 ulp. On AVX-512 the 14-bit hardware estimate refined by one Newton step;
// elsewhere the estimate is too coarse for one step (AVX2's 12 bits are borderline, the scalar
// target's far less), so 1 / sqrt(x).
HWY_INLINE VF Rsqrt(VF x) {
  const DF d;
#if HWY_TARGET != HWY_AVX3 && HWY_TARGET != HWY_AVX3_DL
  return hn::Div(hn::Set(d, 1.f), hn::Sqrt(x));
#endif
  const VF y = hn::ApproximateReciprocalSqrt(x);
  const VF half_x = hn::Mul(hn::Set(d, 0.5f), x);
  const VF r = hn::Mul(y, hn::NegMulAdd(half_x, hn::Mul(y, y), hn::Set(d, 1.5f)));
  // The estimate of 0 is inf and of inf is 0; Newton would make both NaN.
  return hn::IfThenElse(hn::Or(hn::Eq(x, hn::Zero(d)), hn::IsInf(x)), y, r);
}

// ---- spans with tails ---------------------------------------------------------------------

// out[i] = f(in[i]) for i < n, f a vector function VF(VF); any n (the tail is one partial
// vector). `out` may equal `in`.
template <class F>
HWY_INLINE void Map(const float* in, float* out, int64_t n, F&& f) {
  const int64_t l = Lanes();
  int64_t i = 0;
  for (; i + l <= n; i += l) hn::StoreU(f(hn::LoadU(DF(), in + i)), DF(), out + i);
  if (i < n) StoreN(f(LoadN(in + i, n - i)), out + i, n - i);
}
// out[i] = f(a[i], b[i]).
template <class F>
HWY_INLINE void Map2(const float* a, const float* b, float* out, int64_t n, F&& f) {
  const int64_t l = Lanes();
  int64_t i = 0;
  for (; i + l <= n; i += l) hn::StoreU(f(hn::LoadU(DF(), a + i), hn::LoadU(DF(), b + i)), DF(), out + i);
  if (i < n) StoreN(f(LoadN(a + i, n - i), LoadN(b + i, n - i)), out + i, n - i);
}

// ---- reductions (two accumulators: the adds of consecutive vectors do not wait on each other)

// sum (x[i] - center): with center near the values (e.g. x[0]), a mean of data with a large
// common offset keeps its float32 precision (center + Sum(x, n, center) / n).
HWY_INLINE float Sum(const float* x, int64_t n, float center = 0.f) {
  const DF d;
  const int64_t l = Lanes();
  const VF c = hn::Set(d, center);
  VF s0 = hn::Zero(d), s1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * l <= n; i += 2 * l) {
    s0 = hn::Add(s0, hn::Sub(hn::LoadU(d, x + i), c));
    s1 = hn::Add(s1, hn::Sub(hn::LoadU(d, x + i + l), c));
  }
  for (; i < n; i += l)
    s0 = hn::Add(s0, hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(n - i)), hn::Sub(LoadN(x + i, n - i), c)));
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
}
// Max of x[0..n); -inf for n = 0.
HWY_INLINE float Max(const float* x, int64_t n) {
  const DF d;
  const int64_t l = Lanes();
  const VF ninf = hn::Set(d, -HUGE_VALF);
  VF m0 = ninf, m1 = ninf;
  int64_t i = 0;
  for (; i + 2 * l <= n; i += 2 * l) {
    m0 = hn::Max(m0, hn::LoadU(d, x + i));
    m1 = hn::Max(m1, hn::LoadU(d, x + i + l));
  }
  for (; i < n; i += l)
    m0 = hn::Max(m0, hn::IfThenElse(hn::FirstN(d, static_cast<size_t>(n - i)), LoadN(x + i, n - i), ninf));
  // The lanes by hand, not hn::MaxOfLanes: Highway's emulated targets start that reduction from
  // the lowest finite float, so all -inf lanes (an empty x) gave -FLT_MAX there.
  alignas(64) float lanes[HWY_MAX_BYTES / sizeof(float)];
  hn::Store(hn::Max(m0, m1), d, lanes);
  float m = -HUGE_VALF;
  for (int64_t j = 0; j < l; ++j) m = std::max(m, lanes[j]);
  return m;
}
// sum (x[i] - center)^2: a variance without the cancellation of E[x^2] - mean^2.
HWY_INLINE float SumSquares(const float* x, int64_t n, float center = 0.f) {
  const DF d;
  const int64_t l = Lanes();
  const VF c = hn::Set(d, center);
  VF s0 = hn::Zero(d), s1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * l <= n; i += 2 * l) {
    const VF a = hn::Sub(hn::LoadU(d, x + i), c), b = hn::Sub(hn::LoadU(d, x + i + l), c);
    s0 = hn::MulAdd(a, a, s0);
    s1 = hn::MulAdd(b, b, s1);
  }
  for (; i < n; i += l) {
    const VF a = hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(n - i)), hn::Sub(LoadN(x + i, n - i), c));
    s0 = hn::MulAdd(a, a, s0);
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
}
// sum x[i] * y[i].
HWY_INLINE float Dot(const float* x, const float* y, int64_t n) {
  const DF d;
  const int64_t l = Lanes();
  VF s0 = hn::Zero(d), s1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * l <= n; i += 2 * l) {
    s0 = hn::MulAdd(hn::LoadU(d, x + i), hn::LoadU(d, y + i), s0);
    s1 = hn::MulAdd(hn::LoadU(d, x + i + l), hn::LoadU(d, y + i + l), s1);
  }
  for (; i < n; i += l) s0 = hn::MulAdd(LoadN(x + i, n - i), LoadN(y + i, n - i), s0);
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
}

// ---- tiles --------------------------------------------------------------------------------

// A kRows x kCols tile of T in a local (stack) buffer, rows padded to 64 bytes so each row
// starts aligned and vector loops over a row need no tail inside the buffer. load() copies the
// region at (r0, c0) of a view (fewer rows/cols at the view's edge: the rest is zero), store()
// writes back only what was loaded. Keep kRows * kCols * sizeof(T) within a core's L1/L2 (e.g.
// 8 x 1024 floats = 32 KiB).
template <class T, int64_t kRows, int64_t kCols>
struct Tile {
  static constexpr int64_t kStride =
      (kCols * static_cast<int64_t>(sizeof(T)) + 63) / 64 * 64 / static_cast<int64_t>(sizeof(T));
  alignas(64) T buf[kRows * kStride];
  int64_t rows = 0, cols = 0;

  T* row(int64_t r) { return buf + r * kStride; }
  const T* row(int64_t r) const { return buf + r * kStride; }
  View<T> view() { return {buf, rows, cols, kStride}; }

  void load(View<const T> src, int64_t r0, int64_t c0) {
    rows = std::clamp<int64_t>(src.rows - r0, 0, kRows);
    cols = std::clamp<int64_t>(src.cols - c0, 0, kCols);
    for (int64_t r = 0; r < kRows; ++r) {
      T* dst = row(r);
      const int64_t n = r < rows ? cols : 0;
      if (n > 0) std::memcpy(dst, src.row(r0 + r) + c0, static_cast<size_t>(n) * sizeof(T));
      std::memset(static_cast<void*>(dst + n), 0, static_cast<size_t>(kStride - n) * sizeof(T));
    }
  }
  void load(View<T> src, int64_t r0, int64_t c0) { load(src.as_const(), r0, c0); }
  void store(View<T> dst, int64_t r0, int64_t c0) const {
    for (int64_t r = 0; r < rows; ++r) std::memcpy(dst.row(r0 + r) + c0, row(r), static_cast<size_t>(cols) * sizeof(T));
  }
  void fill(T v) { std::fill(buf, buf + kRows * kStride, v); }
};

// ---- tile matmul ---------------------------------------------------------------------------

// The register block of the fp32 micro-kernel: kMR rows of C by kNV vectors (kNV * Lanes()
// columns), kMR * kNV accumulators + kNV B vectors + 1 broadcast in registers.
inline constexpr int64_t kMR = 6;
inline constexpr int64_t kNV = 2;

namespace detail {
// C[0..mr, 0..kNV * Lanes()) (+)= A[0..mr, 0..k) B[0..k, 0..kNV * Lanes()); mr <= kMR.
template <int64_t kRowsHere>
HWY_INLINE void MicroF32(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t k,
                         bool accumulate) {
  const DF d;
  const int64_t l = Lanes();
  VF acc[kRowsHere][kNV];
  for (int64_t m = 0; m < kRowsHere; ++m)
    for (int64_t v = 0; v < kNV; ++v) acc[m][v] = hn::Zero(d);
  for (int64_t kk = 0; kk < k; ++kk) {
    VF bv[kNV];
    for (int64_t v = 0; v < kNV; ++v) bv[v] = hn::LoadU(d, b + kk * ldb + v * l);
    for (int64_t m = 0; m < kRowsHere; ++m) {
      const VF av = hn::Set(d, a[m * lda + kk]);
      for (int64_t v = 0; v < kNV; ++v) acc[m][v] = hn::MulAdd(av, bv[v], acc[m][v]);
    }
  }
  for (int64_t m = 0; m < kRowsHere; ++m)
    for (int64_t v = 0; v < kNV; ++v) {
      float* p = c + m * ldc + v * l;
      hn::StoreU(accumulate ? hn::Add(acc[m][v], hn::LoadU(d, p)) : acc[m][v], d, p);
    }
}
template <class F>
HWY_INLINE void ByRows(int64_t mr, F&& f) {
  switch (mr) {
    case 1:
      return f(std::integral_constant<int64_t, 1>());
    case 2:
      return f(std::integral_constant<int64_t, 2>());
    case 3:
      return f(std::integral_constant<int64_t, 3>());
    case 4:
      return f(std::integral_constant<int64_t, 4>());
    case 5:
      return f(std::integral_constant<int64_t, 5>());
    default:
      return f(std::integral_constant<int64_t, 6>());
  }
}
// K = 0: C = 0 (or C unchanged when accumulating). Handled before the blocked loops, which
// would offset B's pointer, null for an empty B, and that is undefined.
inline bool EmptyProduct(int64_t k, View<float> c, bool accumulate) {
  if (k != 0) return false;
  if (!accumulate)
    for (int64_t m = 0; m < c.rows; ++m) std::fill(c.row(m), c.row(m) + c.cols, 0.f);
  return true;
}
}  // namespace detail

// C = A B (or C += A B when `accumulate`): A is M x K, B is K x N, C is M x N, all strided
// views of float32. Blocks of kMR x (kNV * Lanes()) run the register-blocked micro-kernel; the
// columns past the last full block go through a zero-padded local tile. Meant for tiles (K and N
// up to a few hundred: B's block stays in L1/L2); split larger products into tiles with
// parallel_for over blocks of C's rows or columns.
inline void MatMul(View<const float> a, View<const float> b, View<float> c, bool accumulate = false) {
  const int64_t m_total = c.rows, n_total = c.cols, k = a.cols;
  if (detail::EmptyProduct(k, c, accumulate)) return;
  const int64_t nb = kNV * Lanes();
  int64_t n0 = 0;
  for (; n0 + nb <= n_total; n0 += nb)
    for (int64_t m0 = 0; m0 < m_total; m0 += kMR)
      detail::ByRows(std::min(kMR, m_total - m0), [&](auto rows) {
        detail::MicroF32<decltype(rows)::value>(a.row(m0), a.stride, b.data + n0, b.stride, c.row(m0) + n0, c.stride, k,
                                                accumulate);
      });
  if (n0 == n_total) return;
  // The column edge: B's last columns zero-padded to a full block, C's through a local block.
  const int64_t rest = n_total - n0;
  constexpr int64_t kMaxBlock = kNV * HWY_MAX_BYTES / sizeof(float);
  alignas(64) float bpad[64 * kMaxBlock];
  alignas(64) float cpad[kMR * kMaxBlock];
  for (int64_t k0 = 0; k0 < k || k0 == 0; k0 += 64) {
    const int64_t kc = std::min<int64_t>(64, k - k0);
    for (int64_t kk = 0; kk < kc; ++kk) {
      std::memcpy(bpad + kk * nb, b.row(k0 + kk) + n0, static_cast<size_t>(rest) * sizeof(float));
      std::memset(bpad + kk * nb + rest, 0, static_cast<size_t>(nb - rest) * sizeof(float));
    }
    for (int64_t m0 = 0; m0 < m_total; m0 += kMR) {
      const int64_t mr = std::min(kMR, m_total - m0);
      const bool acc_here = accumulate || k0 > 0;
      for (int64_t m = 0; m < mr; ++m) {
        if (acc_here) std::memcpy(cpad + m * nb, c.row(m0 + m) + n0, static_cast<size_t>(rest) * sizeof(float));
      }
      detail::ByRows(mr, [&](auto rows) {
        detail::MicroF32<decltype(rows)::value>(a.row(m0) + k0, a.stride, bpad, nb, cpad, nb, kc, acc_here);
      });
      for (int64_t m = 0; m < mr; ++m)
        std::memcpy(c.row(m0 + m) + n0, cpad + m * nb, static_cast<size_t>(rest) * sizeof(float));
    }
    if (k == 0) break;
  }
}

// C (+)= A B with A and B in bf16 and C in float32 (fp32 accumulation). On a CPU with
// AVX512_BF16 under the AVX-512 target, full 32-column blocks use VDPBF16PS (2 products per
// lane per instruction); elsewhere, and for the column edge, the bf16 values are widened to
// float32 and go through the fp32 path (exact: a bf16 is a float32 with a shorter mantissa, so
// both paths compute the same products; sums may differ in rounding order only).
inline void MatMulBF16(View<const bf16> a, View<const bf16> b, View<float> c, bool accumulate = false) {
  const int64_t m_total = c.rows, n_total = c.cols, k = a.cols;
  if (detail::EmptyProduct(k, c, accumulate)) return;
  int64_t n0 = 0;
#if defined(GBX_KAPI_HAVE_DPBF16) && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
  if (cpu_has_avx512_bf16()) {
    for (; n0 + 32 <= n_total; n0 += 32)
      for (int64_t m0 = 0; m0 < m_total; m0 += kMR)
        ::gbx::kapi::detail::matmul_bf16_32(a.row(m0), a.stride, b.data + n0, b.stride, c.row(m0) + n0, c.stride,
                                            std::min(kMR, m_total - m0), k, accumulate);
  }
#endif
  if (n0 == n_total) return;
  // The other columns: widened to float32 in blocks of 64 (K) x 256 (N) through per-thread
  // buffers, then the fp32 path.
  constexpr int64_t kKC = 64, kNC = 256;
  for (int64_t c0 = n0; c0 < n_total; c0 += kNC) {
    const int64_t nc = std::min(kNC, n_total - c0);
    static thread_local float bw[kKC * kNC];
    static thread_local float aw[kMR * kKC];
    for (int64_t k0 = 0; k0 < k || k0 == 0; k0 += kKC) {
      const int64_t kc = std::min(kKC, k - k0);
      for (int64_t kk = 0; kk < kc; ++kk)
        for (int64_t j = 0; j < nc; ++j) bw[kk * nc + j] = to_f32(b.row(k0 + kk)[c0 + j]);
      for (int64_t m0 = 0; m0 < m_total; m0 += kMR) {
        const int64_t mr = std::min(kMR, m_total - m0);
        for (int64_t m = 0; m < mr; ++m)
          for (int64_t kk = 0; kk < kc; ++kk) aw[m * kKC + kk] = to_f32(a.row(m0 + m)[k0 + kk]);
        MatMul(View<const float>{aw, mr, kc, kKC}, View<const float>{bw, kc, nc, nc},
               View<float>{c.row(m0) + c0, mr, nc, c.stride}, accumulate || k0 > 0);
      }
      if (k == 0) break;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace gbx::kapi
HWY_AFTER_NAMESPACE();

#endif  // GEARBOX_KERNEL_API_HPP_TARGET
