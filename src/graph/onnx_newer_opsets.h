// Checking models newer than Debian's libonnx (1.12, which knows ai.onnx opsets up to 17).
//
// libonnx's checker and shape inference judge every node against the schema of its op at the
// model's opset. For opsets past 17 that schema is missing or stale (Reduce* with axes as an
// input, Split's num_outputs, ...), so the importer shows libonnx a *checking view* of the
// model instead (CheckingView, undone afterwards): ai.onnx clamped to 17, where every op whose schema is
// unchanged is judged exactly as at the model's opset; the ops that changed or appeared after
// 17 moved into gearbox's shadow domain, where this file registers their newer schemas (built
// from libonnx's own older ones where the change is an added input or attribute), so they
// are checked and shape-inferred against the right form; and an op no schema knows at all
// (a misspelt or unknown op) moved into an unregistered domain, which the checker leaves
// alone, so the import goes on and the partitioner reports OP_UNSUPPORTED with the node,
// the op, its opset and the engines tried.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace gearbox {

// The highest ai.onnx opset libonnx's own schemas cover, and the highest IR version its checker
// reads (IR 9 and 10, which opsets 19-21 need, add float8 and int4 types and nothing the checker
// needs to know for the rest).
inline constexpr int kLibOnnxMaxOpset = 17;
inline constexpr int64_t kLibOnnxMaxIrVersion = 8;

// Rewrites the model in place for libonnx's checker and shape inference, as the header
// comment says, and restores it (node domains, opset imports) when it goes out of scope;
// shape inference's value_info stays. In place rather than on a copy: models are hundreds
// of MB of weights.
class CheckingView {
 public:
  CheckingView(onnx::ModelProto& model, int onnx_opset);
  ~CheckingView();
  CheckingView(const CheckingView&) = delete;
  CheckingView& operator=(const CheckingView&) = delete;

  // False when every node's schema is known at the model's opset: nothing was rewritten.
  bool rewritten() const { return rewritten_; }
  // Nodes judged by gearbox's newer schemas, and nodes no schema knows ("name (Op)").
  const std::vector<std::string>& newer_ops() const { return newer_ops_; }
  const std::vector<std::string>& unknown_ops() const { return unknown_ops_; }

 private:
  onnx::ModelProto& model_;
  bool rewritten_ = false;
  std::vector<std::string> newer_ops_, unknown_ops_;
  std::vector<std::pair<onnx::NodeProto*, std::string>> moved_;  // node, its own domain
  std::vector<std::pair<int, int64_t>> clamped_;                 // opset_import index, version
  int imports_before_ = 0;
  int64_t ir_version_ = 0;  // the model's own, restored when clamped
};

}  // namespace gearbox
