// nn::TransformerEncoderLayer: torch.nn.TransformerEncoderLayer's submodules and both of its
// orders (post-norm, torch's default, and norm_first).
#include "frontend/tensor_impl.h"

namespace gbx::nn {

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerEncoderLayerOptions options)
    : opt_(options) {
  if (options.dim_feedforward <= 0)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "TransformerEncoderLayer: dim_feedforward ",
                                     options.dim_feedforward, " must be positive"));
  if (!(options.dropout >= 0 && options.dropout < 1))
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "TransformerEncoderLayer: dropout ",
                                     options.dropout, " must be in [0, 1)"));
  self_attn_ = std::make_shared<MultiheadAttention>(
      d_model, nhead, MultiheadAttentionOptions{.dropout = options.dropout, .batch_first = options.batch_first});
  linear1_ = std::make_shared<Linear>(d_model, options.dim_feedforward);
  linear2_ = std::make_shared<Linear>(options.dim_feedforward, d_model);
  norm1_ = std::make_shared<LayerNorm>(std::vector<int64_t>{d_model}, options.layer_norm_eps);
  norm2_ = std::make_shared<LayerNorm>(std::vector<int64_t>{d_model}, options.layer_norm_eps);
  register_module("self_attn", self_attn_);
  register_module("linear1", linear1_);
  register_module("linear2", linear2_);
  register_module("norm1", norm1_);
  register_module("norm2", norm2_);
}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x, const Tensor& mask) {
  return dropout(self_attn_->attend(x, x, x, mask, /*need_weights=*/false).output, opt_.dropout, is_training());
}

Tensor TransformerEncoderLayer::feed_forward_block(const Tensor& x) {
  Tensor h = (*linear1_)(x);
  h = dropout(opt_.gelu ? gelu(h) : relu(h), opt_.dropout, is_training());
  return dropout((*linear2_)(h), opt_.dropout, is_training());
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask) {
  Tensor x = src;
  if (opt_.norm_first) {
    x = add(x, self_attention_block((*norm1_)(x), src_mask));
    return add(x, feed_forward_block((*norm2_)(x)));
  }
  x = (*norm1_)(add(x, self_attention_block(x, src_mask)));
  return (*norm2_)(add(x, feed_forward_block(x)));
}

}  // namespace gbx::nn
