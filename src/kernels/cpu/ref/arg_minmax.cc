// ArgMax and ArgMin (reference) with keepdims and select_last_index (opset 12).
// Ties go to the first index unless select_last_index is set; NaN compares as
// neither larger nor smaller.
#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

template <bool kMax>
Status arg_minmax(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const int64_t rank = int64_t(x.rank());
  if (rank == 0) return ctx.error(ErrorCode::SHAPE_MISMATCH, "needs rank >= 1, got ", describe(x));
  GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.attr_int("axis", 0), rank));
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  const bool last = ctx.opset() >= 12 && ctx.attr_int("select_last_index", 0) != 0;
  const int64_t n = x.dim(size_t(axis));
  if (n == 0) return ctx.error(ErrorCode::INVALID_ARGUMENT, "cannot reduce empty axis ", axis, " of ", describe(x));
  Dims out = x.dims();
  if (keepdims) out[size_t(axis)] = 1;
  else out.erase(out.begin() + axis);
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, DType::I64, out));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(size_t(d));
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.dim(size_t(d));
  int64_t* o = y.data<int64_t>();
  const bool ok = visit_numeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const T* p = x.data<T>();
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t i = 0; i < inner; ++i) {
        const T* base = p + a * n * inner + i;
        C best = static_cast<C>(base[0]);
        int64_t bi = 0;
        for (int64_t k = 1; k < n; ++k) {
          const C v = static_cast<C>(base[k * inner]);
          const bool better = kMax ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
          if (better) {
            best = v;
            bi = k;
          }
        }
        o[a * inner + i] = bi;
      }
  });
  if (!ok) return ctx.unsupported_dtype(x.dtype());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "ArgMax", 1, 18, kEngineRef, {}, arg_minmax<true>});
GBX_REGISTER_KERNEL({"", "ArgMin", 1, 18, kEngineRef, {}, arg_minmax<false>});

}  // namespace
}  // namespace gearbox::ref
