// The eager dispatcher: runs one ONNX (or com.gearbox) op on kernel-layer tensors by looking
// up the KernelRegistry in the session's default engine priority (cpu.simd, cpu.dnnl, then
// cpu.ref) exactly as the executor picks a node's kernel, so eager and graph runs share the
// kernels. Autodiff-free: ops.h records the tape around it. While a trace is active
// (frontend/graph/trace_hook.h) every op it ran is reported to the tracer.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/tensor.h"
#include "kernels/attributes.h"

namespace gbx::nn {

// The op every eager call names: opset 17 unless the op needs another.
struct OpSpec {
  OpSpec(std::string type, std::string dom = "", int version = 17)  // NOLINT: {"Relu"} reads well
      : op_type(std::move(type)), domain(std::move(dom)), opset(version) {}
  std::string op_type;
  std::string domain;  // "" is ai.onnx
  int opset = 17;
};

// Runs the op; an undefined input is an omitted optional input. Throws nn::Error with the
// kernel's catalogue code on failure.
std::vector<gearbox::Tensor> dispatch(const OpSpec& op, const std::vector<gearbox::Tensor>& inputs,
                                      const gearbox::AttributeMap& attrs, size_t num_outputs = 1);

}  // namespace gbx::nn
