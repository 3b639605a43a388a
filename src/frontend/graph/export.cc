// export_onnx and export_gbm: a traced function written as ONNX, or compiled the way `gearbox
// compile` compiles an .onnx (src/tools/compile_command.cc) and written as a .gbm.
#include "device/device.h"
#include "frontend/graph/tracer.h"
#include "frontend/tensor_impl.h"
#include "graph/gbm/gbm_writer.h"
#include "graph/onnx_exporter.h"
#include "runtime/session.h"

namespace gbx::nn {

namespace {

// gearbox compile's steps after the import: the options a default session resolves (with the
// memory plan, which the .gbm stores), the passes and partitioning, then the file with this
// build's CPU features as its requirement (--target native) and the optimizer's report.
void write_gbm(gearbox::Model model, const std::string& path) {
  gearbox::SessionOptions base;
  base.optimizer.plan_memory = true;
  gearbox::Result<gearbox::SessionOptions> resolved = gearbox::resolve_session_options(base);
  throw_if_error(resolved.status());
  gearbox::Result<gearbox::OptimizedModel> optimized = gearbox::optimize_and_partition(model, resolved.value());
  throw_if_error(optimized.status());
  gearbox::gbm::WriteOptions wo;
  wo.required_isa = gearbox::device::build_required_isa();
  wo.optimizer_report_json = optimized.value().report.to_json(/*with_timings=*/false);
  wo.memory = optimized.value().report.memory;
  throw_if_error(gearbox::gbm::write_file(model, path, wo));
}

}  // namespace

void export_onnx(const TensorFunction& fn, const std::vector<Tensor>& example_inputs, const std::string& path,
                 const TraceOptions& options) {
  TraceResult traced = trace_to_model(fn, example_inputs, options);
  throw_if_error(gearbox::export_onnx_file(traced.model, path));
}

void export_onnx(Module& module, const Tensor& example_input, const std::string& path, TraceOptions options) {
  name_module_tensors(module, &options);
  export_onnx(module_function(module), {example_input}, path, options);
}

void export_gbm(const TensorFunction& fn, const std::vector<Tensor>& example_inputs, const std::string& path,
                const TraceOptions& options) {
  write_gbm(trace_to_model(fn, example_inputs, options).model, path);
}

void export_gbm(Module& module, const Tensor& example_input, const std::string& path, TraceOptions options) {
  name_module_tensors(module, &options);
  export_gbm(module_function(module), {example_input}, path, options);
}

}  // namespace gbx::nn
