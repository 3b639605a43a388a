// The eager dispatcher (see dispatch.h).
#include "frontend/dispatch.h"

#include <algorithm>
#include <string_view>

#include "base/strings.h"
#include "frontend/tensor_impl.h"
#include "kernels/kernel.h"
#include "kernels/kernel_support.h"
#include "base/buffer_source.h"
#include "runtime/session.h"

namespace gbx::nn {

namespace {

const std::vector<std::string>& engines() {
  static const std::vector<std::string> list = gearbox::split_list(gearbox::kDefaultEngines);
  return list;
}

// The executor's rule (Executor::pick_kernel): the first engine in priority order whose
// kernel accepts the dtype of the input that decides it and whose declarations
// (kernels/kernel_support.h) accept these inputs.
const gearbox::KernelDef* pick(const OpSpec& op, const std::vector<gearbox::Tensor>& inputs,
                               const gearbox::KernelContext& ctx) {
  const gearbox::KernelQuery q = gearbox::KernelQuery::of(ctx);
  const auto& registry = gearbox::KernelRegistry::global();
  for (const std::string& engine : engines()) {
    for (const gearbox::KernelDef& def : registry.all()) {
      if (def.op_type != op.op_type || def.domain != op.domain || def.engine != engine) continue;
      if (op.opset < def.since_version || op.opset > def.end_version) continue;
      size_t di = static_cast<size_t>(def.dtype_input);
      gearbox::DType dt = di < inputs.size() && inputs[di].defined() ? inputs[di].dtype() : gearbox::DType::Undefined;
      if (dt != gearbox::DType::Undefined && !def.dtypes.empty() &&
          std::find(def.dtypes.begin(), def.dtypes.end(), dt) == def.dtypes.end())
        continue;
      if (!gearbox::kernel_accepts(def, q).accepted()) continue;
      return &def;
    }
  }
  return nullptr;
}

}  // namespace

std::vector<gearbox::Tensor> dispatch(const OpSpec& op, const std::vector<gearbox::Tensor>& inputs,
                                      const gearbox::AttributeMap& attrs, size_t num_outputs) {
  std::vector<gearbox::RuntimeValue> in_values;
  in_values.reserve(inputs.size());
  for (const gearbox::Tensor& t : inputs) in_values.push_back(t.defined() ? gearbox::RuntimeValue(t) : gearbox::RuntimeValue());
  std::vector<const gearbox::RuntimeValue*> in_ptrs;
  in_ptrs.reserve(in_values.size());
  for (const auto& v : in_values) in_ptrs.push_back(&v);
  std::vector<gearbox::RuntimeValue> outs(num_outputs);
  gearbox::OpInfo info{"eager", op.op_type, op.domain, op.opset, &attrs};
  gearbox::KernelContext ctx(info, std::move(in_ptrs), &outs, std::vector<bool>(num_outputs, true));
  ctx.set_engines(&engines());
  const gearbox::KernelDef* def = pick(op, inputs, ctx);
  if (!def) {
    std::string dt = inputs.empty() || !inputs[0].defined() ? "none" : std::string(gearbox::dtype_name(inputs[0].dtype()));
    throw_status(gearbox::make_error(gearbox::ErrorCode::OP_UNSUPPORTED, "eager op ", op.op_type, " (opset ",
                                     op.opset, ") has no kernel for dtype ", dt, " on engines ",
                                     gearbox::kDefaultEngines));
  }
  gearbox::Status st;
  try {
    st = def->fn(ctx);
  } catch (const gearbox::BufferSourceError& e) {
    st = e.status();
  }
  throw_if_error(st);
  std::vector<gearbox::Tensor> result;
  result.reserve(num_outputs);
  for (size_t i = 0; i < num_outputs; ++i) {
    if (!outs[i].is_tensor())
      throw_status(gearbox::make_error(gearbox::ErrorCode::INTERNAL, "eager op ", op.op_type, " did not produce output ", i));
    result.push_back(std::move(outs[i].tensor()));
  }
  return result;
}

}  // namespace gbx::nn
