// The one fast GEMM routine of the reference engine: C = alpha * op(A) * op(B) + beta * C on
// row-major matrices, for float and double. MatMul, Gemm, Conv (im2col / 1x1), ConvTranspose
// all call it, so its speed is the engine's speed on ResNet- and BERT-class models.
//
// Cache-blocked (Goto/BLIS style: packed B block in L2, packed A micro-panel in L1), with a
// register-tiled micro-kernel written with GCC vector extensions and compiled once per ISA
// (AVX-512, AVX2+FMA, baseline x86-64); the variant is picked at run time, so one binary
// runs on any x86-64. Work is split over OpenMP threads by C tiles across the whole batch.
#pragma once

#include <cstdint>

namespace gearbox::ref {

// One problem of a batch: pointers to A, B and C (row-major, with the leading dims given in
// GemmShape). Batched calls let small per-image/per-group/per-head GEMMs share one parallel
// region instead of each being split across threads on its own.
template <typename T>
struct GemmPtrs {
  const T* a;
  const T* b;
  T* c;
};

struct GemmShape {
  bool trans_a = false;  // A is stored K x M (lda >= M) instead of M x K (lda >= K)
  bool trans_b = false;  // B is stored N x K (ldb >= K) instead of K x N (ldb >= N)
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

// For every entry p of `batch` (count entries): p.c = alpha * op(p.a) * op(p.b) + beta * p.c.
// beta == 0 overwrites C without reading it (so C may hold garbage or NaN). k == 0 gives
// beta * C. Accumulates in T.
void gemm_batched(const GemmShape& s, float alpha, const GemmPtrs<float>* batch, int64_t count, float beta);
void gemm_batched(const GemmShape& s, double alpha, const GemmPtrs<double>* batch, int64_t count, double beta);

// A single GEMM.
template <typename T>
void gemm(const GemmShape& s, T alpha, const T* a, const T* b, T beta, T* c) {
  GemmPtrs<T> p{a, b, c};
  gemm_batched(s, alpha, &p, 1, beta);
}

// Which micro-kernel variant the dispatcher chose ("avx512", "avx2", "generic"): for logs
// and benchmarks.
const char* gemm_isa_name();

}  // namespace gearbox::ref
