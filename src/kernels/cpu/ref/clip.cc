// Clip (reference). Opsets 6-10 take float `min`/`max` attributes (float types only);
// from opset 11 they are optional scalar inputs of X's dtype (every numeric type from 12).
// Missing bounds mean the dtype's lowest/highest value. y = min(max(x, lo), hi), so lo > hi
// gives hi everywhere, as the spec and numpy.clip do. NaN in x stays NaN.
#include <limits>

#include "kernels/cpu/ref/elementwise.h"

namespace gearbox::ref {
namespace {

// Reads optional bound input i (a one-element tensor of X's dtype) into *v.
template <typename T>
Status read_bound(const KernelContext& ctx, size_t i, const char* name, DType xt, compute_t<T>* v) {
  if (!ctx.has_input(i)) return Status::OK();
  GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& b = ctx.input(i);
  if (b.dtype() != xt) return dtype_mismatch(ctx, name, xt, b.dtype());
  if (b.numel() != 1)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, name, " must be a scalar, got shape ", to_string(b.dims()));
  *v = static_cast<compute_t<T>>(b.data<T>()[0]);
  return Status::OK();
}

Status clip_op(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const bool from_attrs = ctx.opset() < 11;
  if (from_attrs && !is_float(x.dtype())) return ctx.unsupported_dtype(x.dtype());
  Status st = ctx.unsupported_dtype(x.dtype());
  Tensor y;
  visit_numeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (in_dom<Dom::NumericNoBool, T>()) {
      using C = compute_t<T>;
      C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
      if constexpr (is_float_v<T>) {
        // Infinite defaults so that +-inf inputs pass through unchanged.
        lo = -std::numeric_limits<C>::infinity();
        hi = std::numeric_limits<C>::infinity();
      }
      if (from_attrs) {
        if constexpr (is_float_v<T>) {
          if (ctx.has_attr("min")) lo = static_cast<C>(ctx.attr_float("min", 0));
          if (ctx.has_attr("max")) hi = static_cast<C>(ctx.attr_float("max", 0));
        }
      } else {
        st = read_bound<T>(ctx, 1, "min", x.dtype(), &lo);
        if (!st.ok()) return;
        st = read_bound<T>(ctx, 2, "max", x.dtype(), &hi);
        if (!st.ok()) return;
      }
      st = Status::OK();
      y = Tensor(x.dtype(), x.dims());
      unary_apply(x.data<T>(), y.data<T>(), x.numel(), [lo, hi](C v) {
        const C a = v < lo ? lo : v;  // NaN compares false: stays NaN
        return a > hi ? hi : a;
      });
    }
  });
  if (!st.ok()) return st;
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Clip", 1, 18, kEngineRef, {}, clip_op});

}  // namespace
}  // namespace gearbox::ref
