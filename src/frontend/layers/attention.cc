// nn::MultiheadAttention: torch.nn.MultiheadAttention's parameters, initialization and
// arithmetic, written with the framework's ops so that autodiff differentiates it.
#include <cmath>

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
  const double bound = std::sqrt(6.0 / double(embed_dim + 3 * embed_dim));
  in_proj_weight_ = register_parameter("in_proj_weight", Tensor::uniform({3 * embed_dim, embed_dim}, -bound, bound));
  if (opt_.bias) in_proj_bias_ = register_parameter("in_proj_bias", Tensor::zeros({3 * embed_dim}));
  out_proj_ = std::make_shared<Linear>(embed_dim, embed_dim, opt_.bias);
  if (opt_.bias) {
    NoGradGuard no_grad;
    out_proj_->load_state_dict({{"weight", out_proj_->weight()}, {"bias", Tensor::zeros({embed_dim})}});
  }
  register_module("out_proj", out_proj_);
}

AttentionResult MultiheadAttention::attend(const Tensor& query, const Tensor& key, const Tensor& value,
                                           const Tensor& attn_mask, bool need_weights) {
  for (const Tensor* t : {&query, &key, &value})
    if (!t->defined() || t->rank() != 3 || t->shape()[2] != embed_dim_)
      throw_status(gearbox::make_error(ErrorCode::SHAPE_MISMATCH, "MultiheadAttention: query, key and value must be ",
                                       opt_.batch_first ? "[batch, seq, " : "[seq, batch, ", embed_dim_, "], got ",
                                       t->defined() ? t->describe() : std::string("an undefined tensor")));
  // Batch first from here on.
  auto batch_first = [this](const Tensor& t) { return opt_.batch_first ? t : transpose(t, {1, 0, 2}); };
  const Tensor q_in = batch_first(query), k_in = batch_first(key), v_in = batch_first(value);
  const int64_t batch = q_in.shape()[0], L = q_in.shape()[1], S = k_in.shape()[1];
  if (k_in.shape()[0] != batch || v_in.shape() != k_in.shape())
    throw_status(gearbox::make_error(ErrorCode::SHAPE_MISMATCH, "MultiheadAttention: key ", key.describe(),
                                     " and value ", value.describe(), " must agree, and with query ", query.describe(),
                                     " on the batch"));
  if (attn_mask.defined() && attn_mask.shape() != std::vector<int64_t>{L, S})
    throw_status(gearbox::make_error(ErrorCode::SHAPE_MISMATCH, "MultiheadAttention: attn_mask ", attn_mask.describe(),
                                     " must be [", L, ", ", S, "] (queries, keys)"));
  const int64_t E = embed_dim_, H = num_heads_, D = E / H;

  // Projection i of the stacked in_proj (0: q, 1: k, 2: v), split into heads: [batch, H, seq, D].
  auto project = [&](const Tensor& x, int64_t i) {
    Tensor w = slice(in_proj_weight_, 0, i * E, (i + 1) * E);
    Tensor b = in_proj_bias_.defined() ? slice(in_proj_bias_, 0, i * E, (i + 1) * E) : Tensor();
    return transpose(reshape(linear(x, w, b), {batch, x.shape()[1], H, D}), {0, 2, 1, 3});
  };
  // torch scales the queries by 1/sqrt(D) before the product.
  Tensor q = mul(project(q_in, 0), Tensor::full({1}, 1.0 / std::sqrt(double(D)), query.dtype()));
  Tensor k = project(k_in, 1), v = project(v_in, 2);
  Tensor scores = matmul(q, transpose(k, {0, 1, 3, 2}));  // [batch, H, L, S]
  if (attn_mask.defined()) scores = add(scores, attn_mask);
  Tensor weights = softmax(scores, -1);
  Tensor attended = matmul(dropout(weights, opt_.dropout, is_training()), v);  // [batch, H, L, D]
  Tensor out = (*out_proj_)(reshape(transpose(attended, {0, 2, 1, 3}), {batch, L, E}));
  AttentionResult r;
  r.output = opt_.batch_first ? out : transpose(out, {1, 0, 2});
  if (need_weights) r.weights = mean(weights, {1});  // torch's average_attn_weights
  return r;
}

}  // namespace gbx::nn
