// ONNX import: an .onnx file (or bytes) into the gearbox IR, on libonnx's protobuf types.
//
// Import runs onnx's checker and shape inference, converts every initializer (raw_data,
// typed fields and external data next to the model), every attribute (subgraphs
// included) and sorts nodes topologically. Bad files end in a catalogue error
// (FILE_NOT_FOUND, FILE_EMPTY, MODEL_PARSE_FAILED, MODEL_NOT_A_MODEL, MODEL_INVALID,
// OPSET_UNSUPPORTED, EXTERNAL_DATA_INVALID, GRAPH_CYCLE), never a crash.
#pragma once

#include <string>

#include "base/progress.h"
#include "base/status.h"
#include "graph/ir.h"
#include "kernels/kernel.h"

namespace gearbox {

struct ImportOptions {
  bool check_model = true;   // onnx::checker::check_model
  bool infer_shapes = true;  // onnx::shape_inference::InferShapes
  // Told the phases: "read", "check", "infer shapes", "import" (gearbox compile shows them).
  Progress* progress = nullptr;
};

// The ai.onnx opset range gearbox accepts (the kernel registry's kNewestOnnxOpset: onnx_importer.cc
// asserts they agree).
inline constexpr int kMinOpset = 1;
inline constexpr int kMaxOpset = 21;
// The newest ONNX IR version gearbox reads (opset 21's).
inline constexpr int64_t kMaxIrVersion = 10;

Result<Model> import_onnx_file(const std::string& path, const ImportOptions& options = {});
// `base_dir` is where external data files are looked up; empty refuses external data.
Result<Model> import_onnx_bytes(const std::string& bytes, const std::string& base_dir,
                                const ImportOptions& options = {});

// Reads a serialized TensorProto (.pb, as in the ONNX test suites).
Result<Tensor> load_tensor_pb(const std::string& path);
// Reads a serialized TensorProto, SequenceProto or OptionalProto, guided by the type the
// model declares for that input or output.
Result<RuntimeValue> load_value_pb(const std::string& path, const ValueType& type);

}  // namespace gearbox
