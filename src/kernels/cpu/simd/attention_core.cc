// The inner loop of the cpu.simd attention kernel (see attention.cc, attention_core.h): a
// block of R = 2 vectors of query rows of one head (32 on AVX-512) against the keys, tile by
// tile (kTile keys), with an online softmax. The block's queries lie in vector lanes: Q is
// transposed once into qt [dh][R] (scaled), and the scores of a tile are kept transposed,
// st [keys][R] (R x kTile floats, 16 KiB on AVX-512, in L1), computed as
// st[j] += k[j][c] (broadcast) * qt[c] over c. So K and V are read in place (a broadcast needs
// no layout; V rows are loaded as vectors), and the softmax over the keys is vertical: the
// running max m, sum l and rescale factor per query are plain vectors, with no horizontal
// reduction. The context o [R][dv] += p[r][j] (broadcast) * v[j] is register-blocked too.
// Per tile, the previous o and l are rescaled by exp(m_old - m_new) (never when the keys fit
// in one tile, as BERT's 128 do). Only R x kTile scores exist at a time.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/attention_core.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include <hwy/aligned_allocator.h>

#include "base/scratch.h"
#include "kernels/cpu/simd/attention_core.h"

HWY_BEFORE_NAMESPACE();
namespace gearbox::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int64_t kTile = 128;  // keys per tile
// Register blocking: the score micro-tile is kKeys keys x 2 vectors of queries, the context
// micro-tile kPvRows rows x up to 4 vectors of channels; 16 accumulators where the target has
// 32 vector registers (AVX-512), 8 where it has 16.
#if HWY_TARGET <= HWY_AVX3
constexpr int kKeys = 8;
constexpr int kPvRows = 4;
#else
constexpr int kKeys = 4;
constexpr int kPvRows = 2;
#endif

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

int64_t BlockRowsImpl() { return 2 * static_cast<int64_t>(hn::Lanes(D())); }

// exp(x) for x <= 0, 0 below -87 (so a -inf score gives exactly 0), cheaper than the general
// hn::Exp that ExpNonPositive wraps: Cody-Waite reduction x = k ln2 + r, |r| <= ln2 / 2, the
// degree-7 polynomial of Cephes' expf for e^r (about 1 ulp), 2^k written into the exponent
// bits (k >= -126 here, so always a normal float).
HWY_INLINE V ExpSoftmax(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V lo = hn::Set(d, -87.0f);
  const V xc = hn::Max(x, lo);
  const V k = hn::Round(hn::Mul(xc, hn::Set(d, 1.44269504088896341f)));
  V r = hn::MulAdd(k, hn::Set(d, -0.693359375f), xc);
  r = hn::MulAdd(k, hn::Set(d, 2.12194440e-4f), r);
  V p = hn::Set(d, 1.9875691500e-4f);
  p = hn::MulAdd(p, r, hn::Set(d, 1.3981999507e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 8.3334519073e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 4.1665795894e-2f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.6666665459e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 5.0000001201e-1f));
  p = hn::MulAdd(p, hn::Mul(r, r), hn::Add(r, hn::Set(d, 1.0f)));
  const auto two_k = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, k), hn::Set(di, 127))));
  return hn::IfThenElseZero(hn::Ge(x, lo), hn::Mul(p, two_k));
}

// st[j][0..R) = sum_c k[j][c] * qt[c][0..R) for kJ keys starting at kp (key stride k_key).
template <int kJ>
HWY_INLINE void Scores(D d, const float* qt, int64_t dh, const float* kp, int64_t k_key, int64_t k_ch,
                       float* st) {
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  V acc[kJ][2];
  for (int j = 0; j < kJ; ++j) acc[j][0] = acc[j][1] = hn::Zero(d);
  for (int64_t c = 0; c < dh; ++c) {
    const V q0 = hn::Load(d, qt + c * 2 * n), q1 = hn::Load(d, qt + c * 2 * n + n);
    const float* kc = kp + c * k_ch;
    for (int j = 0; j < kJ; ++j) {
      const V kb = hn::Set(d, kc[j * k_key]);
      acc[j][0] = hn::MulAdd(kb, q0, acc[j][0]);
      acc[j][1] = hn::MulAdd(kb, q1, acc[j][1]);
    }
  }
  for (int j = 0; j < kJ; ++j) {
    hn::Store(acc[j][0], d, st + j * 2 * n);
    hn::Store(acc[j][1], d, st + j * 2 * n + n);
  }
}

