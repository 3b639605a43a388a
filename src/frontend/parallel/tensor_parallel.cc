// Tensor parallelism (Megatron-LM's column- and row-parallel Linear) on the comm layer. The
// collectives are not ops the dispatcher runs, so each region function records itself on the
// tape with its own backward (autodiff/tape.h: apply_function), the way torch's Megatron code
// uses autograd.Function.
#include <cmath>

#include "comm/communicator.h"
#include "frontend/autodiff/tape.h"
#include "frontend/layers/attention_heads.h"
#include "frontend/tensor_impl.h"
#include "gearbox/nn_distributed.hpp"

namespace gbx::nn {

using gearbox::ErrorCode;

namespace {

// The sum over the group of every rank's x (a new tensor; x is left alone).
Tensor allreduce_sum(const Tensor& x, ProcessGroup& group) {
  gearbox::Tensor v = value_of(x, "a tensor-parallel region's input").clone();
  throw_if_error(group.communicator().allreduce(v));
  return wrap(std::move(v));
}

// Every rank's x concatenated on `axis`, in rank order.
Tensor allgather_axis(const Tensor& x, ProcessGroup& group, int64_t axis) {
  gearbox::Tensor stacked;  // [size, x.dims...]
  throw_if_error(group.communicator().allgather(value_of(x, "a parallel region's input"), stacked));
  const std::vector<int64_t> dims = x.shape();
  const int64_t k = int64_t(dims.size());
  NoGradGuard no_grad;
  // [size, d0, ..., dk-1] -> [d0, .., d(axis-1), size, d(axis), ...] -> merge size into d(axis)
  std::vector<int64_t> perm;
  for (int64_t a = 1; a <= axis; ++a) perm.push_back(a);
  perm.push_back(0);
  for (int64_t a = axis + 1; a <= k; ++a) perm.push_back(a);
  std::vector<int64_t> shape = dims;
  shape[size_t(axis)] *= group.size();
  return reshape(transpose(wrap(std::move(stacked)), perm), shape);
}

void check_splits(const Tensor& x, const ProcessGroup& group, int64_t axis, const char* what) {
  if (x.rank() <= size_t(axis) || x.shape()[size_t(axis)] % group.size() != 0)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, what, ": axis ", axis, " of ", x.describe(),
                                     " does not split into ", group.size(), " equal slices"));
}

// This rank's equal slice of x's `axis`.
Tensor own_slice(const Tensor& x, const ProcessGroup& group, int64_t axis, const char* what) {
  check_splits(x, group, axis, what);
  const int64_t n = x.shape()[size_t(axis)] / group.size();
  return slice(x, axis, group.rank() * n, (group.rank() + 1) * n);
}

// The sum over the group of x, of which this rank keeps its slice of `axis` (a reduce_scatter).
Tensor reduce_scatter_axis(const Tensor& x, ProcessGroup& group, int64_t axis, const char* what) {
  check_splits(x, group, axis, what);
  std::vector<int64_t> dims = x.shape();
  const int64_t p = group.size(), n = dims[size_t(axis)] / p;
  gearbox::Tensor chunks;
  {
    NoGradGuard no_grad;
    // [.., p n, ..] -> [.., p, n, ..] -> [p, .., n, ..]: the rank chunks contiguous, in order.
    std::vector<int64_t> split = dims;
    split[size_t(axis)] = n;
    split.insert(split.begin() + axis, p);
    std::vector<int64_t> perm{axis};
    for (int64_t a = 0; a < int64_t(split.size()); ++a)
      if (a != axis) perm.push_back(a);
    chunks = value_of(transpose(reshape(x, split), perm), what).clone();
  }
  gearbox::Tensor mine;
  throw_if_error(group.communicator().reduce_scatter(chunks, mine));
  dims[size_t(axis)] = n;
  NoGradGuard no_grad;
  return reshape(wrap(std::move(mine)), dims);
}

void check_group(const std::shared_ptr<ProcessGroup>& group, const char* layer) {
  if (!group) throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, layer, " needs a process group"));
}

void check_split(int64_t features, const std::shared_ptr<ProcessGroup>& group, const char* layer, const char* which) {
  if (features <= 0 || features % group->size() != 0)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, layer, ": ", which, " ", features,
                                     " must be a positive multiple of the group size ", group->size()));
}

}  // namespace

