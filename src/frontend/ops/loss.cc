// Losses, composed of the ops above (so their gradients come from those ops' builders).
#include "frontend/amp/autocast.h"
#include "frontend/graph/trace_hook.h"
#include "frontend/ops/internal.h"

namespace gbx::nn {

namespace {

// The negative log-likelihood of class-id targets, as tensor ops so that a graph computes it
// from its inputs (the ids are never read on the host while tracing):
//   -sum over kept rows i of [(1 - s) lp[i, t_i] + s / C sum_j lp[i, j]] / (kept rows),
// a row kept when t_i != ignore_index; 0 rows kept gives NaN, as torch's mean over no rows.
Tensor targets_nll(const char* loss, const Tensor& log_probs, const Tensor& targets, int64_t ignore_index,
                   double smoothing) {
  if (log_probs.rank() != 2 || targets.rank() != 1 || targets.dim(0) != log_probs.dim(0))
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, loss, ": input ", log_probs.describe(),
                                     " and targets ", targets.describe(), ": needs input [N, C] and targets [N]"));
  if (targets.dtype() != DType::Int64)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INPUT_DTYPE_MISMATCH, loss, ": targets are ",
                                     targets.describe(), ": class ids must be int64"));
  if (!(smoothing >= 0 && smoothing <= 1))
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, loss, ": label_smoothing ", smoothing,
                                     " must be in [0, 1]"));
  const int64_t n = log_probs.dim(0), c = log_probs.dim(1);
  // Eagerly the ids are checked here, with the row in the message; a graph's GatherElements
  // checks them at run time (the offset below makes a negative id out of its range too).
  if (!active_trace_hook()) {
    const std::vector<int64_t> ids = targets.to_int64_vector();
    for (int64_t i = 0; i < n; ++i)
      if (ids[i] != ignore_index && (ids[i] < 0 || ids[i] >= c))
        throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, loss, ": target ", i, " is ", ids[i],
                                         ", outside the ", c, " classes [0, ", c - 1, "] (ignore_index is ",
                                         ignore_index, ")"));
  }
  // Comparisons give bool tensors, which nn::DType does not name: cast by the ONNX op.
  auto cast = [](const Tensor& flags, DType to) {
    return apply1({"Cast"}, {flags}, {{"to", gearbox::attr_int(static_cast<int64_t>(to_internal(to)))}});
  };
  Tensor kept = apply1({"Not"}, {apply1({"Equal"}, {targets, int64s({ignore_index})})});
  Tensor ids = mul(targets, cast(kept, DType::Int64));  // an ignored row reads class 0, weighted 0
  Tensor negative = cast(apply1({"Less"}, {ids, int64s({0})}), DType::Int64);
  ids = reshape(add(ids, mul(negative, int64s({int64_t{1} << 62}))), {n, 1});
  Tensor weight = reshape(cast(kept, log_probs.dtype()), {n, 1});
  Tensor per_row = apply1({"GatherElements"}, {log_probs, ids}, {{"axis", gearbox::attr_int(1)}});
  if (smoothing > 0)
    per_row = add(mul(per_row, scalar_like(log_probs, 1 - smoothing)),
                  mul(sum(log_probs, {1}, true), scalar_like(log_probs, smoothing / double(c))));
  return neg(div(sum(mul(per_row, weight)), sum(weight)));
}

}  // namespace

// Each loss opens an amp::Float32Region: under O1 and O2 it computes in float32.

Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets, const CrossEntropyOptions& options) {
  amp::Float32Region fp32;
  const Tensor logits = fp32.input(logits_in);
  return targets_nll("cross_entropy", log_softmax(logits, 1), targets, options.ignore_index, options.label_smoothing);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) { return cross_entropy(logits, targets, {}); }

Tensor nll_loss(const Tensor& log_probs_in, const Tensor& targets, int64_t ignore_index) {
  amp::Float32Region fp32;
  const Tensor log_probs = fp32.input(log_probs_in);
  return targets_nll("nll_loss", log_probs, targets, ignore_index, 0.0);
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
