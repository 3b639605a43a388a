#include "kernels/reference_fallback.h"

namespace gearbox {

Status run_reference_fallback(KernelContext& ctx) {
  const DType dt = ctx.has_input(0) && ctx.input_value(0).is_tensor() ? ctx.input(0).dtype() : DType::Undefined;
  const KernelDef* def = KernelRegistry::global().find(ctx.op().domain, ctx.op().op_type, ctx.opset(), kEngineRef, dt);
  if (!def)
    return ctx.error(ErrorCode::OP_UNSUPPORTED, "no reference kernel to fall back to for dtype ", dtype_name(dt));
  return def->fn(ctx);
}

}  // namespace gearbox
