// Rotary position embedding of one head vector, shared by RotaryEmbedding and
// GroupQueryAttention's do_rotary (both ONNX Runtime contrib ops turn heads the same way).
#pragma once

#include <cstdint>

namespace gearbox::ref {

// Turns the first 2 * half values of x in place by the cache rows cos and sin (half values
// each): the halves x[i], x[i + half] (interleaved = false) or the pairs x[2i], x[2i + 1].
inline void rotate_head(double* x, const double* cos, const double* sin, int64_t half, bool interleaved) {
  for (int64_t i = 0; i < half; ++i) {
    const int64_t a = interleaved ? 2 * i : i, z = interleaved ? 2 * i + 1 : i + half;
    const double xa = x[a], xz = x[z];
    x[a] = xa * cos[i] - xz * sin[i];
    x[z] = xz * cos[i] + xa * sin[i];
  }
}

}  // namespace gearbox::ref
