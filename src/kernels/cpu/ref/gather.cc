// Gather, GatherElements and GatherND (reference). Indices may be negative
// (counted from the end) and are all validated before any copy, so a bad index
// is an INVALID_ARGUMENT error and never an out-of-bounds read. Gather and
// GatherND copy contiguous slices with memcpy (Gather is the embedding lookup
// of every BERT export).
#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

// Reads indices and wraps negatives into [0, dim); INVALID_ARGUMENT for any
// outside [-dim, dim).
Result<std::vector<int64_t>> read_indices(const KernelContext& ctx, const Tensor& t, int64_t dim, int64_t axis) {
  if (t.dtype() != DType::I32 && t.dtype() != DType::I64)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "indices must be int32 or int64, got ", describe(t));
  GBX_ASSIGN_OR_RETURN(auto v, read_ints(ctx, t));
  for (auto& i : v) {
    if (i < -dim || i >= dim)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "index ", i, " is out of range [", -dim, ", ", dim - 1,
                       "] for axis ", axis);
    if (i < 0) i += dim;
  }
  return v;
}

Status gather(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const int64_t rank = int64_t(x.rank());
  if (rank == 0) return ctx.error(ErrorCode::SHAPE_MISMATCH, "Gather needs data of rank >= 1, got ", describe(x));
  GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.attr_int("axis", 0), rank));
  const int64_t dim = x.dim(size_t(axis));
  GBX_ASSIGN_OR_RETURN(auto idx, read_indices(ctx, ind, dim, axis));
  Dims out(x.dims().begin(), x.dims().begin() + axis);
  out.insert(out.end(), ind.dims().begin(), ind.dims().end());
  out.insert(out.end(), x.dims().begin() + axis + 1, x.dims().end());
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), out));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(size_t(d));
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.dim(size_t(d));
  const int64_t n = int64_t(idx.size());
  if (y.numel() > 0) {
    const ElemCopier cp(x, y);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < n; ++k) cp.run((o * dim + idx[size_t(k)]) * inner, (o * n + k) * inner, inner);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status gather_elements(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const int64_t rank = int64_t(x.rank());
  if (rank == 0 || int64_t(ind.rank()) != rank)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "data ", describe(x), " and indices ", describe(ind),
                     " must have the same rank >= 1");
  GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.attr_int("axis", 0), rank));
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && ind.dim(size_t(d)) > x.dim(size_t(d)))
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "indices ", describe(ind), " exceed data ", describe(x), " on axis ",
                       d);
  GBX_ASSIGN_OR_RETURN(auto idx, read_indices(ctx, ind, x.dim(size_t(axis)), axis));
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), ind.dims()));
  const auto xs = strides_of(x.dims());
  const ElemCopier cp(x, y);
  std::vector<int64_t> pos(size_t(rank), 0);
  int64_t base = 0;  // data offset of pos with the axis coordinate left out
  for (int64_t i = 0; i < y.numel(); ++i) {
    cp.one(base + idx[size_t(i)] * xs[size_t(axis)], i);
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
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status gather_nd(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const int64_t r = int64_t(x.rank()), q = int64_t(ind.rank());
  const int64_t b = ctx.opset() >= 12 ? ctx.attr_int("batch_dims", 0) : 0;
  if (ind.dtype() != DType::I64 && ind.dtype() != DType::I32)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "indices must be int64, got ", describe(ind));
  if (r < 1 || q < 1 || b < 0 || b >= std::min(r, q))
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "data ", describe(x), " / indices ", describe(ind),
                     " do not fit batch_dims ", b);
  const int64_t k = ind.dim(size_t(q - 1));
  if (k < 1 || k > r - b)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "indices ", describe(ind), " have last dim ", k, " but data ",
                     describe(x), " allows 1..", r - b, " with batch_dims ", b);
  int64_t batch = 1;
  for (int64_t d = 0; d < b; ++d) {
    if (x.dim(size_t(d)) != ind.dim(size_t(d)))
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "batch dim ", d, " differs: data ", describe(x), " indices ",
                       describe(ind));
    batch *= x.dim(size_t(d));
  }
  Dims out(ind.dims().begin(), ind.dims().end() - 1);
  out.insert(out.end(), x.dims().begin() + b + k, x.dims().end());
  int64_t slice = 1;
  for (int64_t d = b + k; d < r; ++d) slice *= x.dim(size_t(d));
  GBX_ASSIGN_OR_RETURN(auto raw, read_ints(ctx, ind));
  const auto xs = strides_of(x.dims());
  const int64_t batch_stride = b > 0 ? xs[size_t(b - 1)] : 0;
  const int64_t tuples = k > 0 ? int64_t(raw.size()) / k : 0;
  const int64_t per_batch = batch > 0 ? tuples / batch : 0;
  std::vector<int64_t> offsets(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = per_batch > 0 ? (t / per_batch) * batch_stride : 0;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t dim = x.dim(size_t(b + j));
      int64_t i = raw[size_t(t * k + j)];
      if (i < -dim || i >= dim)
        return ctx.error(ErrorCode::INVALID_ARGUMENT, "index ", i, " is out of range [", -dim, ", ", dim - 1,
                         "] for data axis ", b + j);
      if (i < 0) i += dim;
      off += i * xs[size_t(b + j)];
    }
    offsets[size_t(t)] = off;
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), out));
  if (y.numel() > 0) {
    const ElemCopier cp(x, y);
    for (int64_t t = 0; t < tuples; ++t) cp.run(offsets[size_t(t)], t * slice, slice);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Gather", 1, 18, kEngineRef, {}, gather});
GBX_REGISTER_KERNEL({"", "GatherElements", 11, 18, kEngineRef, {}, gather_elements});
GBX_REGISTER_KERNEL({"", "GatherND", 11, 18, kEngineRef, {}, gather_nd});

}  // namespace
}  // namespace gearbox::ref
