// Relu (reference). The simplest kernel; kept as the template for new ones.
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

Status relu(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  Tensor y(x.dtype(), x.dims());
  bool ok = visit_numeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      C v = static_cast<C>(in[i]);
      out[i] = static_cast<T>(v > C(0) ? v : C(0));
    }
  });
  if (!ok) return ctx.unsupported_dtype(x.dtype());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Relu", 1, 17, kEngineRef, {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8,
                                                     DType::I16, DType::I32, DType::I64}, relu});

}  // namespace
}  // namespace gearbox::ref
