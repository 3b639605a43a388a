// The eager dispatcher (see dispatch.h).
#include "frontend/dispatch.h"

#include <algorithm>
#include <string_view>

#include "base/buffer_source.h"
#include "base/strings.h"
#include "device/device.h"
#include "frontend/graph/trace_hook.h"
#include "frontend/tensor_impl.h"
#include "kernels/kernel.h"
#include "kernels/kernel_options.h"
#include "kernels/kernel_support.h"
#include "kernels/op_descriptor.h"
#include "runtime/session.h"

namespace gbx::nn {

namespace {

const std::vector<std::string>& engines() {
  static const std::vector<std::string> list = gearbox::split_list(gearbox::kDefaultEngines);
  return list;
}

// What a Session would install for its runs (kernels/kernel_options.h): this CPU's bf16 arithmetic.
const gearbox::KernelOptions& eager_kernel_options() {
  static const gearbox::KernelOptions options = [] {
    gearbox::KernelOptions o;
    o.bf16_arithmetic = gearbox::device::detect_cpu_capabilities().bf16_arithmetic();
    return o;
  }();
  return options;
}

// An eager op has no graph to type it. The contractions' cpu.dnnl kernels store Y as the graph
// types it and compute in bf16 where the node says so (runtime/precision.h), so a contraction
// with a bf16 or fp16 input is typed here as ONNX types it (Y in the inputs' dtype) and a bf16
// one computes in bf16 (products of bf16 values accumulated in fp32, as autocast means).
void type_reduced_contraction(const OpSpec& op, const std::vector<gearbox::Tensor>& inputs, gearbox::OpInfo& info) {
  if (gearbox::op_descriptor(op.domain, op.op_type).precision != gearbox::PrecisionClass::White) return;
  for (const gearbox::Tensor& t : inputs) {
    if (!t.defined() || (t.dtype() != gearbox::DType::BF16 && t.dtype() != gearbox::DType::F16)) continue;
    info.output_dtype = t.dtype();
    if (t.dtype() == gearbox::DType::BF16) info.compute_dtype = gearbox::DType::BF16;
    return;
  }
}

}  // namespace

std::vector<gearbox::Tensor> dispatch(const OpSpec& op, const std::vector<gearbox::Tensor>& inputs,
                                      const gearbox::AttributeMap& attrs, size_t num_outputs) {
  std::vector<gearbox::RuntimeValue> in_values;
  in_values.reserve(inputs.size());
  for (const gearbox::Tensor& t : inputs)
    in_values.push_back(t.defined() ? gearbox::RuntimeValue(t) : gearbox::RuntimeValue());
  std::vector<const gearbox::RuntimeValue*> in_ptrs;
  in_ptrs.reserve(in_values.size());
  for (const auto& v : in_values) in_ptrs.push_back(&v);
  std::vector<gearbox::RuntimeValue> outs(num_outputs);
  gearbox::OpInfo info{"eager", op.op_type, op.domain, op.opset, &attrs};
  type_reduced_contraction(op, inputs, info);
  gearbox::KernelOptionsScope kernel_options(&eager_kernel_options());
  gearbox::KernelContext ctx(info, std::move(in_ptrs), &outs, std::vector<bool>(num_outputs, true));
  ctx.set_engines(&engines());
  // The executor's rule: the first engine of the list whose kernel's declarations accept these inputs.
  const gearbox::KernelDef* def = gearbox::find_kernel_for(ctx, ctx);
  if (!def) {
    std::string dt =
        inputs.empty() || !inputs[0].defined() ? "none" : std::string(gearbox::dtype_name(inputs[0].dtype()));
    throw_status(gearbox::make_error(gearbox::ErrorCode::OP_UNSUPPORTED, "eager op ", op.op_type, " (opset ", op.opset,
                                     ") has no kernel for dtype ", dt, " on engines ", gearbox::kDefaultEngines));
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
      throw_status(
          gearbox::make_error(gearbox::ErrorCode::INTERNAL, "eager op ", op.op_type, " did not produce output ", i));
    result.push_back(std::move(outs[i].tensor()));
  }
  // Graph mode's tracer records the op (frontend/graph/tracer.h).
  if (TraceHook* hook = active_trace_hook()) hook->record(op, inputs, attrs, result);
  return result;
}

}  // namespace gbx::nn
