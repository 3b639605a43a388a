// com.gearbox.LayerNormalization (reference): ONNX-17 LayerNormalization (X, Scale, B) with
// "axis" and "epsilon", for models whose opset predates it (the fusion of the ReduceMean/Sub/
// Pow/ReduceMean/Add/Sqrt/Div/Mul/Add decomposition exporters emit).
// com.gearbox.SkipLayerNormalization (reference): LayerNormalization(X + Skip, Scale, B).
#include "kernels/cpu/ref/fused_util.h"

namespace gearbox::ref::fused {
namespace {

Status layer_norm(KernelContext& ctx) {
  std::vector<const RuntimeValue*> in;
  for (size_t i = 0; i < std::min<size_t>(3, ctx.num_inputs()); ++i)
    in.push_back(ctx.has_input(i) ? &ctx.input_value(i) : nullptr);
  GBX_ASSIGN_OR_RETURN(RuntimeValue y, call1(ctx, "LayerNormalization", 17, in, *ctx.op().attrs));
  ctx.set_output_value(0, std::move(y));
  return Status::OK();
}

Status skip_layer_norm(KernelContext& ctx) {
  for (size_t i = 0; i < 3; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  GBX_ASSIGN_OR_RETURN(RuntimeValue sum, call1(ctx, "Add", 14, {&ctx.input_value(0), &ctx.input_value(1)}));
  std::vector<const RuntimeValue*> in{&sum, &ctx.input_value(2)};
  if (ctx.has_input(3)) in.push_back(&ctx.input_value(3));
  GBX_ASSIGN_OR_RETURN(RuntimeValue y, call1(ctx, "LayerNormalization", 17, in, *ctx.op().attrs));
  ctx.set_output_value(0, std::move(y));
  return Status::OK();
}

}  // namespace

GBX_REGISTER_KERNEL({kGearboxDomain, "LayerNormalization", 1, 1, kEngineRef, {}, layer_norm});
GBX_REGISTER_KERNEL({kGearboxDomain, "SkipLayerNormalization", 1, 1, kEngineRef, {}, skip_layer_norm});

}  // namespace gearbox::ref::fused
