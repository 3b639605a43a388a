// Loss operators (reference): NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
// (opsets 12-13), with optional class weights, ignore_index and reduction none/sum/mean.
//
// Both share one core: given log-probabilities [N, C, D] (D = product of the trailing dims),
// loss[n,d] = -w[t] * logp[n, t, d] with t = target[n,d]; an ignored target contributes 0
// and has weight 0. "mean" divides by the sum of the weights actually used (which, without
// weights, is the number of non-ignored targets), as the ONNX reference does.
#include <cmath>
#include <optional>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

struct LossShape {
  int64_t n = 0, c = 0, d = 1;
};

Result<LossShape> check_shapes(const KernelContext& ctx, const Tensor& x, const Tensor& target) {
  if (x.rank() < 2) return ctx.error(ErrorCode::SHAPE_MISMATCH, "input must have rank >= 2, got ", describe(x));
  if (!is_integer(target.dtype()))
    return ctx.error(ErrorCode::DTYPE_UNSUPPORTED, "target must be an integer tensor, got ", describe(target));
  Dims want{x.dim(0)};
  for (size_t i = 2; i < x.rank(); ++i) want.push_back(x.dim(i));
  if (target.dims() != want)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "target shape ", to_string(target.dims()), " must be ", to_string(want),
                     " for input ", describe(x));
  LossShape s;
  s.n = x.dim(0);
  s.c = x.dim(1);
  for (size_t i = 2; i < x.rank(); ++i) s.d *= x.dim(i);
  return s;
}

// Computes the loss from log-probabilities and sets output 0.
Status nll_core(KernelContext& ctx, DType out_dtype, const LossShape& s, const std::vector<double>& logp,
                const Tensor& target, const Dims& target_dims, int weight_input) {
  GBX_ASSIGN_OR_RETURN(std::vector<int64_t> t, read_ints(ctx, target));
  std::optional<std::vector<double>> w;
  if (ctx.has_input(static_cast<size_t>(weight_input))) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(static_cast<size_t>(weight_input)));
    const Tensor& wt = ctx.input(static_cast<size_t>(weight_input));
    if (wt.rank() != 1 || wt.dim(0) != s.c)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "weight must be [", s.c, "], got ", describe(wt));
    w = read_doubles(wt);
  }
  const bool has_ii = ctx.has_attr("ignore_index");
  const int64_t ii = ctx.attr_int("ignore_index", 0);
  std::string reduction = ctx.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "reduction must be none, sum or mean, got '", reduction, "'");

  std::vector<double> loss(static_cast<size_t>(s.n * s.d), 0.0);
  double wsum = 0;
  for (int64_t i = 0; i < s.n; ++i) {
    for (int64_t k = 0; k < s.d; ++k) {
      size_t li = static_cast<size_t>(i * s.d + k);
      int64_t cls = t[li];
      if (has_ii && cls == ii) continue;
      if (cls < 0 || cls >= s.c)
        return ctx.error(ErrorCode::INVALID_ARGUMENT, "target value ", cls, " at flat index ", li, " is outside [0, ",
                         s.c, ")");
      double wi = w ? (*w)[static_cast<size_t>(cls)] : 1.0;
      loss[li] = -wi * logp[static_cast<size_t>((i * s.c + cls) * s.d + k)];
      wsum += wi;
    }
  }
  if (reduction == "none") {
    GBX_ASSIGN_OR_RETURN(Tensor out, make_float_tensor(out_dtype, target_dims, loss));
    ctx.set_output(0, std::move(out));
    return Status::OK();
  }
  double total = 0;
  for (double v : loss) total += v;
  if (reduction == "mean") total /= wsum;
  GBX_ASSIGN_OR_RETURN(Tensor out, make_float_tensor(out_dtype, {}, {total}));
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

Status nll_loss(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  const Tensor& target = ctx.input(1);
  if (!is_float(x.dtype())) return ctx.unsupported_dtype(x.dtype());
  GBX_ASSIGN_OR_RETURN(LossShape s, check_shapes(ctx, x, target));
  return nll_core(ctx, x.dtype(), s, read_doubles(x), target, target.dims(), 2);
}

Status softmax_cross_entropy_loss(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  const Tensor& target = ctx.input(1);
  if (!is_float(x.dtype())) return ctx.unsupported_dtype(x.dtype());
  GBX_ASSIGN_OR_RETURN(LossShape s, check_shapes(ctx, x, target));
  std::vector<double> v = read_doubles(x);
  // log_softmax over axis 1, stabilized by the per-position maximum.
  for (int64_t i = 0; i < s.n; ++i) {
    for (int64_t k = 0; k < s.d; ++k) {
      auto at = [&](int64_t c) -> double& { return v[static_cast<size_t>((i * s.c + c) * s.d + k)]; };
      double mx = -INFINITY;
      for (int64_t c = 0; c < s.c; ++c) mx = std::max(mx, at(c));
      double sum = 0;
      for (int64_t c = 0; c < s.c; ++c) sum += std::exp(at(c) - mx);
      double lse = mx + std::log(sum);
      for (int64_t c = 0; c < s.c; ++c) at(c) -= lse;
    }
  }
  GBX_RETURN_IF_ERROR(nll_core(ctx, x.dtype(), s, v, target, target.dims(), 2));
  if (ctx.wants_output(1)) {
    GBX_ASSIGN_OR_RETURN(Tensor lp, make_float_tensor(x.dtype(), x.dims(), v));
    ctx.set_output(1, std::move(lp));
  }
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "NegativeLogLikelihoodLoss", 12, 18, kEngineRef, float_dtypes(), nll_loss});
GBX_REGISTER_KERNEL({"", "SoftmaxCrossEntropyLoss", 12, 18, kEngineRef, float_dtypes(), softmax_cross_entropy_loss});

}  // namespace
}  // namespace gearbox::ref