Tensor copy_to_tensor_parallel_region(const Tensor& x, const std::shared_ptr<ProcessGroup>& group) {
  check_group(group, "copy_to_tensor_parallel_region");
  return apply_function("CopyToTensorParallelRegion", {x}, {x}, [group](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].defined() ? allreduce_sum(g[0], *group) : Tensor()};
  })[0];
}

Tensor reduce_from_tensor_parallel_region(const Tensor& x, const std::shared_ptr<ProcessGroup>& group) {
  check_group(group, "reduce_from_tensor_parallel_region");
  return apply_function("ReduceFromTensorParallelRegion", {x}, {allreduce_sum(x, *group)},
                        [](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; })[0];
}

Tensor gather_from_tensor_parallel_region(const Tensor& x, const std::shared_ptr<ProcessGroup>& group) {
  check_group(group, "gather_from_tensor_parallel_region");
  const int64_t last = int64_t(x.rank()) - 1;
  return apply_function("GatherFromTensorParallelRegion", {x}, {allgather_axis(x, *group, last)},
                        [group, last](const std::vector<Tensor>& g) {
                          if (!g[0].defined()) return std::vector<Tensor>{Tensor()};
                          return std::vector<Tensor>{own_slice(g[0], *group, last, "a gathered gradient")};
                        })[0];
}

Tensor scatter_to_tensor_parallel_region(const Tensor& x, const std::shared_ptr<ProcessGroup>& group) {
  check_group(group, "scatter_to_tensor_parallel_region");
  Tensor mine;
  {
    NoGradGuard no_grad;
    mine = own_slice(x, *group, int64_t(x.rank()) - 1, "scatter_to_tensor_parallel_region");
  }
  return apply_function("ScatterToTensorParallelRegion", {x}, {mine}, [group](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].defined() ? allgather_axis(g[0], *group, int64_t(g[0].rank()) - 1) : Tensor()};
  })[0];
}

Tensor scatter_to_sequence_parallel_region(const Tensor& x, const std::shared_ptr<ProcessGroup>& group) {
  check_group(group, "scatter_to_sequence_parallel_region");
  Tensor mine;
  {
    NoGradGuard no_grad;
    mine = own_slice(x, *group, 1, "scatter_to_sequence_parallel_region");
  }
  return apply_function("ScatterToSequenceParallelRegion", {x}, {mine}, [group](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].defined() ? allgather_axis(g[0], *group, 1) : Tensor()};
  })[0];
}

Tensor gather_from_sequence_parallel_region(const Tensor& x, const std::shared_ptr<ProcessGroup>& group,
                                            bool consumer_is_tensor_parallel) {
  check_group(group, "gather_from_sequence_parallel_region");
  if (x.rank() < 2)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "gather_from_sequence_parallel_region: ",
                                     x.describe(), " has no sequence axis (axis 1)"));
  return apply_function(
      "GatherFromSequenceParallelRegion", {x}, {allgather_axis(x, *group, 1)},
      [group, consumer_is_tensor_parallel](const std::vector<Tensor>& g) {
        if (!g[0].defined()) return std::vector<Tensor>{Tensor()};
        // Replicated consumers each hold the whole gradient already: summing
        // them would scale it by the group size.
        if (!consumer_is_tensor_parallel)
          return std::vector<Tensor>{own_slice(g[0], *group, 1, "a sequence-parallel gradient")};
        return std::vector<Tensor>{reduce_scatter_axis(g[0], *group, 1, "a sequence-parallel gradient")};
      })[0];
}

Tensor reduce_scatter_to_sequence_parallel_region(const Tensor& x, const std::shared_ptr<ProcessGroup>& group) {
  check_group(group, "reduce_scatter_to_sequence_parallel_region");
  return apply_function("ReduceScatterToSequenceParallelRegion", {x},
                        {reduce_scatter_axis(x, *group, 1, "reduce_scatter_to_sequence_parallel_region")},
                        [group](const std::vector<Tensor>& g) {
                          return std::vector<Tensor>{g[0].defined() ? allgather_axis(g[0], *group, 1) : Tensor()};
                        })[0];
}

void allreduce_sequence_parallel_gradients(const std::vector<Tensor>& params,
                                           const std::shared_ptr<ProcessGroup>& group) {
  check_group(group, "allreduce_sequence_parallel_gradients");
  for (const Tensor& p : params) {
    // Every rank takes part in every allreduce, with zeros for a gradient it did not get.
    Tensor g = p.grad();
    gearbox::Tensor sum = g.defined() ? value_of(g, "a gradient").clone()
                                      : value_of(Tensor::zeros(p.shape(), p.dtype()), "zeros").clone();
    throw_if_error(group->communicator().allreduce(sum));
    p.impl()->grad = std::move(sum);
  }
}

