// The --dump-tensors / --dump-dir options shared by `gearbox run` and `gearbox profile`:
// parses and checks the patterns against the loaded session (runtime/tensor_dump.h), then
// runs the model once more with a TensorDumper attached, outside the timed or profiled runs.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

#include "runtime/session.h"

namespace gearbox::cli {

struct DumpOptions {
  std::vector<std::string> patterns;  // --dump-tensors (repeatable)
  std::string dir = "gearbox_dump";   // --dump-dir
  bool raw_layout = false;            // --dump-raw-layout: the engine's layout, not the model's
  bool enabled() const { return !patterns.empty(); }
};

void add_dump_options(CLI::App* sub, DumpOptions* o);

// Checks the patterns before anything runs: USAGE for a bad pattern or one that matches no
// node that runs (logs a warning for a pattern that lost some nodes to the optimizer).
Status check_dump(const DumpOptions& o, const Session& session, const std::string& model_path);

// One run with the dumper attached; writes the .npy files and index.json. Returns the number
// of files written.
Result<size_t> run_dump(const DumpOptions& o, const Session& session, const std::map<std::string, Tensor>& feeds);

}  // namespace gearbox::cli
