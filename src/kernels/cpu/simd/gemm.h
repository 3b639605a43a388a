// The fp32 GEMM of the cpu.simd engine (BLIS/MLAS-style): B packed into NR-wide column
// panels (once for constant weights, cached; per call otherwise), a row-major A read in
// place (a transposed A packed into MR-row panels per K block), an MR x NR register-blocked
// micro-kernel (broadcast A, FMA
// with NR / lanes vectors of B), and an epilogue (alpha, beta * C or a bias with
// broadcasting, the fused activation) applied to each finished output tile while it is in
// L1. The vector code (gemm_core.cc) is compiled per instruction set and picked at run
// time; the OpenMP split over output blocks lives in gemm.cc (baseline code, see
// simd_util.h).
#pragma once

#include <hwy/aligned_allocator.h>

#include <cstdint>
#include <memory>

#include "base/tensor.h"
#include "kernels/op_descriptor.h"

namespace gearbox::simd::gemm {

// The register blocking of the dispatched target: MR rows x NR columns (NR a multiple of
// the vector length); the packed B layout depends on NR.
struct Blocking {
  int64_t mr, nr;
};
Blocking blocking();

// Packed B: ceil(n / nr) panels of k x nr floats each (panel p holds columns
// [p nr, p nr + nr), row kk at offset p k nr + kk nr), zero padded past column n.
inline int64_t packed_b_floats(int64_t k, int64_t n, int64_t nr) { return (n + nr - 1) / nr * nr * k; }
// Packs `rows` rows of B, B(kk, j) = b[kk * rs + j * cs] (transB: rs = 1, cs = k), into
// rows [0, rows) of each panel, panel p at out + p * panel_stride (k nr for a whole B; a
// caller packing rows [k0, k1) passes b + k0 rs and out + k0 nr).
void pack_b(const float* b, int64_t rs, int64_t cs, int64_t rows, int64_t n, int64_t nr, int64_t panel_stride,
            float* out);

// The fused activation of FusedMatMul/FusedGemm (kernels/op_descriptor.h).
using Act = ActivationKind;

// The largest K block and the M block one work item covers. The K block is the whole K up
// to 1024 (larger K: equal blocks of at most 1024). The kc x NR B micro-panel (192 KiB on
// AVX-512 at kc 1024) then streams from L2 rather than sitting in L1, which the micro-kernel
// absorbs (its B loads are sequential and prefetched); in exchange each C tile is loaded and
// stored once per K block instead of once per 256 steps, and there are fewer micro-kernel
// calls. Measured on the 2-core Zen-5-like EPYC (bench/matmul_peak.cc, docs/performance.md):
// kc 1024 vs 256 +1-5% per core on BERT's linear layers and 1024^3, +5-13% at 2 threads on
// the BERT shapes; 128-192 were slower, and prefetching the next B panel into L2 or packing
// a row-major A measured slower still.
inline constexpr int64_t kKcMax = 1024;
inline constexpr int64_t kMcRows = 128;

// Y = act(alpha * A B + beta * C), for one matrix product.
// A(i, kk) = a[i * a_rs + kk * a_cs]; C(i, j) = c[i * c_rs + j * c_cs] (strides 0 broadcast;
// c null: no C term); Y row-major with leading dimension ldy.
struct Problem {
  const float* a = nullptr;
  int64_t a_rs = 0, a_cs = 1;
  const float* bp = nullptr;  // packed B (pack_b with this target's nr)
  float* y = nullptr;
  int64_t ldy = 0;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.f, beta = 1.f;
  const float* c = nullptr;
  int64_t c_rs = 0, c_cs = 0;
  Act act = Act::None;
  float p0 = 0.f, p1 = 0.f;  // activation parameters (LeakyRelu/HardSigmoid alpha, beta; Clip min, max)
  int64_t kc = kKcMax;       // K block (<= kKcMax; see kKcMax)
  bool a_in_place = false;   // a row-major A the micro-kernel reads where it is (no packing)
};

// K runs in blocks of equal size (<= kc), so a K just over a multiple of kc leaves no sliver.
inline int64_t k_block(int64_t k, int64_t kc) {
  const int64_t nk = (k + kc - 1) / kc;
  return (k + nk - 1) / nk;
}
// Floats of one packed (transposed) A block of `rows` (<= kMcRows) x kc.
inline int64_t a_block_floats(int64_t rows, int64_t kc) { return (rows + 7) / 8 * 8 * kc; }
// Floats of the per-thread A packing buffer compute_block needs.
int64_t a_pack_floats();
// A transposed A's rows [i0, i0 + rows) x [k0, k0 + kc) packed the way compute_block reads it.
void pack_a(const Problem& p, int64_t i0, int64_t rows, int64_t k0, int64_t kc, float* out);
// Rows [m0, m1) and B panels [p0, p1) of the problem (m0 a multiple of mr, m1 - m0 <=
// kMcRows). With a_block_stride 0, `apack` holds a_pack_floats() floats private to the
// calling thread, and A is packed into it per K block; otherwise the K blocks of this M
// block are already packed (pack_a with kc = k_block(k, p.kc)) at apack + kb a_block_stride.
void compute_block(const Problem& p, int64_t m0, int64_t m1, int64_t p0, int64_t p1, float* apack,
                   int64_t a_block_stride);

// B packed into panels (pack_b with this target's nr): batch i's panels at ptr + i *
// batch_floats.
struct PackedB {
  Tensor source;                            // keeps a constant's buffer (and so the cache key's address) alive
  hwy::AlignedFreeUniquePtr<float[]> data;  // owned storage (empty when ptr is a thread buffer)
  float* ptr = nullptr;
  int64_t batch_floats = 0;      // floats per packed B batch
  bool packed_by_items = false;  // allocated only: the work items of a product pack it (gemm.cc)
  const float* batch(int64_t i) const { return ptr + i * batch_floats; }
};

// Weights for products of the kernels' own (an RNN's W and R): `nb` batches at b's data +
// offset + i * batch_stride, each k x n with B(kk, j) = [kk * rs + j * cs], packed now. A
// constant (an initializer) is packed once and cached as MatMul's constant B is, one entry
// per (offset, part); otherwise the panels are the returned object's own, per call.
std::shared_ptr<const PackedB> pack_weights(const Tensor& b, int64_t offset, int64_t nb, int64_t batch_stride,
                                            int64_t rs, int64_t cs, int64_t k, int64_t n, bool constant);

// Runs one product (p.bp packed, A row-major or read through its strides) over the OpenMP
// team, or on the calling thread alone when it is small or the caller is inside a region.
void multiply(const Problem& p);
// Runs one product whose B is computed at run time: B(kk, j) = b[kk * rs + j * cs], packed by
// the work items into the calling thread's buffer as MatMul packs a run-time B (p.bp unused).
void multiply_with_b(Problem p, const float* b, int64_t rs, int64_t cs);

// B packings performed (constant and run-time B) and the constant packed B held in the
// cache (for tests; gemm.cc).
int64_t pack_count();
size_t packed_cache_size();

}  // namespace gearbox::simd::gemm