// o[r0 + r][d0 .. d0 + kW vectors) (+)= sum_j st[j][r0 + r] * vt[j][d0 ..] over bc keys.
template <int kW>
HWY_INLINE void Context(D d, const float* st, int64_t r0, int64_t bc, const float* vt, int64_t v_key, int64_t d0,
                        bool first, float* o, int64_t dvp) {
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  V acc[kPvRows][kW];
  for (int r = 0; r < kPvRows; ++r)
    for (int w = 0; w < kW; ++w)
      acc[r][w] = first ? hn::Zero(d) : hn::Load(d, o + (r0 + r) * dvp + d0 + w * n);
  for (int64_t j = 0; j < bc; ++j) {
    V vv[kW];
    for (int w = 0; w < kW; ++w) vv[w] = hn::LoadU(d, vt + j * v_key + d0 + w * n);
    const float* p = st + j * 2 * n + r0;
    for (int r = 0; r < kPvRows; ++r) {
      const V pb = hn::Set(d, p[r]);
      for (int w = 0; w < kW; ++w) acc[r][w] = hn::MulAdd(pb, vv[w], acc[r][w]);
    }
  }
  for (int r = 0; r < kPvRows; ++r)
    for (int w = 0; w < kW; ++w) hn::Store(acc[r][w], d, o + (r0 + r) * dvp + d0 + w * n);
}

#if HWY_TARGET != HWY_SCALAR
// qt[c * ld + r] = q[r * q_row + c] * scale for a 4 x 4 block (channels contiguous): the
// transpose of Q in 128-bit pieces, 4 stores per 16 values instead of 16.
HWY_INLINE void Transpose4x4(const float* q, int64_t q_row, float scale, float* qt, int64_t ld) {
  const hn::FixedTag<float, 4> d4;
  const hn::Repartition<double, decltype(d4)> d2;
  const auto sv = hn::Set(d4, scale);
  const auto r0 = hn::Mul(hn::LoadU(d4, q), sv), r1 = hn::Mul(hn::LoadU(d4, q + q_row), sv);
  const auto r2 = hn::Mul(hn::LoadU(d4, q + 2 * q_row), sv), r3 = hn::Mul(hn::LoadU(d4, q + 3 * q_row), sv);
  const auto t0 = hn::BitCast(d2, hn::InterleaveLower(d4, r0, r1));  // a0 b0 a1 b1
  const auto t1 = hn::BitCast(d2, hn::InterleaveLower(d4, r2, r3));  // c0 d0 c1 d1
  const auto t2 = hn::BitCast(d2, hn::InterleaveUpper(d4, r0, r1));  // a2 b2 a3 b3
  const auto t3 = hn::BitCast(d2, hn::InterleaveUpper(d4, r2, r3));  // c2 d2 c3 d3
  hn::StoreU(hn::BitCast(d4, hn::InterleaveLower(d2, t0, t1)), d4, qt);
  hn::StoreU(hn::BitCast(d4, hn::InterleaveUpper(d2, t0, t1)), d4, qt + ld);
  hn::StoreU(hn::BitCast(d4, hn::InterleaveLower(d2, t2, t3)), d4, qt + 2 * ld);
  hn::StoreU(hn::BitCast(d4, hn::InterleaveUpper(d2, t2, t3)), d4, qt + 3 * ld);
}
#endif

void AttendBlock(const AttendRows& a, int64_t i0, int64_t rows, float* ws) {
  const D d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d)), R = 2 * n;
  const int64_t dvp = (a.dv + n - 1) / n * n;
  float* qt = ws;                    // [dh][R]
  float* st = qt + a.dh * R;         // [kTile][R]
  float* o = st + kTile * R;         // [R][dvp]
  float* vp = o + R * dvp;           // [kTile][dvp], when V cannot be read in place
  float* lbuf = vp + kTile * dvp;    // [R]
  float* abuf = lbuf + R;            // [R]

  // Q transposed and scaled; rows past the block's end are zero (their results are dropped).
  int64_t r = 0;
