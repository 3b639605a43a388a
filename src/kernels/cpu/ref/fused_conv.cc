// com.gearbox.FusedConv (reference): Conv(X, W, B) [+ Z] [-> activation], the Conv attributes
// as on Conv plus "activation"/"activation_params" (fused_util.h). Inputs: X, W, B
// (optional), Z (optional residual, added after the convolution with Add's broadcasting).
#include "kernels/cpu/ref/fused_util.h"

namespace gearbox::ref::fused {
namespace {

Status fused_conv(KernelContext& ctx) {
  std::vector<const RuntimeValue*> conv_in;
  for (size_t i = 0; i < std::min<size_t>(3, ctx.num_inputs()); ++i)
    conv_in.push_back(ctx.has_input(i) ? &ctx.input_value(i) : nullptr);
  GBX_ASSIGN_OR_RETURN(RuntimeValue y, call1(ctx, "Conv", 11, conv_in, *ctx.op().attrs));
  if (ctx.has_input(3)) {
    GBX_ASSIGN_OR_RETURN(y, call1(ctx, "Add", 14, {&y, &ctx.input_value(3)}));
  }
  GBX_ASSIGN_OR_RETURN(y, apply_activation(ctx, std::move(y)));
  ctx.set_output_value(0, std::move(y));
  return Status::OK();
}

}  // namespace

GBX_REGISTER_KERNEL({kGearboxDomain, "FusedConv", 1, 1, kEngineRef, {}, fused_conv});

}  // namespace gearbox::ref::fused
