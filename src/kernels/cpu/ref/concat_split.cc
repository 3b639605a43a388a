// Concat and Split (reference). Both are runs of contiguous memory per outer
// index: Concat copies each input's [axis..] block into its place in the output
// row, Split copies a window of each input row; both memcpy those runs.
#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

Status concat(KernelContext& ctx) {
  if (ctx.num_inputs() == 0) return ctx.error(ErrorCode::INVALID_ARGUMENT, "Concat needs at least one input");
  for (size_t i = 0; i < ctx.num_inputs(); ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& first = ctx.input(0);
  const int64_t rank = int64_t(first.rank());
  // Concat-1..3 default the axis to 1; from 4 it is required.
  if (!ctx.has_attr("axis") && ctx.opset() >= 4)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "Concat needs the axis attribute");
  if (rank == 0) return ctx.error(ErrorCode::SHAPE_MISMATCH, "Concat cannot join scalars");
  GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.attr_int("axis", ctx.opset() < 4 ? 1 : 0), rank));
  Dims out = first.dims();
  out[size_t(axis)] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != first.dtype())
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "input ", i, " is ", describe(t), " but input 0 is ",
                       describe(first));
    bool ok = int64_t(t.rank()) == rank;
    for (int64_t d = 0; ok && d < rank; ++d)
      if (d != axis && t.dim(size_t(d)) != first.dim(size_t(d))) ok = false;
    if (!ok)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "cannot concatenate ", describe(t), " with ", describe(first),
                       " on axis ", axis);
    out[size_t(axis)] += t.dim(size_t(axis));
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, first.dtype(), out));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out[size_t(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= out[size_t(d)];
  const int64_t out_row = out[size_t(axis)] * inner;
  int64_t col = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    const int64_t run = t.dim(size_t(axis)) * inner;
    if (run > 0) {
      const ElemCopier cp(t, y);
      for (int64_t o = 0; o < outer; ++o) cp.run(o * run, o * out_row + col, run);
    }
    col += run;
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status split(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const int64_t rank = int64_t(x.rank());
  GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.attr_int("axis", 0), rank));
  const int64_t dim = x.dim(size_t(axis));
  const int64_t n_out = int64_t(ctx.num_outputs());
  GBX_ASSIGN_OR_RETURN(auto given, ints_from_input_or_attr(ctx, 1, ctx.opset() >= 13, "split"));
  std::vector<int64_t> parts;
  if (given && !given->empty() && ctx.has_attr("num_outputs"))
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "split and num_outputs cannot both be given");
  if (given && !given->empty()) {
    parts = *given;
    if (int64_t(parts.size()) != n_out)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "split has ", parts.size(), " entries but the node has ", n_out,
                       " outputs");
    int64_t sum = 0;
    for (int64_t p : parts) {
      if (p < 0) return ctx.error(ErrorCode::INVALID_ARGUMENT, "split has negative size ", p);
      sum += p;
    }
    if (sum != dim)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "split sizes sum to ", sum, " but axis ", axis, " of ", describe(x),
                       " has size ", dim);
  } else if (ctx.has_attr("num_outputs")) {
    // Split-18: num_outputs parts of ceil(dim / n), the last one smaller when uneven.
    const int64_t n = ctx.attr_int("num_outputs", 0);
    if (n != n_out)
      return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "num_outputs is ", n, " but the node has ", n_out, " outputs");
    if (n < 1 || n > dim)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "axis ", axis, " of ", describe(x), " (size ", dim,
                       ") cannot be split into ", n, " non-empty parts");
    const int64_t chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i) parts.push_back(std::min(chunk, dim - i * chunk));
    if (parts.back() <= 0)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "axis ", axis, " of ", describe(x), " (size ", dim,
                       ") cannot be split into ", n, " parts of ", chunk, " with a non-empty last one");
  } else {
    if (n_out <= 0 || dim % n_out != 0)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "axis ", axis, " of ", describe(x), " (size ", dim,
                       ") cannot be split equally into ", n_out, " outputs");
    parts.assign(size_t(n_out), dim / n_out);
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(size_t(d));
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.dim(size_t(d));
  int64_t start = 0;
  for (int64_t i = 0; i < n_out; ++i) {
    const int64_t p = parts[size_t(i)];
    if (ctx.wants_output(size_t(i))) {
      Dims od = x.dims();
      od[size_t(axis)] = p;
      GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), od));
      strided_copy(x, start * inner, {outer, p * inner}, {dim * inner, 1}, y);
      ctx.set_output(size_t(i), std::move(y));
    }
    start += p;
  }
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Concat", 1, 18, kEngineRef, {}, concat});
GBX_REGISTER_KERNEL({"", "Split", 1, 18, kEngineRef, {}, split});

}  // namespace
}  // namespace gearbox::ref