ColumnParallelLinear::ColumnParallelLinear(int64_t in_features, int64_t out_features,
                                           std::shared_ptr<ProcessGroup> group, ColumnParallelLinearOptions options)
    : group_(std::move(group)), opt_(options) {
  check_group(group_, "ColumnParallelLinear");
  check_split(out_features, group_, "ColumnParallelLinear", "out_features");
  if (in_features <= 0)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "ColumnParallelLinear: in_features ", in_features,
                                     " must be positive"));
  // The full weight and bias drawn as nn::Linear draws them (same bound, same order), then this
  // rank's rows.
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  const int64_t rows = out_features / group_->size(), first = group_->rank() * rows;
  Tensor w = Tensor::uniform({out_features, in_features}, -bound, bound);
  weight_ = register_parameter("weight", slice(w, 0, first, first + rows).clone());
  if (opt_.bias) {
    Tensor b = Tensor::uniform({out_features}, -bound, bound);
    bias_ = register_parameter("bias", slice(b, 0, first, first + rows).clone());
  }
}

Tensor ColumnParallelLinear::forward(const Tensor& x) {
  Tensor in = opt_.sequence_parallel ? gather_from_sequence_parallel_region(x, group_)
                                     : copy_to_tensor_parallel_region(x, group_);
  Tensor y = linear(in, weight_, bias_);
  return opt_.gather_output ? gather_from_tensor_parallel_region(y, group_) : y;
}

RowParallelLinear::RowParallelLinear(int64_t in_features, int64_t out_features, std::shared_ptr<ProcessGroup> group,
                                     RowParallelLinearOptions options)
    : group_(std::move(group)), opt_(options) {
  check_group(group_, "RowParallelLinear");
  check_split(in_features, group_, "RowParallelLinear", "in_features");
  if (out_features <= 0)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "RowParallelLinear: out_features ", out_features,
                                     " must be positive"));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  const int64_t cols = in_features / group_->size(), first = group_->rank() * cols;
  Tensor w = Tensor::uniform({out_features, in_features}, -bound, bound);
  weight_ = register_parameter("weight", slice(w, 1, first, first + cols).clone());
  if (opt_.bias) bias_ = register_parameter("bias", Tensor::uniform({out_features}, -bound, bound));
}

Tensor RowParallelLinear::forward(const Tensor& x) {
  Tensor in = opt_.input_is_parallel ? x : scatter_to_tensor_parallel_region(x, group_);
  Tensor partial = linear(in, weight_);
  Tensor y = opt_.sequence_parallel ? reduce_scatter_to_sequence_parallel_region(partial, group_)
                                    : reduce_from_tensor_parallel_region(partial, group_);
  // The bias after the sum: added once, not once per rank.
  return bias_.defined() ? add(y, bias_) : y;
}

}  // namespace gbx::nn

namespace gbx::nn {

ParallelMultiheadAttention::ParallelMultiheadAttention(int64_t embed_dim, int64_t num_heads,
                                                       std::shared_ptr<ProcessGroup> group,
                                                       MultiheadAttentionOptions options, bool sequence_parallel)
    : group_(std::move(group)), embed_dim_(embed_dim), opt_(options), sequence_parallel_(sequence_parallel) {
  check_group(group_, "ParallelMultiheadAttention");
  if (embed_dim <= 0 || num_heads <= 0 || embed_dim % num_heads != 0)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "ParallelMultiheadAttention(", embed_dim, ", ",
                                     num_heads, "): embed_dim must be a positive multiple of num_heads"));
  check_split(num_heads, group_, "ParallelMultiheadAttention", "num_heads");
  local_heads_ = num_heads / group_->size();
  // As MultiheadAttention draws them: the stacked projection (Xavier bound), then out_proj as a
  // Linear(E, E) (RowParallelLinear draws the same), its bias then zeroed.
  const double bound = std::sqrt(6.0 / double(embed_dim + 3 * embed_dim));
  Tensor full = Tensor::uniform({3 * embed_dim, embed_dim}, -bound, bound);
  const int64_t width = local_heads_ * (embed_dim / num_heads), first = group_->rank() * width;
  std::vector<Tensor> rows;
  for (int64_t i = 0; i < 3; ++i) rows.push_back(slice(full, 0, i * embed_dim + first, i * embed_dim + first + width));
  in_proj_weight_ = register_parameter("in_proj_weight", concat(rows, 0));
  if (opt_.bias) in_proj_bias_ = register_parameter("in_proj_bias", Tensor::zeros({3 * width}));
  out_proj_ = std::make_shared<RowParallelLinear>(
      embed_dim, embed_dim, group_,
      RowParallelLinearOptions{.bias = opt_.bias, .input_is_parallel = true, .sequence_parallel = sequence_parallel});
  if (opt_.bias) out_proj_->load_state_dict({{"weight", out_proj_->weight()}, {"bias", Tensor::zeros({embed_dim})}});
  register_module("out_proj", out_proj_);
}

