// Session: the one object the CLI, the tests (and later the C API and the server) use to
// run a model. It loads a model, checks inputs against the model's signature, and runs the
// executor.
//
//   GBX_ASSIGN_OR_RETURN(auto session, Session::load("model.onnx"));
//   std::map<std::string, Tensor> feeds{{"x", x}};
//   GBX_ASSIGN_OR_RETURN(auto outputs, session->run(feeds));  // in model output order
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "graph/ir.h"
#include "graph/optimizer.h"
#include "kernels/kernel.h"

namespace gearbox {

struct SessionOptions {
  int threads = 0;                   // 0: GEARBOX_NUM_THREADS, else all cores
  std::string engine{kEngineRef};    // the engine kernels are taken from
  bool check_model = true;           // run onnx's checker at import
  OptimizerOptions optimizer;        // graph passes run at create (graph/optimizer.h)
};

// A model input or output as the model declares it.
struct IoInfo {
  std::string name;
  ValueType type;
};

class Executor;

class Session {
 public:
  ~Session();
  // Loads an .onnx model (later also .gbm).
  static Result<std::unique_ptr<Session>> load(const std::string& path, SessionOptions options = {});
  // Wraps an already imported model.
  static Result<std::unique_ptr<Session>> create(Model model, SessionOptions options = {});

  const std::vector<IoInfo>& inputs() const { return inputs_; }
  const std::vector<IoInfo>& outputs() const { return outputs_; }
  const Model& model() const { return model_; }

  // Runs with named inputs; returns outputs in the model's output order. Every model input
  // must be given (INPUT_MISSING), names must exist (INPUT_UNKNOWN), dtypes and fixed dims
  // must match (INPUT_DTYPE_MISMATCH, INPUT_SHAPE_MISMATCH).
  Result<std::vector<RuntimeValue>> run_values(const std::map<std::string, RuntimeValue>& inputs) const;
  // Tensor-only convenience wrapper (sequence/optional outputs are an error here).
  Result<std::vector<Tensor>> run(const std::map<std::string, Tensor>& inputs) const;

 private:
  Session() = default;
  Status validate(const std::map<std::string, RuntimeValue>& inputs) const;

  Model model_;
  SessionOptions options_;
  std::vector<IoInfo> inputs_, outputs_;
  std::unique_ptr<Executor> executor_;
};

}  // namespace gearbox
