// CumSum (reference) with the exclusive and reverse attributes. Float types
// accumulate in double so long prefixes do not drift; integers accumulate in
// their own type.
#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

Status cumsum(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  GBX_ASSIGN_OR_RETURN(int64_t axis_raw, read_int_scalar(ctx, 1, "axis"));
  const int64_t rank = int64_t(x.rank());
  if (rank == 0) return ctx.error(ErrorCode::SHAPE_MISMATCH, "CumSum needs rank >= 1, got ", describe(x));
  GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, axis_raw, rank));
  const bool exclusive = ctx.attr_int("exclusive", 0) != 0, reverse = ctx.attr_int("reverse", 0) != 0;
  if (x.dtype() == DType::Bool || x.dtype() == DType::String) return ctx.unsupported_dtype(x.dtype());
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, x.dtype(), x.dims()));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(size_t(d));
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.dim(size_t(d));
  const int64_t n = x.dim(size_t(axis));
  visit_numeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      using Acc = std::conditional_t<std::is_integral_v<compute_t<T>>, T, double>;
      const T* in = x.data<T>();
      T* out = y.data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          Acc acc = Acc(0);
          for (int64_t s = 0; s < n; ++s) {
            const int64_t k = reverse ? n - 1 - s : s;
            const int64_t off = (o * n + k) * inner + i;
            const Acc v = static_cast<Acc>(static_cast<compute_t<T>>(in[off]));
            if (!exclusive) acc = wrap_add(acc, v);
            out[off] = static_cast<T>(static_cast<compute_t<T>>(acc));
            if (exclusive) acc = wrap_add(acc, v);
          }
        }
    }
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "CumSum", 11, 18, kEngineRef, {}, cumsum});

}  // namespace
}  // namespace gearbox::ref
