// Scatter (opsets 9-10), ScatterElements and ScatterND (reference), with the
// reduction attribute (none/add/mul from opset 16; max/min accepted too, as
// opset 18 defines them). The output starts as a copy of data; every index is
// validated before anything is written.
#include <algorithm>

#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

enum class Reduction { None, Add, Mul, Max, Min };

Result<Reduction> read_reduction(const KernelContext& ctx) {
  if (ctx.opset() < 16) return Reduction::None;
  const std::string r = ctx.attr_string("reduction", "none");
  if (r == "none") return Reduction::None;
  if (r == "add") return Reduction::Add;
  if (r == "mul") return Reduction::Mul;
  if (r == "max") return Reduction::Max;
  if (r == "min") return Reduction::Min;
  return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "reduction must be none, add, mul, max or min, got '", r, "'");
}

// Applies updates[src + j] to out[dst + j] for j < n, for every (src, dst)
// pair.
Status apply(const KernelContext& ctx, Reduction red, const Tensor& upd, Tensor& out,
             const std::vector<std::pair<int64_t, int64_t>>& pairs, int64_t n) {
  if (red == Reduction::None) {
    const ElemCopier cp(upd, out);
    for (const auto& [s, d] : pairs) cp.run(s, d, n);
    return Status::OK();
  }
  if (out.dtype() == DType::String || out.dtype() == DType::Bool) return ctx.unsupported_dtype(out.dtype());
  visit_numeric(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    if constexpr (!std::is_same_v<T, bool>) {  // bool was rejected above
      const T* u = upd.data<T>();
      T* o = out.data<T>();
      for (const auto& [s, d] : pairs)
        for (int64_t j = 0; j < n; ++j) {
          const C a = static_cast<C>(o[d + j]), b = static_cast<C>(u[s + j]);
          C r = a;
          switch (red) {
            case Reduction::Add:
              r = wrap_add(a, b);
              break;
            case Reduction::Mul:
              r = wrap_mul(a, b);
              break;
            case Reduction::Max:
              r = std::max(a, b);
              break;
            case Reduction::Min:
              r = std::min(a, b);
              break;
            case Reduction::None:
              r = b;
              break;
          }
          o[d + j] = static_cast<T>(r);
        }
    }
  });
  return Status::OK();
}

Status scatter_elements(KernelContext& ctx) {
  for (size_t i = 0; i < 3; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  GBX_ASSIGN_OR_RETURN(Reduction red, read_reduction(ctx));
  const int64_t rank = int64_t(x.rank());
  if (rank == 0 || int64_t(ind.rank()) != rank || ind.dims() != upd.dims())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "data ", describe(x), ", indices ", describe(ind), " and updates ",
                     describe(upd), " must have the same rank >= 1 and indices the shape of updates");
  if (upd.dtype() != x.dtype())
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "updates ", describe(upd), " must match data ", describe(x));
  if (ind.dtype() != DType::I32 && ind.dtype() != DType::I64)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "indices must be int32 or int64, got ", describe(ind));
  GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.attr_int("axis", 0), rank));
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && ind.dim(size_t(d)) > x.dim(size_t(d)))
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "indices ", describe(ind), " exceed data ", describe(x), " on axis ",
                       d);
  GBX_ASSIGN_OR_RETURN(auto idx, read_ints(ctx, ind));
  const int64_t dim = x.dim(size_t(axis));
  const auto xs = strides_of(x.dims());
  std::vector<std::pair<int64_t, int64_t>> pairs;
  pairs.reserve(idx.size());
  std::vector<int64_t> pos(size_t(rank), 0);
  int64_t base = 0;
  for (int64_t i = 0; i < int64_t(idx.size()); ++i) {
    int64_t v = idx[size_t(i)];
    if (v < -dim || v >= dim)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "index ", v, " is out of range [", -dim, ", ", dim - 1,
                       "] for axis ", axis);
    if (v < 0) v += dim;
    pairs.emplace_back(i, base + v * xs[size_t(axis)]);
    for (int64_t d = rank - 1; d >= 0; --d) {
      const size_t du = size_t(d);
      const int64_t s = d == axis ? 0 : xs[du];
      if (++pos[du] < ind.dim(du)) {
        base += s;
        break;
      }
      base -= s * (ind.dim(du) - 1);
      pos[du] = 0;
    }
  }
  Tensor y = x.clone();
  GBX_RETURN_IF_ERROR(apply(ctx, red, upd, y, pairs, 1));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status scatter_nd(KernelContext& ctx) {
  for (size_t i = 0; i < 3; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  GBX_ASSIGN_OR_RETURN(Reduction red, read_reduction(ctx));
  if (upd.dtype() != x.dtype())
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "updates ", describe(upd), " must match data ", describe(x));
  if (ind.dtype() != DType::I64 && ind.dtype() != DType::I32)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "indices must be int64, got ", describe(ind));
  const int64_t r = int64_t(x.rank()), q = int64_t(ind.rank());
  if (r < 1 || q < 1) return ctx.error(ErrorCode::SHAPE_MISMATCH, "data and indices must have rank >= 1");
  const int64_t k = ind.dim(size_t(q - 1));
  if (k < 1 || k > r)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "indices ", describe(ind), " have last dim ", k, " but data ",
                     describe(x), " has rank ", r);
  Dims want(ind.dims().begin(), ind.dims().end() - 1);
  want.insert(want.end(), x.dims().begin() + k, x.dims().end());
  if (upd.dims() != want)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "updates ", describe(upd), " must have shape ", to_string(want));
  int64_t slice = 1;
  for (int64_t d = k; d < r; ++d) slice *= x.dim(size_t(d));
  GBX_ASSIGN_OR_RETURN(auto raw, read_ints(ctx, ind));
  const auto xs = strides_of(x.dims());
  const int64_t tuples = int64_t(raw.size()) / k;
  std::vector<std::pair<int64_t, int64_t>> pairs;
  pairs.reserve(size_t(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t dim = x.dim(size_t(j));
      int64_t i = raw[size_t(t * k + j)];
      if (i < -dim || i >= dim)
        return ctx.error(ErrorCode::INVALID_ARGUMENT, "index ", i, " is out of range [", -dim, ", ", dim - 1,
                         "] for data axis ", j);
      if (i < 0) i += dim;
      off += i * xs[size_t(j)];
    }
    pairs.emplace_back(t * slice, off);
  }
  Tensor y = x.clone();
  GBX_RETURN_IF_ERROR(apply(ctx, red, upd, y, pairs, slice));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Scatter", 9, 10, kEngineRef, {}, scatter_elements});
GBX_REGISTER_KERNEL({"", "ScatterElements", 11, 18, kEngineRef, {}, scatter_elements});
GBX_REGISTER_KERNEL({"", "ScatterND", 11, 18, kEngineRef, {}, scatter_nd});

}  // namespace
}  // namespace gearbox::ref
