// ONNX export: a gearbox Model (graph IR) written as an ONNX ModelProto with libonnx's protobuf
// classes, the inverse of onnx_importer.h for what the IR holds. The framework's tracer
// (src/frontend/graph) is its user: a traced network leaves as .onnx through here.
//
// Initializers are written as raw_data (little-endian, as the machines gearbox runs on are),
// every value's type as value_info, the opsets as the model's opset_import. What ONNX cannot
// say about the IR (a node's engine) is dropped. Subgraph attributes (If/Loop/Scan bodies) are
// not written yet: GBM_UNSUPPORTED names the node.
#pragma once

#include <string>

#include "base/status.h"
#include "graph/ir.h"

namespace gearbox {

// The serialized ModelProto.
Result<std::string> export_onnx_bytes(const Model& model);
// export_onnx_bytes() into `path`, replaced atomically (FILE_WRITE_FAILED when it cannot be
// written).
Status export_onnx_file(const Model& model, const std::string& path);

}  // namespace gearbox
