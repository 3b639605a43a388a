// Runs one registered kernel directly, without a model: for per-op unit tests.
//
//   auto out = run_kernel("Relu", 14, {x});
//   ASSERT_TRUE(out.ok()) << out.status().to_string();
//   const Tensor& y = out.value()[0];
#pragma once

#include <string>
#include <vector>

#include "kernels/kernel.h"

namespace gearbox::testing {

struct KernelCall {
  std::string op_type;
  int opset = 17;
  std::vector<Tensor> inputs;  // an undefined Tensor marks an omitted optional input
  AttributeMap attrs;
  size_t num_outputs = 1;
  std::string domain;
  std::string engine{kEngineRef};
  std::vector<bool> constant_inputs;  // which inputs stand for initializers (none by default)
  NodeCache* node_cache = nullptr;     // the node's cache in a plan (none by default)
};

// A call with the commonly varied fields set (aggregate initialization with fields left out
// trips -Wmissing-field-initializers); set attrs/num_outputs on the result as needed.
inline KernelCall make_call(std::string op, int opset, std::vector<Tensor> inputs) {
  KernelCall c;
  c.op_type = std::move(op);
  c.opset = opset;
  c.inputs = std::move(inputs);
  return c;
}

inline Result<std::vector<Tensor>> run_kernel(const KernelCall& call) {
  DType dt = call.inputs.empty() || !call.inputs[0].defined() ? DType::Undefined : call.inputs[0].dtype();
  const KernelDef* def =
      KernelRegistry::global().find(call.domain, call.op_type, call.opset, call.engine, dt);
  if (!def) return make_error(ErrorCode::OP_UNSUPPORTED, "no kernel for ", call.op_type, " opset ", call.opset);
  std::vector<RuntimeValue> in_values;
  in_values.reserve(call.inputs.size());
  for (const auto& t : call.inputs) in_values.push_back(t.defined() ? RuntimeValue(t) : RuntimeValue());
  std::vector<const RuntimeValue*> in_ptrs;
  for (const auto& v : in_values) in_ptrs.push_back(&v);
  std::vector<RuntimeValue> outs(call.num_outputs);
  OpInfo info{"test", call.op_type, call.domain, call.opset, &call.attrs};
  KernelContext ctx(info, in_ptrs, &outs, std::vector<bool>(call.num_outputs, true));
  ctx.set_constant_inputs(call.constant_inputs);
  ctx.set_node_cache(call.node_cache);
  GBX_RETURN_IF_ERROR(def->fn(ctx));
  std::vector<Tensor> result;
  for (auto& o : outs) result.push_back(o.is_tensor() ? o.tensor() : Tensor());
  return result;
}

// The attribute builders live in kernels/attributes.h; re-exported for the tests.
using gearbox::attr_float;
using gearbox::attr_floats;
using gearbox::attr_int;
using gearbox::attr_ints;
using gearbox::attr_string;

}  // namespace gearbox::testing
