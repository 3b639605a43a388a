// Shared machinery of the tensor-manipulation kernels (see shape_util.h).
#include "kernels/cpu/ref/shape_util.h"

#include <omp.h>

#include <algorithm>

namespace gearbox::ref {
namespace {

// One strided run of n elements of N bytes each. memcpy of a constant size
// compiles to a plain load/store and keeps the byte-moving code free of
// aliasing questions.
template <size_t N>
void gather_run(const uint8_t *src, int64_t off, int64_t stride, uint8_t *dst, int64_t n) {
  const uint8_t *s = src + off * int64_t(N);
  const int64_t step = stride * int64_t(N);
  for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * int64_t(N), s + j * step, N);
}

void copy_run(const ElemCopier &cp, const Tensor &src, Tensor &dst, int64_t off, int64_t stride, int64_t dof,
              int64_t n) {
  if (stride == 1) {
    cp.run(off, dof, n);
    return;
  }
  if (cp.is_string()) {
    const auto &ss = src.strings();
    auto &ds = dst.strings();
    for (int64_t j = 0; j < n; ++j) ds[size_t(dof + j)] = ss[size_t(off + j * stride)];
    return;
  }
  const auto *s = static_cast<const uint8_t *>(src.raw());
  auto *d = static_cast<uint8_t *>(dst.mutable_raw()) + dof * int64_t(cp.elem_size());
  switch (cp.elem_size()) {
    case 1:
      gather_run<1>(s, off, stride, d, n);
      break;
    case 2:
      gather_run<2>(s, off, stride, d, n);
      break;
    case 4:
      gather_run<4>(s, off, stride, d, n);
      break;
    case 8:
      gather_run<8>(s, off, stride, d, n);
      break;
    default:
      for (int64_t j = 0; j < n; ++j) cp.one(off + j * stride, dof + j);
  }
}

}  // namespace

void strided_copy(const Tensor &src, int64_t src_base, const Dims &out_dims, const std::vector<int64_t> &src_strides,
                  Tensor &dst) {
  const int64_t total = numel(out_dims);
  if (total <= 0) return;
  // Drop unit dims, then merge neighbours that are contiguous in the source
  // too.
  Dims cd;
  std::vector<int64_t> cs;
  for (size_t i = 0; i < out_dims.size(); ++i) {
    if (out_dims[i] == 1) continue;
    if (!cd.empty() && cs.back() == src_strides[i] * out_dims[i]) {
      cd.back() *= out_dims[i];
      cs.back() = src_strides[i];
    } else {
      cd.push_back(out_dims[i]);
      cs.push_back(src_strides[i]);
    }
  }
  if (cd.empty()) {
    cd.push_back(1);
    cs.push_back(1);
  }
  const size_t r = cd.size();
  const int64_t inner = cd.back(), istride = cs.back();
  const int64_t outer = total / inner;
  // Make sure a copy-on-write of a borrowed destination happens before threads
  // start.
  if (dst.dtype() != DType::String) (void)dst.mutable_raw();
  const ElemCopier cp(src, dst);

  const bool is_string = src.dtype() == DType::String;
  const int64_t bytes = total * int64_t(std::max<size_t>(cp.elem_size(), 1));
  const int threads = (!is_string && bytes >= (int64_t(1) << 20) && outer > 1) ? omp_get_max_threads() : 1;
  const int64_t chunks = std::min<int64_t>(threads, outer);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = outer * c / chunks, end = outer * (c + 1) / chunks;
    // Decompose `begin` into the outer index and source offset.
    std::vector<int64_t> idx(r - 1, 0);
    int64_t off = src_base, rem = begin;
    for (size_t d = r - 1; d-- > 0;) {
      idx[d] = rem % cd[d];
      rem /= cd[d];
      off += idx[d] * cs[d];
    }
    for (int64_t o = begin; o < end; ++o) {
      copy_run(cp, src, dst, off, istride, o * inner, inner);
      for (size_t d = r - 1; d-- > 0;) {
        if (++idx[d] < cd[d]) {
          off += cs[d];
          break;
        }
        off -= cs[d] * (cd[d] - 1);
        idx[d] = 0;
      }
    }
  }
}

Result<Tensor> alloc_output(const KernelContext &ctx, DType dtype, const Dims &dims) {
  for (int64_t d : dims)
    if (d < 0) return ctx.error(ErrorCode::INVALID_ARGUMENT, "output dims ", to_string(dims), " are negative");
  auto t = Tensor::allocate(dtype, dims);
  if (!t.ok()) return t.status().with_context(ctx.node_prefix());
  return t;
}

Result<std::optional<std::vector<int64_t>>> ints_from_input_or_attr(const KernelContext &ctx, size_t input,
                                                                    bool use_input, std::string_view attr) {
  if (use_input) {
    if (!ctx.has_input(input)) return std::optional<std::vector<int64_t>>();
    GBX_RETURN_IF_ERROR(ctx.require_tensor(input));
    GBX_ASSIGN_OR_RETURN(auto v, read_ints(ctx, ctx.input(input)));
    return std::optional<std::vector<int64_t>>(std::move(v));
  }
  if (!ctx.has_attr(attr)) return std::optional<std::vector<int64_t>>();
  return std::optional<std::vector<int64_t>>(ctx.attr_ints(attr));
}

Result<int64_t> checked_numel(const KernelContext &ctx, const Dims &dims) {
  int64_t n = numel(dims);
  for (int64_t d : dims)
    if (d < 0) n = -1;
  if (n < 0) return ctx.error(ErrorCode::INVALID_ARGUMENT, "dims ", to_string(dims), " are negative or overflow");
  return n;
}

Result<std::vector<int64_t>> normalize_axes(const KernelContext &ctx, const std::vector<int64_t> &axes, int64_t rank) {
  std::vector<int64_t> out;
  std::vector<bool> seen(size_t(std::max<int64_t>(rank, 0)), false);
  for (int64_t a : axes) {
    int64_t n = a < 0 ? a + rank : a;
    if (n < 0 || n >= rank)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "axis ", a, " is out of range for rank ", rank);
    if (seen[size_t(n)]) return ctx.error(ErrorCode::INVALID_ARGUMENT, "axis ", a, " is repeated");
    seen[size_t(n)] = true;
    out.push_back(n);
  }
  return out;
}

Result<int64_t> read_int_scalar(const KernelContext &ctx, size_t input, std::string_view what) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(input));
  const Tensor &t = ctx.input(input);
  if (t.numel() != 1) return ctx.error(ErrorCode::INVALID_ARGUMENT, what, " must hold one value, got ", describe(t));
  GBX_ASSIGN_OR_RETURN(auto v, read_ints(ctx, t));
  return v[0];
}

}  // namespace gearbox::ref
