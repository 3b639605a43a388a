// The vector code of the cpu.simd GEMM (gemm.h): B panel packing, the register-blocked
// micro-kernel and the per-tile epilogue, compiled per instruction set by Highway's
// foreach_target and picked at run time.
//
// Micro-kernel: MR rows x NR = 3 vectors of columns; per k step it loads 3 vectors of the
// packed B panel, broadcasts MR packed A values and issues 3 MR FMAs into 3 MR accumulators
// that stay in registers for the whole K block (AVX-512: 8 x 48, 24 accumulators of 32
// registers; AVX2: 4 x 24, 12 of 16). Three vectors wide rather than two keeps the loads
// per FMA low ((3 + MR) / 3 MR) with a short MR, which suits BERT's 128-row products.
// Rows past the block's end use a kernel instantiated for fewer rows; columns past N run
// through a zero-padded NR-wide tile buffer.

// Only the targets worth dispatching to on x86-64: AVX-512, AVX2 and the baseline.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/gemm_core.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/simd/gemm.h"
#include "kernels/cpu/simd/simd_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace gearbox::simd::gemm {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using gearbox::simd::HWY_NAMESPACE::ErfRational;
using gearbox::simd::HWY_NAMESPACE::LoadN;
using gearbox::simd::HWY_NAMESPACE::StoreN;
using gearbox::simd::HWY_NAMESPACE::TanhRational;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;
constexpr int64_t kL = static_cast<int64_t>(hn::MaxLanes(D()));
constexpr int64_t kNV = 3;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int64_t kMR = 8;  // 32 vector registers
#else
constexpr int64_t kMR = 4;  // 16 vector registers
#endif
constexpr int64_t kNR = kNV * kL;
constexpr int64_t kLineFloats = 16;  // a 64-byte cache line

Blocking GetBlocking() { return Blocking{kMR, kNR}; }
int64_t APackFloats() { return a_block_floats(kMcRows, kKcMax); }

void PackB(const float* b, int64_t rs, int64_t cs, int64_t rows, int64_t n, int64_t nr, int64_t panel_stride,
           float* out) {
  if (cs == 1) {
    // Row-major B: each source row is read once, contiguously, and dealt out to the panels
    // (reading panel by panel would stride through a page per row).
    for (int64_t kk = 0; kk < rows; ++kk) {
      const float* src = b + kk * rs;
      for (int64_t j0 = 0; j0 < n; j0 += nr) {
        const int64_t cols = std::min(nr, n - j0);
        float* o = out + (j0 / nr) * panel_stride + kk * nr;
        std::memcpy(o, src + j0, static_cast<size_t>(cols) * sizeof(float));
        for (int64_t j = cols; j < nr; ++j) o[j] = 0.f;
      }
    }
    return;
  }
  // Transposed B (column j contiguous along k): read down each column.
  for (int64_t j0 = 0; j0 < n; j0 += nr) {
    const int64_t cols = std::min(nr, n - j0);
    float* o = out + (j0 / nr) * panel_stride;
    for (int64_t j = 0; j < nr; ++j) {
      if (j >= cols) {
        for (int64_t kk = 0; kk < rows; ++kk) o[kk * nr + j] = 0.f;
        continue;
      }
      const float* src = b + (j0 + j) * cs;
      for (int64_t kk = 0; kk < rows; ++kk) o[kk * nr + j] = src[kk * rs];
    }
  }
}

// acc += A rows x B panel columns over kc steps; then C rows (+)= acc. R rows, NV vectors
// of the NR-wide panel (fewer than kNV for a ragged last panel). A(r, kk) is
// ap[r * lda + kk] when kDirect (a row-major A block: R row streams, each value broadcast
// straight from memory) or else ap[kk * kMR + r] (a packed panel); bp: kc x kNR, aligned.
// pf: cache lines to prefetch into L2 meanwhile, one per k step while kk < pf_lines (the
// next B panel, see ComputeBlock), or null.
template <int R, int NV, bool kDirect>
HWY_INLINE void Micro(const float* HWY_RESTRICT ap, int64_t lda, const float* HWY_RESTRICT bp, int64_t kc,
                      float* c, int64_t ldc, bool load_c, const float* pf, int64_t pf_lines) {
  const D d;
  V acc[NV][R];
  const float* HWY_RESTRICT rowp[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[v][r] = hn::Zero(d);
    rowp[r] = ap + r * lda;
  }
  for (int64_t kk = 0; kk < kc; ++kk) {
    V b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = hn::Load(d, bp + v * kL);
    if (pf && kk < pf_lines) __builtin_prefetch(pf + kk * kLineFloats, 0, 2);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const V av = hn::Set(d, kDirect ? rowp[r][kk] : ap[r]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[v][r] = hn::MulAdd(av, b[v], acc[v][r]);
    }
    if (!kDirect) ap += kMR;
    bp += kNR;
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      if (load_c) acc[v][r] = hn::Add(acc[v][r], hn::LoadU(d, cr + v * kL));
      hn::StoreU(acc[v][r], d, cr + v * kL);
    }
  }
}

