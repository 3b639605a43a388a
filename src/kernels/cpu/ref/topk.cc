// TopK (reference): k as an attribute before opset 10 and as an input from 10;
// largest and sorted from 11. Ties are broken by the lower index (the spec's
// stable order); NaN ranks above every number, as numpy's sort places it.
// Results are always returned sorted, which the spec allows when sorted=0.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

template <typename C>
bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return std::isnan(v);
  else return false;
}

Status topk(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const int64_t rank = int64_t(x.rank());
  if (rank == 0) return ctx.error(ErrorCode::SHAPE_MISMATCH, "TopK needs rank >= 1, got ", describe(x));
  int64_t k = 0;
  if (ctx.opset() >= 10) {
    GBX_ASSIGN_OR_RETURN(k, read_int_scalar(ctx, 1, "K"));
  } else {
    if (!ctx.has_attr("k")) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "TopK needs the k attribute");
    k = ctx.attr_int("k", 0);
  }
  GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.attr_int("axis", -1), rank));
  const bool largest = ctx.opset() < 11 || ctx.attr_int("largest", 1) != 0;
  const int64_t n = x.dim(size_t(axis));
  if (k < 0 || k > n)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "k = ", k, " is outside [0, ", n, "] for axis ", axis, " of ",
                     describe(x));
  Dims out = x.dims();
  out[size_t(axis)] = k;
  GBX_ASSIGN_OR_RETURN(Tensor vals, alloc_output(ctx, x.dtype(), out));
  GBX_ASSIGN_OR_RETURN(Tensor inds, alloc_output(ctx, DType::I64, out));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(size_t(d));
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.dim(size_t(d));
  const bool ok = visit_numeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const T* p = x.data<T>();
    T* ov = vals.data<T>();
    int64_t* oi = inds.data<int64_t>();
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::vector<C> line(static_cast<size_t>(n));
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t i = 0; i < inner; ++i) {
        for (int64_t j = 0; j < n; ++j) line[size_t(j)] = static_cast<C>(p[(a * n + j) * inner + i]);
        std::iota(order.begin(), order.end(), 0);
        auto before = [&](int64_t l, int64_t r) {
          const C u = line[size_t(l)], v = line[size_t(r)];
          const bool un = is_nan(u), vn = is_nan(v);
          if (un || vn) {
            if (un && vn) return l < r;
            return largest ? un : vn;  // NaN is the largest value
          }
          if (u != v) return largest ? u > v : u < v;
          return l < r;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          const int64_t src = order[size_t(j)];
          ov[(a * k + j) * inner + i] = p[(a * n + src) * inner + i];
          oi[(a * k + j) * inner + i] = src;
        }
      }
  });
  if (!ok) return ctx.unsupported_dtype(x.dtype());
  ctx.set_output(0, std::move(vals));
  ctx.set_output(1, std::move(inds));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "TopK", 1, 18, kEngineRef, {}, topk});

}  // namespace
}  // namespace gearbox::ref
