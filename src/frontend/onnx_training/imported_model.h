// An imported ONNX model as a trainable function (`gearbox train`, issue 22 item 7): the graph
// engine's importer reads the model, and forward() runs its nodes in topological order through
// the eager dispatcher with the tape recording, the trained initializers as leaf Tensors that
// require a gradient. So fine-tuning an imported model uses the same kernels, tape and gradient
// builders (autodiff/gradients/) as a network written with nn.hpp, and any nn optimizer.
//
// Which initializers are trained: the float32 ones from which a differentiable path leads to the
// loss output. Integer initializers, those feeding only shape computations (Reshape's shape,
// Slice's starts, ...) and BatchNormalization's running mean and variance are not (frozen()).
// Every node on such a path must have a gradient builder: load() refuses OP_UNSUPPORTED naming
// the node and its op otherwise, before anything runs.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gearbox/nn.hpp"

namespace gearbox {
struct Model;
struct Value;
}  // namespace gearbox

namespace gbx::nn::onnx_training {

class ImportedModel {
 public:
  // Imports `path` and selects the loss output: `output` names one, "" takes the first
  // (OUTPUT_UNKNOWN when there is none of that name). Errors are nn::Error with the importer's
  // code (FILE_NOT_FOUND, MODEL_PARSE_FAILED, ...), OP_UNSUPPORTED (a node without a gradient
  // on a trained path), INVALID_ARGUMENT (no float32 initializer reaches the output).
  static ImportedModel load(const std::string& path, const std::string& output = "");
  ~ImportedModel();
  ImportedModel(ImportedModel&&) noexcept;
  ImportedModel& operator=(ImportedModel&&) noexcept;

  // The graph inputs (initializers excluded), in the model's order.
  struct Input {
    std::string name;
    std::string dtype;          // "float32", "int64", ...
    std::vector<int64_t> dims;  // -1 for a symbolic or unknown dim
    bool ranked = false;
  };
  const std::vector<Input>& inputs() const { return inputs_; }
  const std::string& output_name() const { return output_name_; }

  // The trained initializers, in the model's initializer order: leaf tensors requiring a
  // gradient, updated in place by an optimizer.
  const std::vector<std::pair<std::string, Tensor>>& parameters() const { return params_; }
  std::vector<Tensor> parameter_tensors() const;
  // Float initializers that are not trained, with the reason ("shape input of Reshape 'r'", ...).
  const std::vector<std::pair<std::string, std::string>>& frozen() const { return frozen_; }

  // Runs the graph on `feeds` (every input by name; INPUT_MISSING otherwise) and returns the
  // loss output. With grad mode on, the tape records every op that reads a parameter.
  Tensor forward(const std::map<std::string, Tensor>& feeds) const;

 private:
  ImportedModel() = default;
  std::unique_ptr<gearbox::Model> model_;
  const gearbox::Value* output_ = nullptr;
  std::string output_name_;
  std::vector<Input> inputs_;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::map<const gearbox::Value*, Tensor> constants_;  // every initializer, parameters included
  std::vector<std::pair<std::string, std::string>> frozen_;
  std::vector<bool> on_grad_path_;  // per node (graph order): reads a parameter, leads to the output
};

// Writes `original_path`'s ModelProto to `out_path` with the initializers named in `params`
// replaced by their values (float32, raw_data); every other field stays as it was (external
// data of a replaced initializer is inlined). FILE_NOT_FOUND / MODEL_PARSE_FAILED /
// FILE_WRITE_FAILED; INTERNAL when a name is not an initializer of the model.
void write_tuned_onnx(const std::string& original_path, const std::string& out_path,
                      const std::vector<std::pair<std::string, Tensor>>& params);

}  // namespace gbx::nn::onnx_training
