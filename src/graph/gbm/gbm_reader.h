// Loads a compiled model (.gbm) into a Model whose graph is already optimized: the caller
// must not run the graph passes again (Session does this for .gbm files).
//
// Every check refuses with its own code and never crashes: GBM_NOT_GBM (magic),
// GBM_VERSION_NEWER, GBM_TRUNCATED (a section outside the file), GBM_CHECKSUM_MISMATCH,
// GBM_INVALID (FlatBuffers verification, indices, offsets, dtypes, the graph's structure),
// GBM_ISA_MISSING (a required CPU feature this CPU lacks; honours
// GEARBOX_SIMULATE_MISSING_ISA), GBM_VERSION_NEWER also for a required feature this gearbox
// does not implement (the file's required_features; the message names the gearbox version that wrote the file). Every error and
// the [GBM] INFO line of a successful read name the gearbox version that compiled the file.
// Initializers borrow the mmap'ed weight blob.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "graph/ir.h"

namespace gearbox::gbm {

// What a .gbm records besides the graph.
struct Info {
  uint32_t format_version = 0;
  std::string gearbox_version;
  std::vector<std::string> required_isa;
  std::vector<std::string> required_features;  // all known to this gearbox, or the read failed
  std::string precision;
  std::string optimizer_report_json;
  uint64_t naive_bytes = 0, planned_bytes = 0, lower_bound_bytes = 0;
};

// True when the file starts with the .gbm magic bytes (false if it cannot be read).
bool is_gbm_file(const std::string& path);

Result<Model> read_file(const std::string& path, Info* info = nullptr);
// From bytes in memory (copied into an aligned buffer the initializers borrow).
Result<Model> read_bytes(const void* data, size_t size, Info* info = nullptr);

}  // namespace gearbox::gbm
