// Where (reference, opsets 9 and 16): out = condition ? X : Y with three-way numpy
// broadcasting, for every dtype including string. The innermost row picks per element;
// rows where all three inputs are contiguous (the common same-shape case) skip the stride
// multiplications.
#include "kernels/cpu/ref/elementwise.h"

namespace gearbox::ref {
namespace {

template <typename T>
void where_rows(const bool* c, const T* x, const T* y, T* o, const BroadcastPlan<3>& p) {
  const int64_t sc = p.inner_stride(0), sx = p.inner_stride(1), sy = p.inner_stride(2);
  auto segment = [&](int64_t oo, const std::array<int64_t, 3>& off, int64_t col, int64_t n) {
    const bool* pc = c + off[0] + col * sc;
    const T* px = x + off[1] + col * sx;
    const T* py = y + off[2] + col * sy;
    T* po = o + oo;
    if (sc && sx && sy) {
      for (int64_t i = 0; i < n; ++i) po[i] = pc[i] ? px[i] : py[i];
    } else {
      for (int64_t i = 0; i < n; ++i) po[i] = pc[i * sc] ? px[i * sx] : py[i * sy];
    }
  };
  for_each_segment(p, 0, p.total(), segment);
}

Status where_op(KernelContext& ctx) {
  for (size_t i = 0; i < 3; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  if (c.dtype() != DType::Bool)
    return ctx.error(ErrorCode::DTYPE_UNSUPPORTED, "condition must be bool, got ", dtype_name(c.dtype()));
  if (x.dtype() != y.dtype()) return dtype_mismatch(ctx, "X and Y", x.dtype(), y.dtype());
  GBX_ASSIGN_OR_RETURN(Dims dims, broadcast_shapes(ctx, {c.dims(), x.dims(), y.dims()}));
  auto alloc = Tensor::allocate(x.dtype(), dims);
  if (!alloc.ok()) return alloc.status().with_context(ctx.node_prefix());
  Tensor out = std::move(alloc).value();
  const BroadcastPlan<3> plan = make_plan<3>(out.dims(), {&c.dims(), &x.dims(), &y.dims()});
  const bool ok = visit_any(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, std::string>)
      where_rows(c.data<bool>(), x.strings().data(), y.strings().data(), out.strings().data(), plan);
    else where_rows(c.data<bool>(), x.data<T>(), y.data<T>(), out.data<T>(), plan);
  });
  if (!ok) return ctx.unsupported_dtype(x.dtype());
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Where", 9, 18, kEngineRef, {}, where_op});

}  // namespace
}  // namespace gearbox::ref
