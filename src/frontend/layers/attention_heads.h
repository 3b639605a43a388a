// The arithmetic of multi-head attention shared by nn::MultiheadAttention and the
// tensor-parallel attention (src/frontend/parallel), which holds only some of the heads.
#pragma once

#include <string>

#include "gearbox/nn.hpp"

namespace gbx::nn {

struct BatchFirstInputs {
  Tensor query, key, value;  // [batch, seq, embed_dim]
};
// Checks query/key/value ([batch, seq, E] with batch_first, else [seq, batch, E]) and the mask
// ([L, S] or undefined); SHAPE_MISMATCH naming `layer` otherwise. Returns them batch-first.
BatchFirstInputs batch_first_attention_inputs(const std::string& layer, const Tensor& query, const Tensor& key,
                                              const Tensor& value, const Tensor& attn_mask, int64_t embed_dim,
                                              bool batch_first);

struct AttendedHeads {
  Tensor attended;  // [batch, L, heads * head_dim], the heads side by side
  Tensor weights;   // [batch, heads, L, S], after softmax (before dropout)
};
// Scaled dot-product attention of `heads` heads of `head_dim` features: in_proj_weight is
// [3 heads head_dim, E], the q, k and v projections stacked (in_proj_bias likewise, or
// undefined); queries are scaled by 1/sqrt(head_dim) before the product, as torch does.
AttendedHeads attend_heads(const BatchFirstInputs& in, const Tensor& in_proj_weight, const Tensor& in_proj_bias,
                           int64_t heads, int64_t head_dim, const Tensor& attn_mask, double dropout_p, bool training);

}  // namespace gbx::nn
