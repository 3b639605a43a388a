// Runs one ONNX node-suite case in the current process: import model.onnx, create a
// Session, feed every test_data_set_*/input_N.pb, compare every output_N.pb.
//
// The conformance driver calls this inside a forked child, so a crash or a hang here costs
// one case, never the run. Nothing here forks, times or prints.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "value_compare.h"

namespace gearbox::conformance {

enum class CaseStatus { Pass, Fail, Unsupported, Crash, Timeout };
const char* status_name(CaseStatus s);  // "PASS", "FAIL", ...

struct CaseOutcome {
  CaseStatus status = CaseStatus::Pass;
  std::string code;   // catalogue name ("OP_UNSUPPORTED") when the run ended in an error
  int code_num = 0;   // catalogue number (3001)
  std::string message;
};

// The operators a model uses, subgraphs included: qualified op type ("Conv",
// "ai.onnx.ml.LabelEncoder") -> the opset the model imports for its domain.
using OpUses = std::map<std::string, int>;
OpUses model_ops(const Model& model);

struct CaseOptions {
  Tolerance tolerance;
  int threads = 1;
  // Optimize, write the .gbm bytes and read them back before running (the compiled path).
  bool via_gbm = false;
};

// `on_imported` is called with the model's ops as soon as the import succeeded, before
// anything runs, so the driver learns them even if the run then crashes.
CaseOutcome run_case(const std::string& case_dir, const CaseOptions& options,
                     const std::function<void(const OpUses&)>& on_imported);

// The conformance rule for errors: an OP_UNSUPPORTED message must name an op of the model
// and the opset it was asked for. Returns an explanation when `outcome` breaks the rule,
// an empty string otherwise.
std::string check_unsupported_message(const CaseOutcome& outcome, const OpUses& ops);

}  // namespace gearbox::conformance
