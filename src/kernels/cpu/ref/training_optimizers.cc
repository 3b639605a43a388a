// The optimizer steps of ONNX's ai.onnx.preview.training domain (opset 1), reference: Adagrad,
// Adam and Momentum (standard and Nesterov) update n tensors at once. Inputs are R (learning
// rate, scalar), T (step count, int64 scalar), then n tensors of each kind (Adagrad: X, G, H;
// Adam: X, G, V, H; Momentum: X, G, V); outputs are the new values of each kind after the first
// two (Adagrad: X, H; Adam: X, V, H; Momentum: X, V). Every kind's i-th tensor has X_i's shape.
// The arithmetic is the ONNX operator documentation's, in double. (gearbox's framework
// optimizers, src/frontend/optim, follow torch's update rules, which differ from these: ONNX's
// Adam corrects the step size rather than the moments, and its Momentum scales the first
// gradient by 1 instead of beta.)
#include <cmath>
#include <vector>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

enum class Rule { Adagrad, Adam, Momentum, Nesterov };

// The n tensors of each kind and the scalars; `kinds` tensors per parameter after R and T.
struct Step {
  double r = 0;
  int64_t t = 0;
  size_t n = 0;
};

Result<Step> read_step(KernelContext& ctx, size_t kinds, size_t outputs_per_param) {
  const size_t count = ctx.num_inputs();
  if (count < 2 + kinds || (count - 2) % kinds != 0)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "expected R, T and ", kinds, " tensors per parameter, got ", count,
                     " inputs");
  Step s;
  s.n = (count - 2) / kinds;
  if (ctx.num_outputs() != outputs_per_param * s.n)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, s.n, " parameters need ", outputs_per_param * s.n, " outputs, got ",
                     ctx.num_outputs());
  for (size_t i = 0; i < count; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& r = ctx.input(0);
  const Tensor& t = ctx.input(1);
  if (r.numel() != 1 || !is_float(r.dtype()))
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "R must be a float scalar, got ", describe(r));
  if (t.numel() != 1 || t.dtype() != DType::I64)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "T must be an int64 scalar, got ", describe(t));
  s.r = read_doubles(r)[0];
  s.t = t.data<int64_t>()[0];
  for (size_t p = 0; p < s.n; ++p) {
    const Tensor& x = ctx.input(2 + p);
    if (x.dtype() != DType::F32 && x.dtype() != DType::F64) return ctx.unsupported_dtype(x.dtype());
    for (size_t k = 1; k < kinds; ++k) {
      const Tensor& other = ctx.input(2 + k * s.n + p);
      if (other.dtype() != x.dtype() || other.dims() != x.dims())
        return ctx.error(ErrorCode::SHAPE_MISMATCH, "input ", 2 + k * s.n + p, " ", describe(other),
                         " must match parameter ", p, " ", describe(x));
    }
  }
  return s;
}

Status optimizer_step(KernelContext& ctx, Rule rule) {
  const size_t kinds = rule == Rule::Adagrad || rule == Rule::Momentum || rule == Rule::Nesterov ? 3 : 4;
  const size_t outs = kinds - 1;
  GBX_ASSIGN_OR_RETURN(Step s, read_step(ctx, kinds, outs));
  const double norm = ctx.attr_float("norm_coefficient", 0.0f);
  // ONNX's schema default (the importer does not fill defaults in: the kernel states them).
  const double eps = ctx.attr_float("epsilon", 1e-6f);
  const double t = static_cast<double>(s.t);
  for (size_t p = 0; p < s.n; ++p) {
    const Tensor& x_in = ctx.input(2 + p);
    std::vector<double> x = read_doubles(x_in), g = read_doubles(ctx.input(2 + s.n + p));
    std::vector<double> a = read_doubles(ctx.input(2 + 2 * s.n + p));  // H (Adagrad) or V
    std::vector<double> b;                                             // Adam's H
    if (rule == Rule::Adam) b = read_doubles(ctx.input(2 + 3 * s.n + p));
    if (rule == Rule::Adagrad) {
      const double r = s.r / (1 + t * ctx.attr_float("decay_factor", 0.0f));
      for (size_t i = 0; i < x.size(); ++i) {
        const double gr = norm * x[i] + g[i];
        a[i] += gr * gr;
        x[i] -= r * gr / (std::sqrt(a[i]) + eps);
      }
    } else if (rule == Rule::Adam) {
      const double alpha = ctx.attr_float("alpha", 0.9f), beta = ctx.attr_float("beta", 0.999f);
      const double post = ctx.attr_float("norm_coefficient_post", 0.0f);
      const double r = s.t > 0 ? s.r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : s.r;
      for (size_t i = 0; i < x.size(); ++i) {
        const double gr = norm * x[i] + g[i];
        a[i] = alpha * a[i] + (1 - alpha) * gr;
        b[i] = beta * b[i] + (1 - beta) * gr * gr;
        x[i] = (1 - post) * (x[i] - r * a[i] / (std::sqrt(b[i]) + eps));
      }
    } else {
      const double alpha = ctx.attr_float("alpha", 0.0f);
      const double beta = s.t > 0 ? ctx.attr_float("beta", 0.0f) : 1.0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double gr = norm * x[i] + g[i];
        a[i] = alpha * a[i] + beta * gr;
        x[i] -= s.r * (rule == Rule::Nesterov ? gr + alpha * a[i] : a[i]);
      }
    }
    std::vector<const std::vector<double>*> results{&x, &a};
    if (rule == Rule::Adam) results.push_back(&b);
    for (size_t k = 0; k < results.size(); ++k) {
      GBX_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(x_in.dtype(), x_in.dims()));
      store_doubles(out, *results[k]);
      ctx.set_output(k * s.n + p, std::move(out));
    }
  }
  return Status::OK();
}

Status adagrad(KernelContext& ctx) { return optimizer_step(ctx, Rule::Adagrad); }
Status adam(KernelContext& ctx) { return optimizer_step(ctx, Rule::Adam); }
Status momentum(KernelContext& ctx) {
  const std::string mode = ctx.attr_string("mode", "");
  if (mode != "standard" && mode != "nesterov")
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "mode must be standard or nesterov, got '", mode, "'");
  return optimizer_step(ctx, mode == "nesterov" ? Rule::Nesterov : Rule::Momentum);
}

constexpr const char* kTraining = "ai.onnx.preview.training";
GBX_REGISTER_KERNEL({kTraining, "Adagrad", 1, 1, kEngineRef, {DType::F32, DType::F64}, adagrad});
GBX_REGISTER_KERNEL({kTraining, "Adam", 1, 1, kEngineRef, {DType::F32, DType::F64}, adam});
GBX_REGISTER_KERNEL({kTraining, "Momentum", 1, 1, kEngineRef, {DType::F32, DType::F64}, momentum});

}  // namespace
}  // namespace gearbox::ref
