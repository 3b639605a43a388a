// Helpers shared by the reference kernels: axis normalization, broadcasting, strides and
// reading small integer tensors (shapes, axes, indices given as inputs).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "base/tensor.h"
#include "kernels/kernel.h"

namespace gearbox::ref {

// Maps a possibly-negative axis into [0, rank); INVALID_ARGUMENT if out of range.
Result<int64_t> normalize_axis(const KernelContext& ctx, int64_t axis, int64_t rank);

// Numpy-style multidirectional broadcast of two or more shapes; SHAPE_MISMATCH if they
// do not broadcast.
Result<Dims> broadcast_shapes(const KernelContext& ctx, const std::vector<Dims>& shapes);

// Row-major strides of dims (in elements).
std::vector<int64_t> strides_of(const Dims& dims);

// Strides of `in` viewed at the broadcast shape `out` (0 where the dim is broadcast).
// `in` is right-aligned against `out`.
std::vector<int64_t> broadcast_strides(const Dims& in, const Dims& out);

// Reads an integer tensor (int32/int64/uint*) as int64 values; INVALID_ARGUMENT otherwise.
Result<std::vector<int64_t>> read_ints(const KernelContext& ctx, const Tensor& t);

// Reads a float-ish or integer scalar/tensor as doubles.
std::vector<double> read_doubles(const Tensor& t);

// Calls fn(out_index, in_offsets...) over every element of `out_dims`, with the offsets of
// each input computed from its broadcast strides. Used by element-wise kernels.
template <size_t N, typename Fn>
void for_each_broadcast(const Dims& out_dims, const std::array<std::vector<int64_t>, N>& strides, Fn&& fn) {
  const size_t rank = out_dims.size();
  const int64_t total = numel(out_dims);
  if (total <= 0) return;
  std::vector<int64_t> idx(rank, 0);
  std::array<int64_t, N> off{};
  for (int64_t i = 0; i < total; ++i) {
    fn(i, off);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < out_dims[d]) {
        for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][d] * (out_dims[d] - 1);
      idx[d] = 0;
    }
  }
}

}  // namespace gearbox::ref
