// Runs one ONNX node-suite case in-process (see case_runner.h).
#include "case_runner.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include "graph/gbm/gbm_reader.h"
#include "graph/gbm/gbm_writer.h"
#include "graph/onnx_importer.h"
#include "graph/optimizer.h"
#include "runtime/session.h"

namespace gearbox::conformance {
namespace fs = std::filesystem;

const char* status_name(CaseStatus s) {
  switch (s) {
    case CaseStatus::Pass: return "PASS";
    case CaseStatus::Fail: return "FAIL";
    case CaseStatus::Unsupported: return "UNSUPPORTED";
    case CaseStatus::Crash: return "CRASH";
    case CaseStatus::Timeout: return "TIMEOUT";
  }
  return "?";
}

namespace {

void collect_ops(const Graph& g, const OpsetMap& opsets, OpUses& out) {
  for (const auto& node : g.nodes) {
    auto it = opsets.find(node->domain);
    int opset = node->opset ? node->opset : (it != opsets.end() ? static_cast<int>(it->second) : 0);
    out.emplace(node->qualified_op(), opset);
    for (const auto& [name, attr] : node->attrs) {
      if (attr.g) collect_ops(*attr.g, opsets, out);
      for (const auto& sub : attr.graphs)
        if (sub) collect_ops(*sub, opsets, out);
    }
  }
}

CaseOutcome from_status(const Status& st, const std::string& context) {
  CaseOutcome o;
  o.status = CaseStatus::Unsupported;
  o.code = std::string(error_info(st.code()).name);
  o.code_num = static_cast<int>(st.code());
  o.message = context.empty() ? st.message() : context + ": " + st.message();
  return o;
}

CaseOutcome failure(std::string message) {
  CaseOutcome o;
  o.status = CaseStatus::Fail;
  o.message = std::move(message);
  return o;
}

std::vector<fs::path> numbered_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p);
  }
  return files;
}

// onnx 1.12's generators cannot write bfloat16 with numpy, so the suite stores a bfloat16
// input or output as a uint16 tensor holding the bit patterns (test_cast_*BFLOAT16*). Read
// such a tensor as the bfloat16 the model declares; ONNX's own runner does the same.
RuntimeValue adapt_suite_value(RuntimeValue v, const ValueType& declared) {
  if (declared.kind != ValueType::Kind::Tensor || declared.dtype != DType::BF16 || !v.is_tensor() ||
      v.tensor().dtype() != DType::U16)
    return v;
  const Tensor& bits = v.tensor();
  Tensor t(DType::BF16, bits.dims());
  if (bits.numel() > 0) std::memcpy(t.mutable_raw(), bits.raw(), bits.nbytes());
  return RuntimeValue(std::move(t));
}

}  // namespace

OpUses model_ops(const Model& model) {
  OpUses ops;
  if (model.graph) collect_ops(*model.graph, model.opsets, ops);
  return ops;
}

std::string check_unsupported_message(const CaseOutcome& outcome, const OpUses& ops) {
  if (outcome.status != CaseStatus::Unsupported || outcome.code != "OP_UNSUPPORTED") return {};
  for (const auto& [qualified, opset] : ops) {
    // Domains contain dots, op types never do: match the bare op type.
    std::string op = qualified.substr(qualified.rfind('.') == std::string::npos ? 0 : qualified.rfind('.') + 1);
    if (outcome.message.find(op) != std::string::npos &&
        outcome.message.find(std::to_string(opset)) != std::string::npos)
      return {};
  }
  return "OP_UNSUPPORTED message names no op of the model together with its opset";
}

CaseOutcome run_case(const std::string& case_dir, const CaseOptions& options,
                     const std::function<void(const OpUses&)>& on_imported) {
  const fs::path dir(case_dir);
  auto model = import_onnx_file((dir / "model.onnx").string());
  if (!model) return from_status(model.status(), "import");
  if (on_imported) on_imported(model_ops(*model));

  SessionOptions session_options;
  session_options.threads = options.threads;
  if (options.via_gbm) {
    // What gearbox compile + gearbox run do: optimize and partition with the session's
    // resolved options, write, read back, run without passes.
    auto resolved = resolve_session_options(session_options);
    if (!resolved) return from_status(resolved.status(), "options");
    auto optimized = optimize_and_partition(*model, *resolved);
    if (!optimized) return from_status(optimized.status(), "optimize");
    auto bytes = gbm::serialize(*model, {});
    if (!bytes) return from_status(bytes.status(), "gbm write");
    model = gbm::read_bytes(bytes->data(), bytes->size());
    if (!model) return from_status(model.status(), "gbm read");
    session_options.optimizer.enabled = false;
    session_options.optimizer.use_env = false;
  }
  auto session = Session::create(std::move(model).value(), session_options);
  if (!session) return from_status(session.status(), "session");
  const Session& s = **session;

  std::vector<fs::path> sets;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(entry.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return failure("case has no test_data_set_* folder");

  for (const auto& set : sets) {
    const std::string where = set.filename().string();
    auto input_files = numbered_files(set, "input_");
    auto output_files = numbered_files(set, "output_");
    if (input_files.size() > s.inputs().size())
      return failure(where + ": " + std::to_string(input_files.size()) + " input files but the model declares " +
                     std::to_string(s.inputs().size()) + " inputs");
    if (output_files.size() != s.outputs().size())
      return failure(where + ": " + std::to_string(output_files.size()) + " output files but the model declares " +
                     std::to_string(s.outputs().size()) + " outputs");

    // The suite's .pb files follow the order of the graph's (non-initializer) inputs.
    std::map<std::string, RuntimeValue> feeds;
    for (size_t i = 0; i < input_files.size(); ++i) {
      auto v = load_value_pb(input_files[i].string(), s.inputs()[i].type);
      if (!v) return from_status(v.status(), where + "/" + input_files[i].filename().string());
      feeds.emplace(s.inputs()[i].name, adapt_suite_value(std::move(v).value(), s.inputs()[i].type));
    }
    std::vector<RuntimeValue> expected;
    for (size_t i = 0; i < output_files.size(); ++i) {
      auto v = load_value_pb(output_files[i].string(), s.outputs()[i].type);
      if (!v) return from_status(v.status(), where + "/" + output_files[i].filename().string());
      expected.push_back(adapt_suite_value(std::move(v).value(), s.outputs()[i].type));
    }

    auto actual = s.run_values(feeds);
    if (!actual) return from_status(actual.status(), "");
    if (actual->size() != expected.size())
      return failure(where + ": run returned " + std::to_string(actual->size()) + " outputs, expected " +
                     std::to_string(expected.size()));
    for (size_t i = 0; i < expected.size(); ++i) {
      CompareResult r = compare_values((*actual)[i], expected[i], options.tolerance);
      if (!r.match)
        return failure(where + " output " + std::to_string(i) + " '" + s.outputs()[i].name + "': " + r.reason);
    }
  }
  return {};
}

}  // namespace gearbox::conformance