template <int R, int NV, bool kDirect>
HWY_NOINLINE void MicroN(const float* ap, int64_t lda, const float* bp, int64_t kc, float* c, int64_t ldc,
                         bool load_c, const float* pf, int64_t pf_lines) {
  Micro<R, NV, kDirect>(ap, lda, bp, kc, c, ldc, load_c, pf, pf_lines);
}

template <int NV, bool kDirect>
void RunRows(int64_t rows, const float* ap, int64_t lda, const float* bp, int64_t kc, float* c, int64_t ldc,
             bool load_c, const float* pf, int64_t pf_lines) {
  static_assert(kMR <= 8, "RunRows instantiates up to 8 rows");
  switch (rows) {
    case 1: return MicroN<1, NV, kDirect>(ap, lda, bp, kc, c, ldc, load_c, pf, pf_lines);
    case 2: return MicroN<2, NV, kDirect>(ap, lda, bp, kc, c, ldc, load_c, pf, pf_lines);
    case 3: return MicroN<3, NV, kDirect>(ap, lda, bp, kc, c, ldc, load_c, pf, pf_lines);
    case 4: return MicroN<4, NV, kDirect>(ap, lda, bp, kc, c, ldc, load_c, pf, pf_lines);
    case 5: return MicroN<5, NV, kDirect>(ap, lda, bp, kc, c, ldc, load_c, pf, pf_lines);
    case 6: return MicroN<6, NV, kDirect>(ap, lda, bp, kc, c, ldc, load_c, pf, pf_lines);
    case 7: return MicroN<7, NV, kDirect>(ap, lda, bp, kc, c, ldc, load_c, pf, pf_lines);
    default: return MicroN<8, NV, kDirect>(ap, lda, bp, kc, c, ldc, load_c, pf, pf_lines);
  }
}

template <bool kDirect>
void RunMicro(int64_t rows, int64_t nv, const float* ap, int64_t lda, const float* bp, int64_t kc, float* c,
              int64_t ldc, bool load_c, const float* pf, int64_t pf_lines) {
  static_assert(kNV == 3, "RunMicro instantiates 1 to 3 vectors");
  if (nv == 1) return RunRows<1, kDirect>(rows, ap, lda, bp, kc, c, ldc, load_c, pf, pf_lines);
  if (nv == 2) return RunRows<2, kDirect>(rows, ap, lda, bp, kc, c, ldc, load_c, pf, pf_lines);
  return RunRows<3, kDirect>(rows, ap, lda, bp, kc, c, ldc, load_c, pf, pf_lines);
}

HWY_INLINE V Sigmoid(D d, V x) {
  // exp(-x) for x < -88 would overflow (Highway's Exp is valid up to +88): clamped, the
  // result is ~1e-38 instead of the exact 0 or denormal.
  const V e = hn::Exp(d, hn::Min(hn::Neg(x), hn::Set(d, 88.0f)));
  return hn::Div(hn::Set(d, 1.0f), hn::Add(hn::Set(d, 1.0f), e));
}

