// Losses, composed of the ops above (so their gradients come from those ops' builders).
#include "frontend/ops/internal.h"

namespace gbx::nn {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  if (logits.rank() != 2 || targets.rank() != 1 || targets.dim(0) != logits.dim(0))
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "cross_entropy: logits ", logits.describe(),
                                     " and targets ", targets.describe(), ": needs logits [N, C] and targets [N]"));
  if (targets.dtype() != DType::Int64)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INPUT_DTYPE_MISMATCH, "cross_entropy: targets are ",
                                     targets.describe(), ": class ids must be int64"));
  const int64_t n = logits.dim(0), c = logits.dim(1);
  const std::vector<int64_t> ids = targets.to_int64_vector();
  std::vector<double> onehot(static_cast<size_t>(n * c), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= c)
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "cross_entropy: target ", i, " is ",
                                       ids[i], ", outside the ", c, " classes [0, ", c - 1, "]"));
    onehot[i * c + ids[i]] = 1.0;
  }
  Tensor mask = Tensor::from_vector(onehot, {n, c});
  if (logits.dtype() == DType::Float32) mask = Tensor::from_vector(mask.to_float_vector(), {n, c});
  // -mean_i log_softmax(logits)[i, target_i]
  return neg(mean(sum(mul(log_softmax(logits, 1), mask), {1})));
}

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  if (input.shape() != target.shape())
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "mse_loss: input ", input.describe(),
                                     " and target ", target.describe(), " differ in shape"));
  Tensor d = sub(input, target);
  return mean(mul(d, d));
}

}  // namespace gbx::nn
