// Unique (reference): all four outputs (unique values, first-occurrence
// indices, inverse indices, counts), sorted or in order of first occurrence,
// over the flattened input or over slices along an axis (compared
// lexicographically, like numpy.unique(axis=...)).
#include <algorithm>
#include <functional>
#include <numeric>

#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

Status unique(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x0 = ctx.input(0);
  const bool sorted = ctx.attr_int("sorted", 1) != 0;
  Tensor x = x0;
  int64_t axis = 0;
  const bool has_axis = ctx.has_attr("axis");
  if (has_axis) {
    GBX_ASSIGN_OR_RETURN(axis, normalize_axis(ctx, ctx.attr_int("axis", 0), int64_t(x0.rank())));
    if (x0.rank() == 0) return ctx.error(ErrorCode::SHAPE_MISMATCH, "Unique with axis needs rank >= 1");
  } else {
    x = x0.reshaped({x0.numel()});
  }
  const int64_t n = x.dim(size_t(axis));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(size_t(d));
  for (size_t d = size_t(axis) + 1; d < x.rank(); ++d) inner *= x.dim(d);

  // Three-way comparison of slices a and b, element by element in (outer,
  // inner) order.
  std::function<int(int64_t, int64_t)> cmp;
  const bool ok = visit_any(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    cmp = [&x, n, outer, inner](int64_t a, int64_t b) {
      const T* p = nullptr;
      if constexpr (std::is_same_v<T, std::string>) p = x.strings().data();
      else p = x.data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const auto u = p[(o * n + a) * inner + i];
          const auto v = p[(o * n + b) * inner + i];
          if constexpr (std::is_same_v<T, std::string>) {
            if (u != v) return u < v ? -1 : 1;
          } else {
            const auto cu = static_cast<compute_t<T>>(u), cv = static_cast<compute_t<T>>(v);
            if (cu < cv) return -1;
            if (cv < cu) return 1;
          }
        }
      return 0;
    };
  });
  if (!ok) return ctx.unsupported_dtype(x.dtype());

  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
  // Groups of equal slices, each represented by its first occurrence.
  std::vector<int64_t> first, counts, group_of(static_cast<size_t>(n));
  for (size_t j = 0; j < order.size(); ++j) {
    if (j == 0 || cmp(order[j - 1], order[j]) != 0) {
      first.push_back(order[j]);
      counts.push_back(0);
    }
    group_of[size_t(order[j])] = int64_t(first.size()) - 1;
    ++counts.back();
  }
  const int64_t m = int64_t(first.size());
  std::vector<int64_t> rank_of(static_cast<size_t>(m));  // group -> output position
  std::iota(rank_of.begin(), rank_of.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(static_cast<size_t>(m));
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(),
              [&](int64_t a, int64_t b) { return first[size_t(a)] < first[size_t(b)]; });
    for (int64_t p = 0; p < m; ++p) rank_of[size_t(by_first[size_t(p)])] = p;
  }
  Dims ydims = x.dims();
  ydims[size_t(axis)] = m;
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), ydims));
  Tensor idx(DType::I64, {m}), inv(DType::I64, {n}), cnt(DType::I64, {m});
  const ElemCopier cp(x, y);
  for (int64_t g = 0; g < m; ++g) {
    const int64_t pos = rank_of[size_t(g)];
    for (int64_t o = 0; o < outer; ++o) cp.run((o * n + first[size_t(g)]) * inner, (o * m + pos) * inner, inner);
    idx.data<int64_t>()[pos] = first[size_t(g)];
    cnt.data<int64_t>()[pos] = counts[size_t(g)];
  }
  for (int64_t j = 0; j < n; ++j) inv.data<int64_t>()[j] = rank_of[size_t(group_of[size_t(j)])];
  ctx.set_output(0, std::move(y));
  ctx.set_output(1, std::move(idx));
  ctx.set_output(2, std::move(inv));
  ctx.set_output(3, std::move(cnt));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Unique", 11, 18, kEngineRef, {}, unique});

}  // namespace
}  // namespace gearbox::ref