Tensor ParallelMultiheadAttention::attend(const Tensor& query, const Tensor& key, const Tensor& value,
                                          const Tensor& attn_mask) {
  // Under sequence parallelism the mask is for the whole sequence: checked once it is gathered.
  BatchFirstInputs in =
      batch_first_attention_inputs("ParallelMultiheadAttention", query, key, value,
                                   sequence_parallel_ ? Tensor() : attn_mask, embed_dim_, opt_.batch_first);
  // Each distinct input enters the parallel region once: self-attention allreduces (or
  // reduce-scatters) its input's gradient once, not three times.
  auto enter = [this](const Tensor& t) {
    return sequence_parallel_ ? gather_from_sequence_parallel_region(t, group_)
                              : copy_to_tensor_parallel_region(t, group_);
  };
  in.query = enter(in.query);
  in.key = key.impl() == query.impl() ? in.query : enter(in.key);
  in.value = value.impl() == query.impl() ? in.query : value.impl() == key.impl() ? in.key : enter(in.value);
  if (sequence_parallel_ && attn_mask.defined())
    batch_first_attention_inputs("ParallelMultiheadAttention", in.query, in.key, in.value, attn_mask, embed_dim_, true);
  AttendedHeads h = attend_heads(in, in_proj_weight_, in_proj_bias_, local_heads_,
                                 embed_dim_ / (local_heads_ * group_->size()), attn_mask, opt_.dropout, is_training());
  Tensor out = (*out_proj_)(h.attended);
  return opt_.batch_first ? out : transpose(out, {1, 0, 2});
}

}  // namespace gbx::nn

namespace gbx::nn {

namespace {

// Ids of any shape, checked to lie in [0, vocab) (INVALID_ARGUMENT naming `what` otherwise).
std::vector<int64_t> checked_ids(const Tensor& ids, int64_t vocab, const char* what) {
  if (!ids.defined() || ids.dtype() != DType::Int64)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, what, " takes int64 ids, not ",
                                     ids.defined() ? ids.describe() : std::string("an undefined tensor")));
  std::vector<int64_t> v = ids.to_int64_vector();
  for (int64_t id : v)
    if (id < 0 || id >= vocab)
      throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, what, ": id ", id, " is outside [0, ", vocab, ")"));
  return v;
}

}  // namespace

VocabParallelEmbedding::VocabParallelEmbedding(int64_t num_embeddings, int64_t embedding_dim,
                                               std::shared_ptr<ProcessGroup> group)
    : group_(std::move(group)), num_embeddings_(num_embeddings) {
  check_group(group_, "VocabParallelEmbedding");
  check_split(num_embeddings, group_, "VocabParallelEmbedding", "num_embeddings");
  if (embedding_dim <= 0)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "VocabParallelEmbedding: embedding_dim ",
                                     embedding_dim, " must be positive"));
  const int64_t rows = num_embeddings / group_->size();
  first_ = group_->rank() * rows;
  Tensor full = Tensor::randn({num_embeddings, embedding_dim});  // as nn::Embedding draws it
  weight_ = register_parameter("weight", slice(full, 0, first_, first_ + rows).clone());
}

