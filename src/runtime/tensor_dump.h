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
// at the graph as it will run, and, when passes changed it, at the model as imported: a
// pattern that matches nothing that runs is USAGE (naming the fused node that replaced the
// node and the --disable-pass that keeps it); one that still matches some nodes but lost
// others gets a warning saying the same.
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

// Checks `patterns` against the session's graph. `model_path` is the file the session was
// loaded from: when the optimizer changed the graph it is imported again to find the nodes
// a pattern lost, and, when some were lost, optimized again (with the session's options) with
// one pass off at a time to name the pass. Returns the warnings (one per pattern that lost
// some but not all of its nodes).
Result<std::vector<std::string>> check_dump_patterns(const Session& session, const std::string& model_path,
                                                     const std::vector<DumpPattern>& patterns);

class TensorDumper : public NodeObserver {
 public:
  // Creates `dir` (FILE_WRITE_FAILED when it cannot).
  static Result<std::unique_ptr<TensorDumper>> create(std::vector<DumpPattern> patterns, std::string dir);

  Status before_node(const Node& node, int depth, const std::vector<const RuntimeValue*>& inputs) override;
  Status after_node(const Node& node, int depth, const std::vector<RuntimeValue>& outputs) override;

  // Writes DIR/index.json: {"patterns": [...], "files": [{"file", "node", "op_type", "depth",
  // "call", "io": "input"|"output", "index", "value", "dtype", "shape"}], "skipped": [...]}.
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
  nlohmann::json files_ = nlohmann::json::array();
  nlohmann::json skipped_ = nlohmann::json::array();
};

}  // namespace gearbox
