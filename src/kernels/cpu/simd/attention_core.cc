// The inner loop of the cpu.simd attention kernel (see attention.cc): one block of up to 4
// query rows of one head against all keys, tile by tile (64 keys), with an online softmax:
// per tile, scores = q . K_tile (register-blocked: 4 rows x 2 vectors of keys), then the
// running max m, sum l and context accumulator o are rescaled by exp(m_old - m_new) and
// o += exp(s - m_new) . V_tile. Only 4 x 64 scores exist at a time.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4 | HWY_AVX3_DL)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/attention_core.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/simd/simd_math-inl.h"
#include "kernels/cpu/simd/simd_util.h"

HWY_BEFORE_NAMESPACE();
namespace gearbox::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int64_t kTile = 64;  // keys per tile; a multiple of every target's lane count

// s[r][0..w) = q[r] . kt[:, 0..w) for the 4 rows, w = 1 or 2 vectors.
template <int kW, class D>
HWY_INLINE void ScoreChunk(D d, const float* q, int64_t dh, const float* kt, int64_t skp, float* s) {
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  hn::Vec<D> acc[4][kW];
  for (int r = 0; r < 4; ++r)
    for (int w = 0; w < kW; ++w) acc[r][w] = hn::Zero(d);
  for (int64_t k = 0; k < dh; ++k) {
    hn::Vec<D> kv[kW];
    for (int w = 0; w < kW; ++w) kv[w] = hn::LoadU(d, kt + k * skp + w * n);
    for (int r = 0; r < 4; ++r) {
      const auto qv = hn::Set(d, q[r * dh + k]);
      for (int w = 0; w < kW; ++w) acc[r][w] = hn::MulAdd(qv, kv[w], acc[r][w]);
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int w = 0; w < kW; ++w) hn::StoreU(acc[r][w], d, s + r * kTile + w * n);
}

// o[r][0..w) += sum_j p[r][j] * v[j][0..w) over the tile's bc keys.
template <int kW, class D>
HWY_INLINE void ContextChunk(D d, const float* p, int64_t bc, const float* v, int64_t dvp, float* o) {
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  hn::Vec<D> acc[4][kW];
  for (int r = 0; r < 4; ++r)
    for (int w = 0; w < kW; ++w) acc[r][w] = hn::LoadU(d, o + r * dvp + w * n);
  for (int64_t j = 0; j < bc; ++j) {
    hn::Vec<D> vv[kW];
    for (int w = 0; w < kW; ++w) vv[w] = hn::LoadU(d, v + j * dvp + w * n);
    for (int r = 0; r < 4; ++r) {
      const auto pv = hn::Set(d, p[r * kTile + j]);
      for (int w = 0; w < kW; ++w) acc[r][w] = hn::MulAdd(pv, vv[w], acc[r][w]);
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int w = 0; w < kW; ++w) hn::StoreU(acc[r][w], d, o + r * dvp + w * n);
}

void AttendBlockImpl(const AttendBlock& a) {
  const hn::ScalableTag<float> d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const float ninf = -std::numeric_limits<float>::infinity();
  float* s = a.scratch;             // [4][kTile] scores, then probabilities
  float* o = a.scratch + 4 * kTile;  // [4][dvp] unnormalized context
  std::fill(o, o + 4 * a.dvp, 0.0f);
  float m[4] = {ninf, ninf, ninf, ninf}, l[4] = {0, 0, 0, 0};
  for (int64_t t0 = 0; t0 < a.skp; t0 += kTile) {
    const int64_t bc = std::min(kTile, a.skp - t0);  // a multiple of kSimdPad, so of n
    for (int64_t j = 0; j < bc;) {
      if (j + 2 * n <= bc) {
        ScoreChunk<2>(d, a.q, a.dh, a.kt + t0 + j, a.skp, s + j);
        j += 2 * n;
      } else {
        ScoreChunk<1>(d, a.q, a.dh, a.kt + t0 + j, a.skp, s + j);
        j += n;
      }
    }
    for (int64_t r = 0; r < a.rows; ++r) {
      float* sr = s + r * kTile;
      const int64_t valid = std::clamp<int64_t>(a.sk - t0, 0, bc);
      if (a.mask[r]) {
        const float* mr = a.mask[r] + t0 * a.mask_kstride;
        if (a.mask_kstride == 1) {
          for (int64_t j = 0; j + n <= valid; j += n)
            hn::StoreU(hn::Add(hn::LoadU(d, sr + j), hn::LoadU(d, mr + j)), d, sr + j);
          for (int64_t j = valid / n * n; j < valid; ++j) sr[j] += mr[j];
        } else {
          const auto mv = hn::Set(d, mr[0]);
          for (int64_t j = 0; j < bc; j += n) hn::StoreU(hn::Add(hn::LoadU(d, sr + j), mv), d, sr + j);
        }
      }
      for (int64_t j = valid; j < bc; ++j) sr[j] = ninf;  // padding keys
      auto mx = hn::Set(d, ninf);
      for (int64_t j = 0; j < bc; j += n) mx = hn::Max(mx, hn::LoadU(d, sr + j));
      const float m_new = std::max(m[r], hn::GetLane(hn::MaxOfLanes(d, mx)));
      if (m_new == ninf) {  // every key so far masked with -inf: nothing to add yet
        std::fill(sr, sr + bc, 0.0f);
        continue;
      }
      const auto vm = hn::Set(d, m_new);
      auto sum = hn::Zero(d);
      for (int64_t j = 0; j < bc; j += n) {
        const auto e = ExpNonPositive(d, hn::Sub(hn::LoadU(d, sr + j), vm));
        hn::StoreU(e, d, sr + j);
        sum = hn::Add(sum, e);
      }
      const float alpha = std::exp(m[r] - m_new);  // 0 when m[r] is -inf
      l[r] = l[r] * alpha + hn::GetLane(hn::SumOfLanes(d, sum));
      m[r] = m_new;
      if (alpha != 1.0f) {
        const auto va = hn::Set(d, alpha);
        float* orow = o + r * a.dvp;
        for (int64_t c = 0; c < a.dvp; c += n) hn::StoreU(hn::Mul(hn::LoadU(d, orow + c), va), d, orow + c);
      }
    }
    for (int64_t r = a.rows; r < 4; ++r) std::fill(s + r * kTile, s + r * kTile + bc, 0.0f);
    const float* vt = a.v + t0 * a.dvp;
    for (int64_t c = 0; c < a.dvp;) {
      if (c + 2 * n <= a.dvp) {
        ContextChunk<2>(d, s, bc, vt + c, a.dvp, o + c);
        c += 2 * n;
      } else {
        ContextChunk<1>(d, s, bc, vt + c, a.dvp, o + c);
        c += n;
      }
    }
  }
  for (int64_t r = 0; r < a.rows; ++r) {
    // l == 0: every key masked with -inf; softmax is 0/0 there, NaN as in the reference.
    const float inv = l[r] > 0 ? 1.0f / l[r] : std::numeric_limits<float>::quiet_NaN();
    const float* orow = o + r * a.dvp;
    for (int64_t c = 0; c < a.dv; ++c) a.out[r][c * a.out_dstride] = orow[c] * inv;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace gearbox::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gearbox::simd {
HWY_EXPORT(AttendBlockImpl);
void attend_block(const AttendBlock& a) { HWY_DYNAMIC_DISPATCH(AttendBlockImpl)(a); }
}  // namespace gearbox::simd
#endif