Tensor VocabParallelEmbedding::forward(const Tensor& ids) {
  const std::vector<int64_t> all = checked_ids(ids, num_embeddings_, "VocabParallelEmbedding");
  const int64_t rows = weight_.dim(0);
  // Ids elsewhere look up local row 0 and are zeroed by the mask (so their row gets no gradient).
  std::vector<int64_t> local(all.size());
  std::vector<float> mask(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const bool mine = all[i] >= first_ && all[i] < first_ + rows;
    local[i] = mine ? all[i] - first_ : 0;
    mask[i] = mine ? 1.0f : 0.0f;
  }
  std::vector<int64_t> mask_shape = ids.shape();
  mask_shape.push_back(1);
  Tensor looked_up =
      mul(embedding(Tensor::from_vector(local, ids.shape()), weight_), Tensor::from_vector(mask, mask_shape));
  return reduce_from_tensor_parallel_region(looked_up, group_);
}

Tensor vocab_parallel_cross_entropy(const Tensor& local_logits, const Tensor& targets,
                                    const std::shared_ptr<ProcessGroup>& group) {
  check_group(group, "vocab_parallel_cross_entropy");
  if (!local_logits.defined() || local_logits.rank() != 2)
    throw_status(gearbox::make_error(ErrorCode::SHAPE_MISMATCH,
                                     "vocab_parallel_cross_entropy: logits must be [rows, classes / group size], got ",
                                     local_logits.defined() ? local_logits.describe() : std::string("undefined")));
  // The gradient is built from float32 values (the host arithmetic is double either way).
  if (local_logits.dtype() != DType::Float32)
    throw_status(gearbox::make_error(ErrorCode::INPUT_DTYPE_MISMATCH, "vocab_parallel_cross_entropy: logits are ",
                                     local_logits.describe(), "; float32 logits are supported"));
  const int64_t n = local_logits.dim(0), c = local_logits.dim(1), first = group->rank() * c;
  if (!targets.defined() || targets.shape() != std::vector<int64_t>{n})
    throw_status(gearbox::make_error(ErrorCode::SHAPE_MISMATCH, "vocab_parallel_cross_entropy: targets must be [", n,
                                     "], got ", targets.defined() ? targets.describe() : std::string("undefined")));
  const std::vector<int64_t> t = checked_ids(targets, c * group->size(), "vocab_parallel_cross_entropy");
  gearbox::comm::Communicator& comm = group->communicator();
  // In double on the host: three [n] vectors cross the group, the logits stay where they are.
  const std::vector<double> z = local_logits.to_double_vector();
  gearbox::Tensor row_max(gearbox::DType::F32, {n}), sum_exp(gearbox::DType::F32, {n}),
      target_logit(gearbox::DType::F32, {n});
  float* mx = row_max.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    double m = z[size_t(i * c)];
    for (int64_t j = 1; j < c; ++j) m = std::max(m, z[size_t(i * c + j)]);
    mx[i] = float(m);
  }
  throw_if_error(comm.allreduce(row_max, gearbox::comm::ReduceOp::Max));
  float* se = sum_exp.data<float>();
  float* tl = target_logit.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t j = 0; j < c; ++j) s += std::exp(z[size_t(i * c + j)] - mx[i]);
    se[i] = float(s);
    const int64_t local = t[size_t(i)] - first;
    tl[i] = local >= 0 && local < c ? float(z[size_t(i * c + local)] - mx[i]) : 0.0f;
  }
  throw_if_error(comm.allreduce(sum_exp));
  throw_if_error(comm.allreduce(target_logit));
  double loss = 0;
  for (int64_t i = 0; i < n; ++i) loss += std::log(double(se[i])) - double(tl[i]);
  loss /= double(n);
  Tensor value = Tensor::full({}, loss);
  // d loss / d z_ij = (softmax_ij - [j is the target]) / n, from this rank's logits alone.
  std::vector<double> softmax(z.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) softmax[size_t(i * c + j)] = std::exp(z[size_t(i * c + j)] - mx[i]) / double(se[i]);
  return apply_function("VocabParallelCrossEntropy", {local_logits}, {value},
                        [softmax = std::move(softmax), t, first, n, c](const std::vector<Tensor>& g) {
                          if (!g[0].defined()) return std::vector<Tensor>{Tensor()};
                          const double scale = g[0].item() / double(n);
                          std::vector<float> d(softmax.size());
                          for (int64_t i = 0; i < n; ++i)
                            for (int64_t j = 0; j < c; ++j)
                              d[size_t(i * c + j)] =
                                  float((softmax[size_t(i * c + j)] - (t[size_t(i)] - first == j ? 1.0 : 0.0)) * scale);
                          return std::vector<Tensor>{Tensor::from_vector(d, {n, c})};
                        })[0];
}

}  // namespace gbx::nn