#if HWY_TARGET != HWY_SCALAR
  if (a.q_ch == 1) {
    const int64_t dh4 = a.dh / 4 * 4;
    for (; r + 4 <= rows; r += 4) {
      const float* qr = a.q + (i0 + r) * a.q_row;
      for (int64_t c = 0; c < dh4; c += 4) Transpose4x4(qr + c, a.q_row, a.scale, qt + c * R + r, R);
      for (int64_t rr = r; rr < r + 4; ++rr)
        for (int64_t c = dh4; c < a.dh; ++c) qt[c * R + rr] = a.q[(i0 + rr) * a.q_row + c] * a.scale;
    }
  }
#endif
  for (; r < R; ++r) {
    if (r < rows) {
      const float* qr = a.q + (i0 + r) * a.q_row;
      for (int64_t c = 0; c < a.dh; ++c) qt[c * R + r] = qr[c * a.q_ch] * a.scale;
    } else {
      for (int64_t c = 0; c < a.dh; ++c) qt[c * R + r] = 0.0f;
    }
  }
  // V in place when its rows are contiguous whole vectors; else one tile at a time, packed.
  const bool v_direct = a.v_ch == 1 && a.dv % n == 0;
  const int64_t pv_rows = (rows + kPvRows - 1) / kPvRows * kPvRows;

  const V ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  V m0 = ninf, m1 = ninf, l0 = hn::Zero(d), l1 = hn::Zero(d);
  for (int64_t t0 = 0; t0 < a.sk; t0 += kTile) {
    const int64_t bc = std::min(kTile, a.sk - t0);
    const bool first = t0 == 0;
    // Scores.
    const float* kt = a.k + t0 * a.k_key;
    int64_t j = 0;
    for (; j + kKeys <= bc; j += kKeys) Scores<kKeys>(d, qt, a.dh, kt + j * a.k_key, a.k_key, a.k_ch, st + j * R);
    for (; j < bc; ++j) Scores<1>(d, qt, a.dh, kt + j * a.k_key, a.k_key, a.k_ch, st + j * R);
    // Mask: one value per key for the whole block when it broadcasts over the rows (BERT's
    // padding mask), else per (row, key).
    if (a.mask) {
      const float* mt = a.mask + i0 * a.mask_row + t0 * a.mask_key;
      if (a.mask_row == 0) {
        for (j = 0; j < bc; ++j) {
          const V mv = hn::Set(d, mt[j * a.mask_key]);
          hn::Store(hn::Add(hn::Load(d, st + j * R), mv), d, st + j * R);
          hn::Store(hn::Add(hn::Load(d, st + j * R + n), mv), d, st + j * R + n);
        }
      } else {
        for (j = 0; j < bc; ++j)
          for (int64_t r = 0; r < rows; ++r) st[j * R + r] += mt[r * a.mask_row + j * a.mask_key];
      }
    }
    // Online softmax, vertical: new max per query, probabilities in place, their sums.
    V x0 = m0, x1 = m1;
    for (j = 0; j < bc; ++j) {
      x0 = hn::Max(x0, hn::Load(d, st + j * R));
      x1 = hn::Max(x1, hn::Load(d, st + j * R + n));
    }
    // A query whose keys so far are all -inf keeps max -inf; subtracting 0 instead gives
    // exp(-inf) = 0 for its scores and l stays 0 (NaN at the end, as in the reference).
    const V z0 = hn::IfThenZeroElse(hn::Eq(x0, ninf), x0), z1 = hn::IfThenZeroElse(hn::Eq(x1, ninf), x1);
    V s0 = hn::Zero(d), s1 = hn::Zero(d);
    for (j = 0; j < bc; ++j) {
      const V e0 = ExpSoftmax(d, hn::Sub(hn::Load(d, st + j * R), z0));
      const V e1 = ExpSoftmax(d, hn::Sub(hn::Load(d, st + j * R + n), z1));
      hn::Store(e0, d, st + j * R);
      hn::Store(e1, d, st + j * R + n);
      s0 = hn::Add(s0, e0);
      s1 = hn::Add(s1, e1);
    }
    if (first) {
      l0 = s0;
      l1 = s1;
    } else {
      const V a0 = ExpSoftmax(d, hn::Sub(m0, z0)), a1 = ExpSoftmax(d, hn::Sub(m1, z1));
      l0 = hn::MulAdd(l0, a0, s0);
      l1 = hn::MulAdd(l1, a1, s1);
      hn::Store(a0, d, abuf);
      hn::Store(a1, d, abuf + n);
      for (int64_t r = 0; r < pv_rows; ++r) {
        const V av = hn::Set(d, abuf[r]);
        for (int64_t c = 0; c < dvp; c += n) hn::Store(hn::Mul(hn::Load(d, o + r * dvp + c), av), d, o + r * dvp + c);
      }
    }
    m0 = x0;
    m1 = x1;
    // Context += P V over the tile.
    const float* vt = a.v + t0 * a.v_key;
    int64_t v_key = a.v_key;
    if (!v_direct) {
      for (j = 0; j < bc; ++j) {
        const float* vr = vt + j * a.v_key;
        for (int64_t c = 0; c < a.dv; ++c) vp[j * dvp + c] = vr[c * a.v_ch];
        for (int64_t c = a.dv; c < dvp; ++c) vp[j * dvp + c] = 0.0f;
      }
      vt = vp;
      v_key = dvp;
    }
    for (int64_t r0 = 0; r0 < pv_rows; r0 += kPvRows) {
      for (int64_t c = 0; c < dvp;) {
        if (c + 4 * n <= dvp) {
          Context<4>(d, st, r0, bc, vt, v_key, c, first, o, dvp);
          c += 4 * n;
        } else if (c + 2 * n <= dvp) {
          Context<2>(d, st, r0, bc, vt, v_key, c, first, o, dvp);
          c += 2 * n;
        } else {
          Context<1>(d, st, r0, bc, vt, v_key, c, first, o, dvp);
          c += n;
        }
      }
    }
  }
  // Normalize and write out. l == 0: every key masked with -inf; 0/0 is NaN, as in the reference.
  hn::Store(l0, d, lbuf);
  hn::Store(l1, d, lbuf + n);
  for (int64_t r = 0; r < rows; ++r) {
    const float inv = lbuf[r] > 0 ? 1.0f / lbuf[r] : std::numeric_limits<float>::quiet_NaN();
    const float* orow = o + r * dvp;
    float* yr = a.out + (i0 + r) * a.out_row;
    if (a.out_ch == 1) {
      const V iv = hn::Set(d, inv);
      int64_t c = 0;
      for (; c + n <= a.dv; c += n) hn::StoreU(hn::Mul(hn::Load(d, orow + c), iv), d, yr + c);
      for (; c < a.dv; ++c) yr[c] = orow[c] * inv;
    } else {
      for (int64_t c = 0; c < a.dv; ++c) yr[c * a.out_ch] = orow[c] * inv;
    }
  }
}

