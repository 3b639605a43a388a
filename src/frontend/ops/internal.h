// Helpers the ops and the gradient builders share: small constant tensors, the broadcast
// reduction of a gradient, and ops without a public spelling (Expand, Sign, Pad, Erf).
#pragma once

#include <vector>

#include "frontend/autodiff/tape.h"
#include "frontend/tensor_impl.h"

namespace gbx::nn {

// A 0-d tensor of x's dtype (broadcasts against x).
Tensor scalar_like(const Tensor& x, double v);
// A 1-d int64 tensor (shape, axes, pads inputs).
Tensor int64s(const std::vector<int64_t>& v);
// Sums a broadcast gradient back to `shape` (the input's): over the leading dims the
// broadcast added and over the dims that were 1.
Tensor sum_to(const Tensor& g, const std::vector<int64_t>& shape);
// Broadcasts x to `shape` (ONNX Expand; gradient: sum_to).
Tensor expand(const Tensor& x, const std::vector<int64_t>& shape);
// Elementwise sign (no gradient: used by Relu's).
Tensor sign(const Tensor& x);
Tensor erf(const Tensor& x);
// Zero padding: `pads` = [begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}] (ONNX Pad).
Tensor pad_zeros(const Tensor& x, const std::vector<int64_t>& pads);
// Swaps the last two axes.
Tensor transpose_last2(const Tensor& x);
// Axis in [-rank, rank) to [0, rank); INVALID_ARGUMENT outside.
int64_t normalize_axis(int64_t axis, size_t rank, const char* op);

}  // namespace gbx::nn
