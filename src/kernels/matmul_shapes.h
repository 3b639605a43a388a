// The shapes of a numpy-style MatMul of two tensors of rank >= 2, for the fast engines'
// kernels (cpu.dnnl, cpu.simd), which hand anything else to the reference.
#pragma once

#include <algorithm>
#include <optional>

#include "base/shape.h"
#include "kernels/kernel.h"

namespace gearbox {

struct MatMulShapes {
  Dims a, b, out;  // a and b padded with leading 1s to the output's rank
  int64_t batch_a = 1, batch_b = 1, batch_out = 1;  // products of the batch dims
};

// nullopt when either rank is below 2, the inner dims differ or a batch dim does not
// broadcast: the reference kernel reports those with its error.
inline std::optional<MatMulShapes> matmul_shapes(const Dims& a, const Dims& b) {
  if (a.size() < 2 || b.size() < 2) return std::nullopt;
  const size_t r = std::max(a.size(), b.size());
  MatMulShapes s;
  s.a.assign(r - a.size(), 1);
  s.b.assign(r - b.size(), 1);
  s.a.insert(s.a.end(), a.begin(), a.end());
  s.b.insert(s.b.end(), b.begin(), b.end());
  if (s.a[r - 1] != s.b[r - 2]) return std::nullopt;
  s.out.resize(r);
  for (size_t i = 0; i + 2 < r; ++i) {
    if (s.a[i] != s.b[i] && s.a[i] != 1 && s.b[i] != 1) return std::nullopt;
    s.out[i] = std::max(s.a[i], s.b[i]);
    s.batch_a *= s.a[i];
    s.batch_b *= s.b[i];
    s.batch_out *= s.out[i];
  }
  s.out[r - 2] = s.a[r - 2];
  s.out[r - 1] = s.b[r - 1];
  return s;
}

// The shapes of a fast f32 MatMul of the node's inputs 0 and 1: both non-empty f32 tensors
// of rank >= 2 that broadcast; nullopt (run the reference) otherwise.
inline std::optional<MatMulShapes> f32_matmul_shapes(const KernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1) || !ctx.input_value(0).is_tensor() || !ctx.input_value(1).is_tensor())
    return std::nullopt;
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != DType::F32 || b.dtype() != DType::F32 || a.numel() == 0 || b.numel() == 0) return std::nullopt;
  return matmul_shapes(a.dims(), b.dims());
}

}  // namespace gearbox
