// nn::MultiheadAttention: torch.nn.MultiheadAttention's parameters, initialization and
// arithmetic, written with the framework's ops so that autodiff differentiates it.
#include <cmath>

#include "frontend/layers/attention_heads.h"
#include "frontend/tensor_impl.h"

namespace gbx::nn {

using gearbox::ErrorCode;

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options)
    : embed_dim_(embed_dim), num_heads_(num_heads), opt_(options) {
  if (embed_dim <= 0 || num_heads <= 0 || embed_dim % num_heads != 0)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "MultiheadAttention(", embed_dim, ", ", num_heads,
                                     "): embed_dim must be a positive multiple of num_heads"));
  if (!(options.dropout >= 0 && options.dropout < 1))
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "MultiheadAttention: dropout ", options.dropout,
                                     " must be in [0, 1)"));
  // torch: xavier_uniform_ on the stacked [3E, E] projection (fan_in E, fan_out 3E), zero
  // biases, out_proj's weight as a Linear's.
  in_proj_weight_ = register_parameter("in_proj_weight", Tensor::zeros({3 * embed_dim, embed_dim}));
  init::xavier_uniform_(in_proj_weight_);
  if (opt_.bias) in_proj_bias_ = register_parameter("in_proj_bias", Tensor::zeros({3 * embed_dim}));
  out_proj_ = std::make_shared<Linear>(embed_dim, embed_dim, opt_.bias);
  if (opt_.bias) {
    NoGradGuard no_grad;
    out_proj_->load_state_dict({{"weight", out_proj_->weight()}, {"bias", Tensor::zeros({embed_dim})}});
  }
  register_module("out_proj", out_proj_);
}

BatchFirstInputs batch_first_attention_inputs(const std::string& layer, const Tensor& query, const Tensor& key,
                                              const Tensor& value, const Tensor& attn_mask, int64_t embed_dim,
                                              bool batch_first) {
  for (const Tensor* t : {&query, &key, &value})
    if (!t->defined() || t->rank() != 3 || t->shape()[2] != embed_dim)
      throw_status(gearbox::make_error(ErrorCode::SHAPE_MISMATCH, layer, ": query, key and value must be ",
                                       batch_first ? "[batch, seq, " : "[seq, batch, ", embed_dim, "], got ",
                                       t->defined() ? t->describe() : std::string("an undefined tensor")));
  auto to_batch_first = [batch_first](const Tensor& t) { return batch_first ? t : transpose(t, {1, 0, 2}); };
  BatchFirstInputs in{to_batch_first(query), to_batch_first(key), to_batch_first(value)};
  if (in.key.shape()[0] != in.query.shape()[0] || in.value.shape() != in.key.shape())
    throw_status(gearbox::make_error(ErrorCode::SHAPE_MISMATCH, layer, ": key ", key.describe(), " and value ",
                                     value.describe(), " must agree, and with query ", query.describe(),
                                     " on the batch"));
  const int64_t L = in.query.shape()[1], S = in.key.shape()[1];
  if (attn_mask.defined() && attn_mask.shape() != std::vector<int64_t>{L, S})
    throw_status(gearbox::make_error(ErrorCode::SHAPE_MISMATCH, layer, ": attn_mask ", attn_mask.describe(),
                                     " must be [", L, ", ", S, "] (queries, keys)"));
  return in;
}

AttendedHeads attend_heads(const BatchFirstInputs& in, const Tensor& in_proj_weight, const Tensor& in_proj_bias,
                           int64_t heads, int64_t head_dim, const Tensor& attn_mask, double dropout_p, bool training) {
  const int64_t batch = in.query.shape()[0], L = in.query.shape()[1], width = heads * head_dim;
  // Projection i of the stacked weights (0: q, 1: k, 2: v), split into heads: [batch, heads, seq, D].
  auto project = [&](const Tensor& x, int64_t i) {
    Tensor w = slice(in_proj_weight, 0, i * width, (i + 1) * width);
    Tensor b = in_proj_bias.defined() ? slice(in_proj_bias, 0, i * width, (i + 1) * width) : Tensor();
    return transpose(reshape(linear(x, w, b), {batch, x.shape()[1], heads, head_dim}), {0, 2, 1, 3});
  };
  Tensor q = mul(project(in.query, 0), Tensor::full({1}, 1.0 / std::sqrt(double(head_dim)), in.query.dtype()));
  Tensor k = project(in.key, 1), v = project(in.value, 2);
  Tensor scores = matmul(q, transpose(k, {0, 1, 3, 2}));  // [batch, heads, L, S]
  if (attn_mask.defined()) scores = add(scores, attn_mask);
  AttendedHeads r;
  r.weights = softmax(scores, -1);
  Tensor attended = matmul(dropout(r.weights, dropout_p, training), v);  // [batch, heads, L, D]
  r.attended = reshape(transpose(attended, {0, 2, 1, 3}), {batch, L, width});
  return r;
}

AttentionResult MultiheadAttention::attend(const Tensor& query, const Tensor& key, const Tensor& value,
                                           const Tensor& attn_mask, bool need_weights) {
  BatchFirstInputs in =
      batch_first_attention_inputs("MultiheadAttention", query, key, value, attn_mask, embed_dim_, opt_.batch_first);
  AttendedHeads h = attend_heads(in, in_proj_weight_, in_proj_bias_, num_heads_, embed_dim_ / num_heads_, attn_mask,
                                 opt_.dropout, is_training());
  Tensor out = (*out_proj_)(h.attended);
  AttentionResult r;
  r.output = opt_.batch_first ? out : transpose(out, {1, 0, 2});
  if (need_weights) r.weights = mean(h.weights, {1});  // torch's average_attn_weights
  return r;
}

}  // namespace gbx::nn
