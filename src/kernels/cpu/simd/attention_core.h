// The dispatched inner loop of cpu.simd com.gearbox.Attention (attention.cc threads it over
// batch x heads x query blocks; attention_core.cc computes it per instruction set).
#pragma once

#include <cstdint>

namespace gearbox::simd {

// Query rows [row_begin, row_end) of one (batch, head), every operand read in place through
// strides (any Reshape+Transpose of q/k/v/out is a stride pattern, so nothing is packed by
// the caller): query i channel c at q[i * q_row + c * q_ch], key j channel c at
// k[j * k_key + c * k_ch], value j channel d at v[j * v_key + d * v_ch], the mask (null: none)
// of score (i, j) at mask[i * mask_row + j * mask_key] (a zero stride broadcasts), and the
// context of row i channel d goes to out[i * out_row + d * out_ch].
// Scores are q . k * scale + mask, softmax over the keys, times V; rows whose keys are all
// masked with -inf get NaN (0/0), as the reference's Softmax does.
struct AttendRows {
  const float* q;
  int64_t q_row, q_ch;
  const float* k;
  int64_t k_key, k_ch;
  const float* v;
  int64_t v_key, v_ch;
  const float* mask;
  int64_t mask_row, mask_key;
  float* out;
  int64_t out_row, out_ch;
  float scale;
  int64_t row_begin, row_end, dh, sk, dv;
};

// Query rows one block of the inner loop holds on this CPU's instruction set (2 vectors: 32
// on AVX-512); the caller splits rows in multiples of it so no block is computed twice.
int64_t attend_block_rows();
// The Highway targets (bits of hwy's target mask) the inner loop is compiled for, so tests
// can run each one (hwy::SetSupportedTargetsForTest) against the reference.
int64_t attend_compiled_targets();
// Computes a.row_begin..a.row_end; uses a per-thread workspace (safe inside OpenMP regions).
void attend_rows(const AttendRows& a);

}  // namespace gearbox::simd
