#include "kernels/cpu/simd/simd_util.h"

#include <atomic>

namespace gearbox::simd {
namespace {
std::atomic<int64_t> g_fallbacks{0};
}  // namespace

Status run_ref(KernelContext& ctx) {
  ++g_fallbacks;
  DType dt = ctx.has_input(0) && ctx.input_value(0).is_tensor() ? ctx.input(0).dtype() : DType::Undefined;
  const KernelDef* def =
      KernelRegistry::global().find(ctx.op().domain, ctx.op().op_type, ctx.opset(), kEngineRef, dt);
  if (!def)
    return ctx.error(ErrorCode::OP_UNSUPPORTED, "no reference kernel to fall back to for dtype ", dtype_name(dt));
  return def->fn(ctx);
}

int64_t ref_fallback_count() { return g_fallbacks.load(); }

}  // namespace gearbox::simd
