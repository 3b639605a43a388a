// com.gearbox.Attention (reference): multi-head scaled dot-product attention together with
// the reshapes and transposes exporters put around it:
//   Q = Transpose(Reshape(q, q_shape), q_perm)      (usually [B, H, S, Dh])
//   K = Transpose(Reshape(k, k_shape), k_perm)      (usually [B, H, Dh, S])
//   V = Transpose(Reshape(v, v_shape), v_perm)
//   P = Softmax(MatMul(Q, K) (/ or *) scale [+ mask], softmax_axis)
//   Y = Reshape(Transpose(MatMul(P, V), out_perm), out_shape)
// Inputs: 0 q, 1 k, 2 v, 3 scale (scalar), 4 q_shape, 5 k_shape, 6 v_shape, 7 out_shape,
// 8 mask (optional, added). Attributes: q_perm, k_perm, v_perm, out_perm, scale_is_div,
// softmax_axis, softmax_opset, num_heads (informational).
#include "kernels/cpu/ref/fused_util.h"

namespace gearbox::ref::fused {
namespace {

Result<RuntimeValue> reshape_transpose(const KernelContext& ctx, const RuntimeValue& x, const RuntimeValue& shape,
                                       const std::vector<int64_t>& perm) {
  GBX_ASSIGN_OR_RETURN(RuntimeValue r, call1(ctx, "Reshape", 14, {&x, &shape}));
  return call1(ctx, "Transpose", 13, {&r}, {{"perm", attr_ints(perm)}});
}

Status attention(KernelContext& ctx) {
  for (size_t i = 0; i < 8; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const std::vector<int64_t> p0213{0, 2, 1, 3};
  GBX_ASSIGN_OR_RETURN(RuntimeValue q,
                       reshape_transpose(ctx, ctx.input_value(0), ctx.input_value(4), ctx.attr_ints("q_perm", p0213)));
  GBX_ASSIGN_OR_RETURN(RuntimeValue k, reshape_transpose(ctx, ctx.input_value(1), ctx.input_value(5),
                                                         ctx.attr_ints("k_perm", {0, 2, 3, 1})));
  GBX_ASSIGN_OR_RETURN(RuntimeValue v,
                       reshape_transpose(ctx, ctx.input_value(2), ctx.input_value(6), ctx.attr_ints("v_perm", p0213)));
  GBX_ASSIGN_OR_RETURN(RuntimeValue s, call1(ctx, "MatMul", 13, {&q, &k}));
  GBX_ASSIGN_OR_RETURN(s, call1(ctx, ctx.attr_int("scale_is_div", 1) ? "Div" : "Mul", 14, {&s, &ctx.input_value(3)}));
  if (ctx.has_input(8)) {
    GBX_ASSIGN_OR_RETURN(s, call1(ctx, "Add", 14, {&s, &ctx.input_value(8)}));
  }
  GBX_ASSIGN_OR_RETURN(s, call1(ctx, "Softmax", static_cast<int>(ctx.attr_int("softmax_opset", 13)), {&s},
                                {{"axis", attr_int(ctx.attr_int("softmax_axis", -1))}}));
  GBX_ASSIGN_OR_RETURN(RuntimeValue o, call1(ctx, "MatMul", 13, {&s, &v}));
  GBX_ASSIGN_OR_RETURN(o, call1(ctx, "Transpose", 13, {&o}, {{"perm", attr_ints(ctx.attr_ints("out_perm", p0213))}}));
  GBX_ASSIGN_OR_RETURN(o, call1(ctx, "Reshape", 14, {&o, &ctx.input_value(7)}));
  ctx.set_output_value(0, std::move(o));
  return Status::OK();
}

}  // namespace

GBX_REGISTER_KERNEL({kGearboxDomain, "Attention", 1, 1, kEngineRef, {}, attention});

}  // namespace gearbox::ref::fused
