// Losses, composed of the ops above (so their gradients come from those ops' builders).
#include "frontend/amp/autocast.h"
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
  return {Tensor::from_vector(w, {n, c}).to(like.dtype()), counted};
}

// -sum(log_probs * w) / counted; 0 rows counted gives NaN, as torch's mean over no rows does.
Tensor weighted_nll(const Tensor& log_probs, const std::pair<Tensor, int64_t>& w) {
  return neg(div(sum(mul(log_probs, w.first)), Tensor::full({}, double(w.second), log_probs.dtype())));
}

}  // namespace

// Each loss opens an amp::Float32Region: under O1 and O2 it computes in float32.

Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets, const CrossEntropyOptions& options) {
  amp::Float32Region fp32;
  const Tensor logits = fp32.input(logits_in);
  auto w = target_weights("cross_entropy", logits, targets, options.ignore_index, options.label_smoothing);
  return weighted_nll(log_softmax(logits, 1), w);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) { return cross_entropy(logits, targets, {}); }

Tensor nll_loss(const Tensor& log_probs_in, const Tensor& targets, int64_t ignore_index) {
  amp::Float32Region fp32;
  const Tensor log_probs = fp32.input(log_probs_in);
  return weighted_nll(log_probs, target_weights("nll_loss", log_probs, targets, ignore_index, 0.0));
}

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in) {
  amp::Float32Region fp32;
  const Tensor input = fp32.input(input_in), target = fp32.input(target_in);
  if (input.shape() != target.shape())
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "mse_loss: input ", input.describe(),
                                     " and target ", target.describe(), " differ in shape"));
  Tensor d = sub(input, target);
  return mean(mul(d, d));
}

Tensor l1_loss(const Tensor& input_in, const Tensor& target_in) {
  amp::Float32Region fp32;
  const Tensor input = fp32.input(input_in), target = fp32.input(target_in);
  if (input.shape() != target.shape())
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "l1_loss: input ", input.describe(),
                                     " and target ", target.describe(), " differ in shape"));
  Tensor d = sub(input, target);
  // |d| as relu(d) + relu(-d): its gradient at d = 0 is 0, torch's sign(0).
  return mean(add(relu(d), relu(neg(d))));
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits_in, const Tensor& target_in, const Tensor& pos_weight_in) {
  amp::Float32Region fp32;
  const Tensor logits = fp32.input(logits_in), target = fp32.input(target_in), pos_weight = fp32.input(pos_weight_in);
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
