// For the fast engines' kernel tests: the engine a session would run a kernel call on -- the
// first of a priority list whose kernel accepts the call's inputs and attributes
// (kernels/kernel_support.h kernel_accepts, the rule the partitioner and the executor apply) --
// and the call's result there. Tests assert the chosen engine where they once counted a
// kernel's internal hand-overs to the reference.
#pragma once

#include <string>
#include <vector>

#include "kernels/kernel_support.h"
#include "kernels/kernel_test_util.h"

namespace gearbox::testing {

struct EngineRun {
  std::string engine;  // empty when no engine of the list accepts the call
  Result<std::vector<Tensor>> result;
};

// The engine of `engines` that takes `call`, and its result.
inline EngineRun run_on_first_accepting(KernelCall call, const std::vector<std::string>& engines) {
  std::vector<RuntimeValue> in_values;
  for (const auto& t : call.inputs) in_values.push_back(t.defined() ? RuntimeValue(t) : RuntimeValue());
  std::vector<const RuntimeValue*> in_ptrs;
  for (const auto& v : in_values) in_ptrs.push_back(&v);
  std::vector<RuntimeValue> outs(call.num_outputs);
  OpInfo info{"test", call.op_type, call.domain, call.opset, &call.attrs};
  KernelContext ctx(info, in_ptrs, &outs, std::vector<bool>(call.num_outputs, true));
  ctx.set_constant_inputs(call.constant_inputs);
  ctx.set_engines(&engines);
  // The rule the executor and the fused kernels use (kernels/kernel_support.h).
  if (const KernelDef* def = find_kernel_for(ctx, ctx)) {
    call.engine = std::string(def->engine);
    return {call.engine, run_kernel(call)};
  }
  return {"", make_error(ErrorCode::OP_UNSUPPORTED, "no engine of the list accepts ", call.op_type)};
}

}  // namespace gearbox::testing
