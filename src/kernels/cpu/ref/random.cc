// Random generators (reference): RandomUniform, RandomNormal, RandomUniformLike,
// RandomNormalLike, Bernoulli and Multinomial. A `seed` attribute makes a node's output
// reproducible from run to run (std::mt19937_64 seeded with it); without one each run
// draws from a fresh seed. Outputs cannot match other runtimes' streams bit for bit.
#include <cmath>
#include <random>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

std::mt19937_64 make_rng(const KernelContext& ctx) {
  if (ctx.has_attr("seed"))
    return std::mt19937_64(static_cast<uint64_t>(static_cast<int64_t>(ctx.attr_float("seed", 0))));
  std::random_device rd;
  return std::mt19937_64((uint64_t(rd()) << 32) ^ rd());
}

Result<DType> out_dtype(const KernelContext& ctx, DType def) {
  if (!ctx.has_attr("dtype")) return def;
  const int64_t dt = ctx.attr_int("dtype", 1);
  if (!dtype_is_known(static_cast<int32_t>(dt)))
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "dtype ", dt, " is not a known element type");
  return static_cast<DType>(dt);
}

// Fills a float tensor of dims with draws from `dist`.
template <typename Dist>
Status fill(KernelContext& ctx, DType dt, const Dims& dims, Dist dist) {
  if (!is_float(dt)) return ctx.unsupported_dtype(dt);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, dims));
  std::mt19937_64 rng = make_rng(ctx);
  std::vector<double> v(static_cast<size_t>(y.numel()));
  for (double& e : v) e = dist(rng);
  store_doubles(y, v);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status random_uniform(KernelContext& ctx) {
  GBX_ASSIGN_OR_RETURN(DType dt, out_dtype(ctx, DType::F32));
  std::vector<int64_t> shape = ctx.attr_ints("shape");
  return fill(ctx, dt, shape,
              std::uniform_real_distribution<double>(ctx.attr_float("low", 0), ctx.attr_float("high", 1)));
}

Status random_normal(KernelContext& ctx) {
  GBX_ASSIGN_OR_RETURN(DType dt, out_dtype(ctx, DType::F32));
  return fill(ctx, dt, ctx.attr_ints("shape"),
              std::normal_distribution<double>(ctx.attr_float("mean", 0), ctx.attr_float("scale", 1)));
}

Status random_uniform_like(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_ASSIGN_OR_RETURN(DType dt, out_dtype(ctx, ctx.input(0).dtype()));
  return fill(ctx, dt, ctx.input(0).dims(),
              std::uniform_real_distribution<double>(ctx.attr_float("low", 0), ctx.attr_float("high", 1)));
}

Status random_normal_like(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_ASSIGN_OR_RETURN(DType dt, out_dtype(ctx, ctx.input(0).dtype()));
  return fill(ctx, dt, ctx.input(0).dims(),
              std::normal_distribution<double>(ctx.attr_float("mean", 0), ctx.attr_float("scale", 1)));
}

Status bernoulli(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& p = ctx.input(0);
  GBX_ASSIGN_OR_RETURN(DType dt, out_dtype(ctx, p.dtype()));
  if (dt == DType::String) return ctx.unsupported_dtype(dt);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, p.dims()));
  std::mt19937_64 rng = make_rng(ctx);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> v(static_cast<size_t>(p.numel()));
  for (int64_t i = 0; i < p.numel(); ++i) v[size_t(i)] = u(rng) < p.at_double(i) ? 1.0 : 0.0;
  store_doubles(y, v);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// Multinomial: input [batch, classes] of unnormalized log-probabilities; draws sample_size
// class indices per row.
Status multinomial(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) return ctx.error(ErrorCode::SHAPE_MISMATCH, "input must be [batch, classes], got ", describe(x));
  const int64_t n = ctx.attr_int("sample_size", 1);
  const DType dt = static_cast<DType>(ctx.attr_int("dtype", static_cast<int64_t>(DType::I32)));
  if (dt != DType::I32 && dt != DType::I64) return ctx.unsupported_dtype(dt);
  if (n < 0) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "sample_size ", n, " is negative");
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, {x.dim(0), n}));
  std::mt19937_64 rng = make_rng(ctx);
  std::vector<double> v(static_cast<size_t>(y.numel()));
  const int64_t C = x.dim(1);
  for (int64_t b = 0; b < x.dim(0); ++b) {
    std::vector<double> w(static_cast<size_t>(C));
    double mx = -INFINITY;
    for (int64_t c = 0; c < C; ++c) mx = std::max(mx, x.at_double(b * C + c));
    for (int64_t c = 0; c < C; ++c) w[size_t(c)] = std::exp(x.at_double(b * C + c) - mx);
    std::discrete_distribution<int64_t> dist(w.begin(), w.end());
    for (int64_t s = 0; s < n; ++s) v[size_t(b * n + s)] = double(C > 0 ? dist(rng) : 0);
  }
  store_doubles(y, v);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "RandomUniform", 1, 18, kEngineRef, {}, random_uniform});
GBX_REGISTER_KERNEL({"", "RandomNormal", 1, 18, kEngineRef, {}, random_normal});
GBX_REGISTER_KERNEL({"", "RandomUniformLike", 1, 18, kEngineRef, {}, random_uniform_like});
GBX_REGISTER_KERNEL({"", "RandomNormalLike", 1, 18, kEngineRef, {}, random_normal_like});
GBX_REGISTER_KERNEL({"", "Bernoulli", 15, 18, kEngineRef, float_dtypes(), bernoulli});
GBX_REGISTER_KERNEL({"", "Multinomial", 7, 18, kEngineRef, float_dtypes(), multinomial});

}  // namespace
}  // namespace gearbox::ref
