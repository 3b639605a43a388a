// Normalizations: batch_norm (ONNX BatchNormalization, training mode from opset 14),
// layer_norm (LayerNormalization-17), with torch's running-statistics convention, and
// group_norm (a LayerNormalization over each group, so its gradient is LayerNormalization's).
#include <cmath>

#include "frontend/amp/autocast.h"
#include "frontend/graph/trace_hook.h"
#include "frontend/ops/internal.h"

namespace gbx::nn {

namespace {

// Ones or zeros of shape [c] in x's dtype, standing in for an omitted affine parameter.
Tensor filled(const Tensor& x, std::vector<int64_t> shape, double v) {
  return Tensor::full(std::move(shape), v, x.dtype());
}

// Whether a parameter's dtype fits x's: the same, or any float dtype under autocast (which
// gives the op one dtype: gearbox/nn_amp.hpp).
bool dtype_fits(const Tensor& t, const Tensor& x) {
  return t.dtype() == x.dtype() || (autocast_level() != AmpLevel::O0 && t.dtype() != DType::Int64);
}

void check_channel_vector(const Tensor& t, int64_t c, const Tensor& x, const char* what) {
  if (t.defined() && (t.rank() != 1 || t.dim(0) != c || !dtype_fits(t, x)))
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "batch_norm: ", what, " ", t.describe(),
                                     " must be ", dtype_name(x.dtype()), "[", c, "] (C of input ", x.describe(), ")"));
}

// torch's update: running = (1 - m) running + m batch, with the unbiased variance
// (n / (n - 1)) in running_var; in float64 as torch's CPU kernel accumulates, stored in the
// buffer's dtype. Tensor ops, so that a training graph computes it on every run.
void update_running(Tensor& running, const Tensor& batch, double momentum, double correction) {
  auto scalar = [](double v) { return Tensor::full({}, v, DType::Float64); };
  Tensor updated = add(mul(batch.to(DType::Float64), scalar(momentum * correction)),
                       mul(running.to(DType::Float64), scalar(1 - momentum)));
  assign_state(running, updated.to(running.dtype()), "batch_norm's running statistics");
}

}  // namespace

Tensor batch_norm(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight, const Tensor& bias,
                  bool training, double momentum, double eps) {
  if (!x.defined() || x.rank() < 2 || x.dtype() == DType::Int64)
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "batch_norm: input ", x.describe(),
                                     " must be a float tensor [N, C, ...]"));
  const int64_t c = x.dim(1);
  check_channel_vector(running_mean, c, x, "running_mean");
  check_channel_vector(running_var, c, x, "running_var");
  check_channel_vector(weight, c, x, "weight");
  check_channel_vector(bias, c, x, "bias");
  if (running_mean.defined() != running_var.defined())
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT,
                                     "batch_norm: give both running_mean and running_var or neither"));
  if (!(eps > 0) || !(momentum >= 0 && momentum <= 1))
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "batch_norm: eps ", eps,
                                     " must be > 0 and momentum ", momentum, " in [0, 1]"));
  Tensor scale = weight.defined() ? weight : filled(x, {c}, 1.0);
  Tensor shift = bias.defined() ? bias : filled(x, {c}, 0.0);
  const bool batch_stats = training || !running_mean.defined();
  gearbox::AttributeMap attrs{{"epsilon", gearbox::attr_float(static_cast<float>(eps))}};
  if (!batch_stats) return apply1({"BatchNormalization"}, {x, scale, shift, running_mean, running_var}, attrs);
  const int64_t per_channel = c == 0 ? 0 : x.numel() / c;
  if (per_channel < 2)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "batch_norm: input ", x.describe(), " has ",
                                     per_channel, " value(s) per channel; batch statistics need at least 2"));
  // Training mode with momentum 0: ONNX's running outputs (input * momentum + batch * (1 -
  // momentum)) are then exactly the batch mean and (population) variance, which torch's
  // update below needs.
  attrs["training_mode"] = gearbox::attr_int(1);
  attrs["momentum"] = gearbox::attr_float(0.0f);
  std::vector<Tensor> outs =
      apply({"BatchNormalization"}, {x, scale, shift, filled(x, {c}, 0.0), filled(x, {c}, 1.0)}, attrs, 3);
  if (training && running_mean.defined()) {
    NoGradGuard no_grad;
    amp::AutocastSuspended no_autocast;  // the buffers keep their dtype
    const double n = static_cast<double>(per_channel);
    update_running(running_mean, outs[1], momentum, 1.0);
    update_running(running_var, outs[2], momentum, n / (n - 1));
  }
  return outs[0];
}

Tensor layer_norm(const Tensor& x, const std::vector<int64_t>& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  const size_t k = normalized_shape.size();
  bool ok = x.defined() && x.dtype() != DType::Int64 && k >= 1 && x.rank() >= k;
  for (size_t i = 0; ok && i < k; ++i) ok = x.dim(x.rank() - k + i) == normalized_shape[i];
  for (const Tensor* t : {&weight, &bias})
    ok = ok && (!t->defined() || (t->shape() == normalized_shape && dtype_fits(*t, x)));
  if (!ok)
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "layer_norm: input ", x.describe(),
                                     ", weight ", weight.describe(), ", bias ", bias.describe(),
                                     ": the input's last dims, the weight and the bias must all be the normalized "
                                     "shape (",
                                     normalized_shape.size(), " dims)"));
  if (!(eps > 0))
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "layer_norm: eps ", eps, " must be > 0"));
  const int64_t axis = static_cast<int64_t>(x.rank() - k);
  return apply1({"LayerNormalization"}, {x, weight.defined() ? weight : filled(x, normalized_shape, 1.0), bias},
                {{"axis", gearbox::attr_int(axis)}, {"epsilon", gearbox::attr_float(static_cast<float>(eps))}});
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  const bool shape_ok =
      x.defined() && x.dtype() != DType::Int64 && x.rank() >= 2 && num_groups >= 1 && x.dim(1) % num_groups == 0;
  if (!shape_ok)
    throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "group_norm: input ", x.describe(),
                                     " must be a float tensor [N, C, ...] with C divisible by num_groups ",
                                     num_groups));
  const int64_t n = x.dim(0), c = x.dim(1);
  for (const Tensor* t : {&weight, &bias})
    if (t->defined() && (t->rank() != 1 || t->dim(0) != c || !dtype_fits(*t, x)))
      throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "group_norm: weight ", weight.describe(),
                                       " and bias ", bias.describe(), " must be ", dtype_name(x.dtype()), "[", c,
                                       "] (C of input ", x.describe(), ")"));
  const int64_t per_group = x.numel() / (n * num_groups);
  Tensor y =
      reshape(layer_norm(reshape(x, {n, num_groups, per_group}), {per_group}, Tensor(), Tensor(), eps), x.shape());
  // The affine per channel: [C] as [1, C, 1, ...] broadcasts over the batch and positions.
  std::vector<int64_t> channel_shape(x.rank(), 1);
  channel_shape[1] = c;
  if (weight.defined()) y = mul(y, reshape(weight, channel_shape));
  if (bias.defined()) y = add(y, reshape(bias, channel_shape));
  return y;
}

}  // namespace gbx::nn