// The activations with the reference's formulas (kernels/cpu/ref/activations.cc,
// fused_activation.cc; Tanh and Gelu with the rational erf/tanh of fast_math.h).
HWY_INLINE V Activate(D d, V x, const Problem& p) {
  const V zero = hn::Zero(d), one = hn::Set(d, 1.0f);
  switch (p.act) {
    case Act::None: return x;
    case Act::Relu: return hn::Max(x, zero);
    case Act::LeakyRelu: return hn::IfThenElse(hn::Lt(x, zero), hn::Mul(x, hn::Set(d, p.p0)), x);
    case Act::Sigmoid: return Sigmoid(d, x);
    case Act::Tanh: return TanhRational(d, x);
    case Act::HardSigmoid: return hn::Max(zero, hn::Min(one, hn::MulAdd(hn::Set(d, p.p0), x, hn::Set(d, p.p1))));
    case Act::HardSwish:
      return hn::Mul(x, hn::Max(zero, hn::Min(one, hn::Add(hn::Div(x, hn::Set(d, 6.0f)), hn::Set(d, 0.5f)))));
    case Act::Clip: return hn::Min(hn::Max(x, hn::Set(d, p.p0)), hn::Set(d, p.p1));
    case Act::Silu: return hn::Mul(x, Sigmoid(d, x));
    case Act::Gelu: {
      const V t = ErfRational(d, hn::Mul(x, hn::Set(d, 0.7071067811865476f)));
      return hn::Mul(hn::Mul(hn::Set(d, 0.5f), x), hn::Add(one, t));
    }
    case Act::GeluTanh: {
      const V x3 = hn::Mul(hn::Mul(x, x), x);
      const V t = TanhRational(d, hn::Mul(hn::Set(d, 0.7978845608028654f), hn::MulAdd(hn::Set(d, 0.044715f), x3, x)));
      return hn::Mul(hn::Mul(hn::Set(d, 0.5f), x), hn::Add(one, t));
    }
  }
  return x;
}

// Y tile (rows x cols at (i0, j0)) = act(alpha Y + beta C), while it is still in L1.
void Epilogue(const Problem& p, int64_t i0, int64_t rows, int64_t j0, int64_t cols) {
  if (p.alpha == 1.f && !p.c && p.act == Act::None) return;
  const D d;
  const V alpha = hn::Set(d, p.alpha), beta = hn::Set(d, p.beta);
  for (int64_t r = 0; r < rows; ++r) {
    float* y = p.y + (i0 + r) * p.ldy + j0;
    const float* c = p.c ? p.c + (i0 + r) * p.c_rs + j0 * p.c_cs : nullptr;
    for (int64_t j = 0; j < cols; j += kL) {
      V x = LoadN(d, y + j, cols - j);
      if (p.alpha != 1.f) x = hn::Mul(x, alpha);
      if (c) {
        const V cv = p.c_cs ? LoadN(d, c + j, cols - j) : hn::Set(d, c[0]);
        x = p.beta == 1.f ? hn::Add(x, cv) : hn::MulAdd(beta, cv, x);
      }
      StoreN(Activate(d, x, p), d, y + j, cols - j);
    }
  }
}

// A transposed A's rows [i0, i0 + rows) x [k0, k0 + kc) into kMR-row panels (panel q at
// q kc, row r of step kk at kk kMR + r), read along its contiguous rows. (A row-major A is
// read in place: Problem::a_in_place.)
void PackA(const Problem& p, int64_t i0, int64_t rows, int64_t k0, int64_t kc, float* out) {
  for (int64_t q = 0; q < rows; q += kMR) {
    const int64_t pr = std::min(kMR, rows - q);
    float* o = out + q * kc;
    const float* a = p.a + (i0 + q) * p.a_rs + k0 * p.a_cs;
    for (int64_t kk = 0; kk < kc; ++kk) {
      const float* ak = a + kk * p.a_cs;
      for (int64_t r = 0; r < pr; ++r) o[kk * kMR + r] = ak[r * p.a_rs];
    }
  }
}

