// Dropout (reference, opsets 1-18; is_test before 7) for inference: the output is the input (shared buffer,
// never written) and the optional mask is all true (all ones in T before opset 10, when the
// mask had the data's dtype). From opset 12 `ratio` and `training_mode` are inputs.
// Training mode with ratio > 0 would need numpy's random stream to be reproducible, so it is
// reported as OP_UNSUPPORTED rather than silently giving different numbers; with ratio 0 it
// is the identity and is supported.
#include <vector>

#include "kernels/cpu/ref/ref_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {
namespace {

Status dropout(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  double ratio = ctx.attr_float("ratio", 0.5f);
  // Before opset 7 the is_test attribute chose inference (1) or training (0, the default).
  bool training = ctx.opset() < 7 && ctx.attr_int("is_test", 0) == 0;
  if (ctx.opset() >= 12) {
    ratio = 0.5;
    if (ctx.has_input(1)) {
      GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
      const Tensor& r = ctx.input(1);
      if (!is_float(r.dtype()) || r.numel() != 1)
        return ctx.error(ErrorCode::INVALID_ARGUMENT, "ratio ", describe(r), " must be a float scalar");
      ratio = r.at_double(0);
    }
    if (ctx.has_input(2)) {
      GBX_RETURN_IF_ERROR(ctx.require_tensor(2));
      const Tensor& t = ctx.input(2);
      if (t.dtype() != DType::Bool || t.numel() != 1)
        return ctx.error(ErrorCode::INVALID_ARGUMENT, "training_mode ", describe(t), " must be a bool scalar");
      training = t.data<bool>()[0];
    }
  }
  if (ratio < 0 || ratio >= 1) return ctx.error(ErrorCode::INVALID_ARGUMENT, "ratio ", ratio, " must be in [0, 1)");
  if (training && ratio > 0)
    return ctx.error(ErrorCode::OP_UNSUPPORTED, "training-mode Dropout with ratio ", ratio,
                     " (random masks are not reproducible); export the model in eval mode");
  ctx.set_output(0, x);
  if (ctx.wants_output(1)) {
    const DType mdt = ctx.opset() >= 10 ? DType::Bool : x.dtype();
    GBX_ASSIGN_OR_RETURN(Tensor mask, Tensor::allocate(mdt, x.dims()));
    const int64_t n = mask.numel();
    bool ok = visit_numeric(mdt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* m = mask.data<T>();
      for (int64_t i = 0; i < n; ++i) m[i] = static_cast<T>(static_cast<compute_t<T>>(1));
    });
    if (!ok) return ctx.unsupported_dtype(mdt);
    ctx.set_output(1, std::move(mask));
  }
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Dropout", 1, 18, kEngineRef, {}, dropout});

}  // namespace
}  // namespace gearbox::ref
