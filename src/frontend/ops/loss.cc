// Losses, composed of the ops above (so their gradients come from those ops' builders).
#include "frontend/ops/internal.h"

namespace gbx::nn {

namespace {

// Per-row, per-class weights w such that the loss is -sum(log_probs * w) / (rows counted):
// (1 - smoothing) on the target class plus smoothing / C on every class, 0 on ignored rows.
// Returns the weights (the dtype of `like`) and the count of rows not ignored.
std::pair<Tensor, int64_t> target_weights(const char* loss, const Tensor& like, const Tensor& targets,
                                          int64_t ignore_index, double smoothing) {
  if (like.rank() != 2 || targets.rank() != 1 || targets.dim(0) != like.dim(0))
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, loss, ": input ", like.describe(),
                                     " and targets ", targets.describe(), ": needs input [N, C] and targets [N]"));
  if (targets.dtype() != DType::Int64)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INPUT_DTYPE_MISMATCH, loss, ": targets are ",
                                     targets.describe(), ": class ids must be int64"));
  if (!(smoothing >= 0 && smoothing <= 1))
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, loss, ": label_smoothing ", smoothing,
                                     " must be in [0, 1]"));
  const int64_t n = like.dim(0), c = like.dim(1);
  const std::vector<int64_t> ids = targets.to_int64_vector();
  std::vector<double> w(static_cast<size_t>(n * c), 0.0);
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] == ignore_index) continue;
    if (ids[i] < 0 || ids[i] >= c)
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, loss, ": target ", i, " is ", ids[i],
                                       ", outside the ", c, " classes [0, ", c - 1, "] (ignore_index is ", ignore_index,
                                       ")"));
    ++counted;
    for (int64_t j = 0; j < c; ++j) w[i * c + j] = smoothing / double(c);
    w[i * c + ids[i]] += 1.0 - smoothing;
  }
  Tensor weights = Tensor::from_vector(w, {n, c});
  if (like.dtype() == DType::Float32) weights = Tensor::from_vector(weights.to_float_vector(), {n, c});
  return {weights, counted};
}

// -sum(log_probs * w) / counted; 0 rows counted gives NaN, as torch's mean over no rows does.
Tensor weighted_nll(const Tensor& log_probs, const std::pair<Tensor, int64_t>& w) {
  return neg(div(sum(mul(log_probs, w.first)), Tensor::full({}, double(w.second), log_probs.dtype())));
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options) {
  auto w = target_weights("cross_entropy", logits, targets, options.ignore_index, options.label_smoothing);
  return weighted_nll(log_softmax(logits, 1), w);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) { return cross_entropy(logits, targets, {}); }

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index) {
  return weighted_nll(log_probs, target_weights("nll_loss", log_probs, targets, ignore_index, 0.0));
}

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  if (input.shape() != target.shape())
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "mse_loss: input ", input.describe(),
                                     " and target ", target.describe(), " differ in shape"));
  Tensor d = sub(input, target);
  return mean(mul(d, d));
}

Tensor l1_loss(const Tensor& input, const Tensor& target) {
  if (input.shape() != target.shape())
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "l1_loss: input ", input.describe(),
                                     " and target ", target.describe(), " differ in shape"));
  Tensor d = sub(input, target);
  // |d| as relu(d) + relu(-d): its gradient at d = 0 is 0, torch's sign(0).
  return mean(add(relu(d), relu(neg(d))));
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, const Tensor& pos_weight) {
  if (logits.shape() != target.shape())
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "binary_cross_entropy_with_logits: logits ",
                                     logits.describe(), " and target ", target.describe(), " differ in shape"));
  if (pos_weight.defined() &&
      (pos_weight.rank() != 1 || logits.rank() < 1 || pos_weight.dim(0) != logits.shape().back()))
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH,
                                     "binary_cross_entropy_with_logits: pos_weight ", pos_weight.describe(),
                                     " must be [C] for logits ", logits.describe()));
  // torch's form: (1 - y) x + lw (log(e^-m + e^(-x-m)) + m) with m = max(-x, 0) and
  // lw = 1 + (pos_weight - 1) y; no exp of a large positive number is taken.
  const Tensor one = Tensor::full({}, 1.0, logits.dtype());
  Tensor m = relu(neg(logits));
  Tensor log_term = add(log(add(exp(neg(m)), exp(sub(neg(logits), m)))), m);
  if (pos_weight.defined()) log_term = mul(add(one, mul(sub(pos_weight, one), target)), log_term);
  return mean(add(mul(sub(one, target), logits), log_term));
}

}  // namespace gbx::nn
