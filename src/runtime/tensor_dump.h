// Tensor dumps for accuracy debugging: `--dump-tensors "OPTYPE_OR_NODE:post"` on gearbox run
// and gearbox profile writes the matching nodes' tensors as .npy files, with an index.json
// saying which node, op type and input/output each file holds.
//
// A pattern is TARGET[:WHEN]. TARGET matches a node by name, by plain op type ("Conv",
// "FusedConv": any domain) or by domain-qualified op type ("com.gearbox.FusedConv"); "*"
// matches every node. WHEN is "post" (the node's outputs after it ran; the default when the
// pattern has no colon) or "pre" (its inputs before it runs). Subgraph nodes (If/Loop/Scan
// bodies) match too; a node that runs several times per run (a Loop body) gets one file per
// call.
//
// The optimizer may fuse or remove a node before anything runs. check_dump_patterns() looks
// at the graph as it will run and at the optimizer's own record of what each pass replaced
// (OptimizerReport, PassReport::replaced): a pattern that matches nothing that runs is USAGE
// (naming the node that replaced the node, through every later pass, and the --disable-pass
// that keeps it); one that still matches some nodes but lost others gets a warning saying
// the same.
//
// Layout passes run convolutions on channels-last or blocked twins of the model's values
// (PassReport::twins); a dumped twin is converted back to the model's layout and named after
// the model's value (a ResNet-50 conv output is [1,64,56,56], not [1,4,56,56,16]), unless
// --dump-raw-layout keeps what the engine held.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/optimizer.h"
#include "runtime/node_observer.h"
#include "runtime/session.h"

namespace gearbox {

struct DumpPattern {
  std::string spec;    // as given: "Conv:post"
  std::string target;  // "Conv"
  bool pre = false;    // inputs before the node runs
  bool post = false;   // outputs after it ran
  bool matches(const Node& n) const;
};

// USAGE for an empty target or a suffix other than pre/post.
Result<DumpPattern> parse_dump_pattern(const std::string& spec);

// Checks `patterns` against the session's graph and its optimizer report. `model_path` (the
// file the session was loaded from) is only named in messages. Returns the warnings (one per
// pattern that lost some but not all of its nodes).
Result<std::vector<std::string>> check_dump_patterns(const Session& session, const std::string& model_path,
                                                     const std::vector<DumpPattern>& patterns);

class TensorDumper : public NodeObserver {
 public:
  // Creates `dir` (FILE_WRITE_FAILED when it cannot).
  // `report` (the session's optimizer report) says which values the layout passes re-made
  // (NHWC, NCHW16c): those are written in the model's layout under the model's value name,
  // unless `raw_layout` (--dump-raw-layout) keeps the engine's layout.
  static Result<std::unique_ptr<TensorDumper>> create(std::vector<DumpPattern> patterns, std::string dir,
                                                      const OptimizerReport* report = nullptr, bool raw_layout = false);

  Status before_node(const Node& node, int depth, const std::vector<const RuntimeValue*>& inputs) override;
  Status after_node(const Node& node, int depth, const std::vector<RuntimeValue>& outputs) override;

  // Writes DIR/index.json: {"patterns": [...], "files": [{"file", "node", "op_type", "depth",
  // "call", "io": "input"|"output", "index", "value", "dtype", "shape"}], "skipped": [...]}.
  // A value stored in bf16 (runtime/precision.h) is written as float32 (numpy has no bf16):
  // "dtype" is the file's, "stored_dtype" what the engine held.
  // A file converted back to the model's layout also has "raw_value", "raw_layout" and
  // "raw_shape" (what the engine held); with raw_layout a re-made value has "layout".
  Status write_index() const;
  size_t files_written() const;
  const std::string& dir() const { return dir_; }

 private:
  TensorDumper(std::vector<DumpPattern> patterns, std::string dir) : patterns_(std::move(patterns)), dir_(std::move(dir)) {}
  bool wants(const Node& node, bool pre) const;
  // Writes one value; `call` is the how-many-th execution of the node in this dumper.
  Status dump(const Node& node, int depth, int call, bool input, size_t index, const RuntimeValue* value);

  const std::vector<DumpPattern> patterns_;
  const std::string dir_;
  mutable std::mutex mu_;
  std::map<const Node*, int> pre_calls_, post_calls_;
  std::set<std::string> used_names_;
  std::map<std::string, LayoutTwin> twins_;  // value name -> what it re-makes
  bool raw_layout_ = false;
  nlohmann::json files_ = nlohmann::json::array();
  nlohmann::json skipped_ = nlohmann::json::array();
};

}  // namespace gearbox