void AttendRowsImpl(const AttendRows& a) {
  const D d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d)), R = 2 * n;
  const int64_t dvp = (a.dv + n - 1) / n * n;
  const size_t need = static_cast<size_t>(a.dh * R + kTile * R + R * dvp + kTile * dvp + 2 * R);
  // Reused across calls (per thread, so safe in OpenMP regions); aligned for whole-vector
  // loads: every section's size is a multiple of the vector length.
  // Counted in the pool statistics (base/scratch.h).
  thread_local ThreadScratch<float> ws;
  float* w = ws.get(need);
  for (int64_t i0 = a.row_begin; i0 < a.row_end; i0 += R) AttendBlock(a, i0, std::min(R, a.row_end - i0), w);
}

}  // namespace HWY_NAMESPACE
}  // namespace gearbox::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gearbox::simd {
HWY_EXPORT(AttendRowsImpl);
HWY_EXPORT(BlockRowsImpl);
int64_t attend_compiled_targets() { return HWY_TARGETS; }
int64_t attend_block_rows() { return HWY_DYNAMIC_DISPATCH(BlockRowsImpl)(); }
void attend_rows(const AttendRows& a) { HWY_DYNAMIC_DISPATCH(AttendRowsImpl)(a); }
}  // namespace gearbox::simd
#endif
