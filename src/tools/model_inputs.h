// Building a model's inputs for the CLI: from `--input NAME=FILE.npy` specs, and, with
// --random-inputs, deterministic stand-ins for the inputs not given. Shared by run (and
// later bench, profile and serve tests).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/npy.h"
#include "runtime/session.h"

namespace gearbox::cli {

// Deterministic data for one input: floats uniform in [-1, 1]; integer inputs whose name
// suggests a mask get ones, token-type/segment ids zeros, other integers ids in [0, 64);
// bool true. Symbolic dims
// become 1. The seed comes from the input's name, so every run sees the same data.
Result<Tensor> random_input(const IoInfo& io);

// Parses "NAME=FILE.npy" specs and reads the files; with `random`, fills the model inputs
// not given. Missing inputs are left to Session's check (INPUT_MISSING names them).
// `npy` says what the .npy reader tolerates (--npy-allow-trailing-bytes).
Result<std::map<std::string, Tensor>> load_inputs(const Session& session, const std::vector<std::string>& specs,
                                                  bool random, const NpyReadOptions& npy = {});

// "logits:0" -> "logits_0": an output name as a safe file name.
std::string sanitize_file_name(const std::string& name);

}  // namespace gearbox::cli
