// The element-wise inner loops of the cpu.simd engine (elementwise_core.cc, compiled per
// instruction set and dispatched at run time), for the kernels in elementwise.cc.
#pragma once

#include <cstdint>

namespace gearbox::simd {

enum class BinaryOp { Add, Sub, Mul, Div };
enum class UnaryOp { Relu, Neg, Abs, Sqrt, Sigmoid, Tanh, Exp };

// y[i] = a[i * a_step] op b[i * b_step] for i in [0, n); a step of 0 repeats one value.
void binary_span(BinaryOp op, const float* a, int64_t a_step, const float* b, int64_t b_step, float* y, int64_t n);
// y[i] = op(x[i]) for i in [0, n).
void unary_span(UnaryOp op, const float* x, float* y, int64_t n);

}  // namespace gearbox::simd