void ComputeBlock(const Problem& p, int64_t m0, int64_t m1, int64_t p0, int64_t p1, float* apack,
                  int64_t a_block_stride) {
  const int64_t kcb = k_block(p.k, p.kc);
  // A row-major A is read in place, MR row streams broadcast from memory (a transposing pack
  // would cost a scalar store per element, ~10% of a BERT-sized product); a transposed A is
  // packed into panels, here per K block or beforehand by the caller.
  const bool direct = p.a_in_place;
  HWY_ALIGN float tile[kMR * kNR] = {};  // columns past N: computed, never stored
  for (int64_t k0 = 0; k0 < p.k; k0 += kcb) {
    const int64_t kc = std::min(kcb, p.k - k0);
    const bool first = k0 == 0, last = k0 + kc == p.k;
    const float* ablock = apack + (k0 / kcb) * a_block_stride;
    if (!direct && a_block_stride == 0) PackA(p, m0, m1 - m0, k0, kc, apack);
    for (int64_t q = p0; q < p1; ++q) {
      const int64_t j0 = q * kNR, cols = std::min(kNR, p.n - j0);
      // A ragged last panel runs only the vectors it needs; a partial vector goes through
      // the NR-wide tile.
      const int64_t nv = (cols + kL - 1) / kL;
      const bool via_tile = cols != nv * kL;
      const float* bp = p.bp + q * p.k * kNR + k0 * kNR;
      // The B panel this item runs next (the next one of this K block, else the first of the
      // next K block): its kc x NR floats are prefetched into L2 by the first row blocks'
      // micro-kernels, a cache line per k step each, so that a constant B cold in memory
      // (a model's weights) does not stall the first row block of every panel. Measured with
      // bench/matmul_peak.cc: BERT's linear layers +5% against oneDNN with a cold B (--cold),
      // +0-5% warm; 2048^3 at 85-87% of peak rather than 79-81% (runs alternating on and off).
      const float* next = q + 1 < p1 ? bp + p.k * kNR : (last ? nullptr : p.bp + p0 * p.k * kNR + (k0 + kc) * kNR);
      const int64_t next_lines = next ? (q + 1 < p1 ? kc : std::min(kcb, p.k - k0 - kc)) * kNR / kLineFloats : 0;
      for (int64_t i = m0; i < m1; i += kMR) {
        const int64_t rows = std::min(kMR, m1 - i);
        const float* ap = direct ? p.a + i * p.a_rs + k0 : ablock + (i - m0) * kc;
        float* y = p.y + i * p.ldy + j0;
        float* dst = y;
        int64_t ldd = p.ldy;
        if (via_tile) {
          dst = tile;
          ldd = kNR;
          if (!first)
            for (int64_t r = 0; r < rows; ++r)
              std::memcpy(tile + r * kNR, y + r * p.ldy, static_cast<size_t>(cols) * sizeof(float));
        }
        const int64_t pf_first = (i - m0) / kMR * kc;  // this row block's share of the lines
        const float* pf = pf_first < next_lines ? next + pf_first * kLineFloats : nullptr;
        const int64_t pf_lines = pf ? std::min(kc, next_lines - pf_first) : 0;
        if (direct) RunMicro<true>(rows, nv, ap, p.a_rs, bp, kc, dst, ldd, !first, pf, pf_lines);
        else RunMicro<false>(rows, nv, ap, 1, bp, kc, dst, ldd, !first, pf, pf_lines);
        if (via_tile)
          for (int64_t r = 0; r < rows; ++r)
            std::memcpy(y + r * p.ldy, tile + r * kNR, static_cast<size_t>(cols) * sizeof(float));
        if (last) Epilogue(p, i, rows, j0, cols);
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace gearbox::simd::gemm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gearbox::simd::gemm {
HWY_EXPORT(GetBlocking);
HWY_EXPORT(APackFloats);
HWY_EXPORT(PackB);
HWY_EXPORT(ComputeBlock);
HWY_EXPORT(PackA);

Blocking blocking() { return HWY_DYNAMIC_DISPATCH(GetBlocking)(); }
int64_t a_pack_floats() { return HWY_DYNAMIC_DISPATCH(APackFloats)(); }
void pack_b(const float* b, int64_t rs, int64_t cs, int64_t rows, int64_t n, int64_t nr, int64_t panel_stride,
            float* out) {
  HWY_DYNAMIC_DISPATCH(PackB)(b, rs, cs, rows, n, nr, panel_stride, out);
}
void compute_block(const Problem& p, int64_t m0, int64_t m1, int64_t p0, int64_t p1, float* apack,
                   int64_t a_block_stride) {
  HWY_DYNAMIC_DISPATCH(ComputeBlock)(p, m0, m1, p0, p1, apack, a_block_stride);
}
void pack_a(const Problem& p, int64_t i0, int64_t rows, int64_t k0, int64_t kc, float* out) {
  HWY_DYNAMIC_DISPATCH(PackA)(p, i0, rows, k0, kc, out);
}
}  // namespace gearbox::simd::gemm
#endif
