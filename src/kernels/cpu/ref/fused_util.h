// The reference kernels of the com.gearbox fused operators are compositions of the kernels of
// the operators they replace, picked through the session's engine list exactly as the executor
// picks them for unfused nodes, so a fused graph computes what the unfused one did (same
// kernels, same order) until fast fused kernels exist. This helper runs one such kernel on
// given values with given attributes, and notes the inner kernel's engine on the parent so the
// profile reports every engine whose code ran for the fused node (KernelContext::inner_engines).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/kernel_support.h"

namespace gearbox::ref::fused {

// Runs ai.onnx `op` at `opset` on the first engine of the parent's list that has a kernel for
// it; returns its first `nout` outputs. An input that is one of the parent's constant inputs
// stays marked constant (so e.g. oneDNN keeps its packed weights).
inline Result<std::vector<RuntimeValue>> call(const KernelContext& parent, std::string_view op, int opset,
                                              const std::vector<const RuntimeValue*>& inputs,
                                              const AttributeMap& attrs = {}, size_t nout = 1) {
  std::vector<RuntimeValue> outs(nout);
  KernelContext ctx(OpInfo{parent.op().name, op, "", opset, &attrs}, inputs, &outs, std::vector<bool>(nout, true));
  ctx.set_engines(parent.engines());
  std::vector<bool> constant(inputs.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t j = 0; j < parent.num_inputs(); ++j)
      if (inputs[i] && parent.input_is_constant(j) && inputs[i] == &parent.input_value(j)) constant[i] = true;
  ctx.set_constant_inputs(std::move(constant));
  const KernelDef* def = find_kernel_for(parent, ctx);
  if (!def) {
    DType dt = DType::Undefined;
    if (!inputs.empty() && inputs[0] && inputs[0]->is_tensor()) dt = inputs[0]->tensor().dtype();
    return parent.error(ErrorCode::DTYPE_UNSUPPORTED, "no ", op, " kernel for dtype ", dtype_name(dt));
  }
  GBX_RETURN_IF_ERROR(def->fn(ctx));
  parent.note_inner_engine(def->engine);
  for (std::string_view e : ctx.inner_engines()) parent.note_inner_engine(e);
  return outs;
}

// Single-output form: the result's tensor.
inline Result<RuntimeValue> call1(const KernelContext& parent, std::string_view op, int opset,
                                  const std::vector<const RuntimeValue*>& inputs, const AttributeMap& attrs = {}) {
  GBX_ASSIGN_OR_RETURN(auto outs, call(parent, op, opset, inputs, attrs, 1));
  return std::move(outs[0]);
}

// Applies the activation a fusion absorbed: the node's "activation" attribute names the
// ai.onnx operator (Relu, Clip, Sigmoid, HardSigmoid, HardSwish, LeakyRelu, Tanh, Silu,
// Gelu, GeluTanh; "" = none) and "activation_params" holds its float parameters (alpha,
// beta for HardSigmoid/LeakyRelu; min, max for Clip).
Result<RuntimeValue> apply_activation(const KernelContext& ctx, RuntimeValue x);

// Gelu of float32/float64 tensors: 0.5 x (1 + erf(x / sqrt 2)), or the tanh form.
Result<Tensor> gelu(const KernelContext& ctx, const Tensor& x, bool tanh_form);

}  // namespace gearbox::ref::fused
