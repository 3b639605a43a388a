// Building a model's inputs for the CLI: from `--input NAME=FILE.npy` specs, and, with
// --random-inputs, deterministic stand-ins for the inputs not given. Shared by run (and
// later bench, profile and serve tests).
#pragma once

#include <CLI/CLI.hpp>
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
// `sample` > 0 gives other data of the same kind (the calibration set's sample-th input).
Result<Tensor> random_input(const IoInfo& io, uint64_t sample = 0);

// The input flags of the commands that run a model (run, profile, compare, bench).
struct InputFlags {
  std::vector<std::string> inputs;  // --input NAME=FILE.npy, repeatable
  bool random = false;              // --random-inputs: deterministic data for the inputs not given
  NpyReadOptions npy;               // --npy-allow-trailing-bytes
  // --strict-input-dtype: a .npy of another float dtype than its input's is refused
  // (INPUT_DTYPE_MISMATCH) rather than converted with a warning.
  bool strict_dtype = false;
};
// `random_help`: what --random-inputs says (bench fills the inputs not given anyway).
void add_input_flags(CLI::App* sub, InputFlags* flags,
                     const std::string& random_help = "Fill inputs not given with deterministic random data");

// Reads the --input files; a float .npy for an input of another float dtype (float32 data for
// a float16 model) is converted to the input's dtype with a warning, unless strict_dtype. With
// `random`, fills the model inputs not given. Missing inputs are left to Session's check
// (INPUT_MISSING names them).
Result<std::map<std::string, Tensor>> load_inputs(const Session& session, const InputFlags& flags);

// The calibration set of `gearbox compile --accuracy-budget`: one feed map per sample.
// From `dir` (when not empty): each subfolder is a sample holding INPUT.npy per model input
// (the name as sanitize_file_name writes it); a folder of .npy files without subfolders is,
// for a model with one input, one sample per file, and otherwise one sample of INPUT.npy
// files. Samples in name order. Else `random` deterministic samples (random_input). USAGE for
// a folder that holds none of these, naming what is missing.
Result<std::vector<std::map<std::string, Tensor>>> load_calibration(const std::vector<IoInfo>& inputs,
                                                                    const std::string& dir, size_t random,
                                                                    const NpyReadOptions& npy = {});

// "logits:0" -> "logits_0": an output name as a safe file name.
std::string sanitize_file_name(const std::string& name);

}  // namespace gearbox::cli
