// Writes a compiled model (.gbm): the (already optimized) graph, its signature, the
// required CPU features and the memory plan as FlatBuffers metadata, and the initializers
// as a 64-byte-aligned weight blob. `gearbox compile` is the user of this.
#pragma once

#include <string>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "graph/ir.h"
#include "graph/memory_plan.h"

namespace gearbox::gbm {

struct WriteOptions {
  std::vector<std::string> required_isa;  // CPU features a loader must have (empty: generic)
  std::string optimizer_report_json;       // OptimizerReport::to_json() of the compile
  MemoryPlan memory;                        // the optimizer's memory plan
  // Features a reader must implement to load the file (gbm.fbs required_features); none yet.
  std::vector<std::string> required_features;
  // The version recorded as the file's writer; empty: this gearbox's (tests write others).
  std::string gearbox_version;
  // Told the phases "pack weights" (bytes of initializers copied into the blob) and "write"
  // (bytes written): gearbox compile shows them.
  Progress* progress = nullptr;
};

// The file's bytes: every graph (subgraphs included), each node's engine, the weights.
// GBM_UNSUPPORTED when the graph is not self-contained (a node reads a value no graph of the
// model defines, or a graph attribute has no graph).
Result<std::string> serialize(const Model& model, const WriteOptions& options);
// serialize() into `path` (FILE_WRITE_FAILED when it cannot be written).
Status write_file(const Model& model, const std::string& path, const WriteOptions& options);

}  // namespace gearbox::gbm
