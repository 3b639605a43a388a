// Shared plumbing of the cpu.simd engine (hand-written vector kernels on Highway, with
// runtime dispatch: one binary runs the AVX-512, AVX2 or baseline version the CPU allows):
// the engine name and the dispatched inner loops the kernels thread over with OpenMP. What each
// kernel handles is declared with it (kernels/kernel_support.h); the cases it refuses run on
// the next engine of the session's list.
//
// The inner loops (rows.cc, attention_core.cc) are compiled once per instruction set by
// Highway's foreach_target; OpenMP regions stay in the kernels (compiled for the baseline),
// because an outlined parallel region does not inherit a per-target function attribute.
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/kernel.h"

namespace gearbox {

inline constexpr std::string_view kEngineSimd = "cpu.simd";

namespace simd {

// Runs f(i) for i in [0, count): over the OpenMP team when `threaded`, else inline on the
// calling thread. Kernels use it instead of `omp parallel for if (...)`: a region whose if
// clause is false still creates a team of one (~1.5 us per call, 8x what a small element-wise
// op costs on the reference engine).
template <class F>
void for_each_index(int64_t count, bool threaded, F&& f) {
  if (threaded && count > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) f(i);
  } else {
    for (int64_t i = 0; i < count; ++i) f(i);
  }
}

// The instruction set the dispatched loops run with on this CPU ("AVX3", "AVX2", ...).
const char* dispatch_target_name();

// y[0..cols) = LayerNorm(x + skip) * gamma + beta over one row (skip, beta may be null).
// Statistics in float with vector partial sums; two passes (mean, then squared deviations).
void layer_norm_row(const float* x, const float* skip, const float* gamma, const float* beta, float* y,
                    int64_t cols, float eps);
// y[0..n) = softmax(x[0..n)) (max subtracted first).
void softmax_row(const float* x, float* y, int64_t n);
// y = Gelu(x) elementwise, erf form or tanh form (the rational erf/tanh of ref/fast_math.h).
void gelu_span(const float* x, float* y, int64_t n, bool tanh_form);
// dx = dy * Gelu'(x) elementwise (com.gearbox.GeluGrad), the same erf/tanh.
void gelu_grad_span(const float* dy, const float* x, float* dx, int64_t n, bool tanh_form);

}  // namespace simd
}  // namespace gearbox
