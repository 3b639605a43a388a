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
  const KernelQuery q = KernelQuery::of(ctx);
  for (const std::string& engine : engines)
    for (const KernelDef& def : KernelRegistry::global().all())
      if (def.engine == engine && def.op_type == call.op_type && def.domain == call.domain &&
          call.opset >= def.since_version && call.opset <= def.end_version && kernel_accepts(def, q).accepted()) {
        call.engine = engine;
        return {engine, run_kernel(call)};
      }
  return {"", make_error(ErrorCode::OP_UNSUPPORTED, "no engine of the list accepts ", call.op_type)};
}

}  // namespace gearbox::testing
