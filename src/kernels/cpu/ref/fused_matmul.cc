// com.gearbox.FusedMatMul (reference): MatMul(A, B) [+ bias] [-> activation]; inputs A, B,
// bias (optional, added with Add's broadcasting).
// com.gearbox.FusedGemm (reference): Gemm(A, B, C) with Gemm's attributes [-> activation].
// Both take "activation"/"activation_params" (fused_util.h).
#include "kernels/cpu/ref/fused_util.h"

namespace gearbox::ref::fused {
namespace {

Status fused_matmul(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  GBX_ASSIGN_OR_RETURN(RuntimeValue y, call1(ctx, "MatMul", 13, {&ctx.input_value(0), &ctx.input_value(1)}));
  if (ctx.has_input(2)) {
    GBX_ASSIGN_OR_RETURN(y, call1(ctx, "Add", 14, {&y, &ctx.input_value(2)}));
  }
  GBX_ASSIGN_OR_RETURN(y, apply_activation(ctx, std::move(y)));
  ctx.set_output_value(0, std::move(y));
  return Status::OK();
}

Status fused_gemm(KernelContext& ctx) {
  std::vector<const RuntimeValue*> in;
  for (size_t i = 0; i < std::min<size_t>(3, ctx.num_inputs()); ++i)
    in.push_back(ctx.has_input(i) ? &ctx.input_value(i) : nullptr);
  GBX_ASSIGN_OR_RETURN(RuntimeValue y, call1(ctx, "Gemm", 13, in, *ctx.op().attrs));
  GBX_ASSIGN_OR_RETURN(y, apply_activation(ctx, std::move(y)));
  ctx.set_output_value(0, std::move(y));
  return Status::OK();
}

}  // namespace

GBX_REGISTER_KERNEL({kGearboxDomain, "FusedMatMul", 1, 1, kEngineRef, {}, fused_matmul});
GBX_REGISTER_KERNEL({kGearboxDomain, "FusedGemm", 1, 1, kEngineRef, {}, fused_gemm});

}  // namespace gearbox::ref::fused
