// The reference kernels of the com.gearbox fused operators are compositions of the
// reference kernels of the operators they replace, so a fused graph computes exactly what
// the unfused one did (same kernels, same order) until fast fused kernels exist. This helper
// runs one registered reference kernel on given values with given attributes.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/kernel.h"

namespace gearbox::ref::fused {

inline constexpr std::string_view kDomain = "com.gearbox";

// Runs ai.onnx `op` at `opset` on the reference engine; returns its first `nout` outputs.
inline Result<std::vector<RuntimeValue>> call(const KernelContext& parent, std::string_view op, int opset,
                                              const std::vector<const RuntimeValue*>& inputs,
                                              const AttributeMap& attrs = {}, size_t nout = 1) {
  DType dt = DType::Undefined;
  if (!inputs.empty() && inputs[0] && inputs[0]->is_tensor()) dt = inputs[0]->tensor().dtype();
  const KernelDef* def = KernelRegistry::global().find("", op, opset, kEngineRef, dt);
  if (!def)
    return parent.error(ErrorCode::DTYPE_UNSUPPORTED, "no reference ", op, " kernel for dtype ", dtype_name(dt));
  std::vector<RuntimeValue> outs(nout);
  KernelContext ctx(OpInfo{parent.op().name, op, "", opset, &attrs}, inputs, &outs, std::vector<bool>(nout, true));
  GBX_RETURN_IF_ERROR(def->fn(ctx));
  return outs;
}

// Single-output form: the result's tensor.
inline Result<RuntimeValue> call1(const KernelContext& parent, std::string_view op, int opset,
                                  const std::vector<const RuntimeValue*>& inputs, const AttributeMap& attrs = {}) {
  GBX_ASSIGN_OR_RETURN(auto outs, call(parent, op, opset, inputs, attrs, 1));
  return std::move(outs[0]);
}

inline Attribute float_attr(float v) {
  Attribute a;
  a.type = AttrType::Float;
  a.f = v;
  return a;
}
inline Attribute int_attr(int64_t v) {
  Attribute a;
  a.type = AttrType::Int;
  a.i = v;
  return a;
}
inline Attribute ints_attr(std::vector<int64_t> v) {
  Attribute a;
  a.type = AttrType::Ints;
  a.ints = std::move(v);
  return a;
}

// Applies the activation a fusion absorbed: the node's "activation" attribute names the
// ai.onnx operator (Relu, Clip, Sigmoid, HardSigmoid, HardSwish, LeakyRelu, Tanh, Silu,
// Gelu, GeluTanh; "" = none) and "activation_params" holds its float parameters (alpha,
// beta for HardSigmoid/LeakyRelu; min, max for Clip).
Result<RuntimeValue> apply_activation(const KernelContext& ctx, RuntimeValue x);

// Gelu of float32/float64 tensors: 0.5 x (1 + erf(x / sqrt 2)), or the tanh form.
Result<Tensor> gelu(const KernelContext& ctx, const Tensor& x, bool tanh_form);

}  // namespace gearbox::ref::fused
