// Tensor dumps (--dump-tensors). See tensor_dump.h.
#include "runtime/tensor_dump.h"

#include "base/atomic_file.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <unordered_map>

#include "base/logging.h"
#include "base/npy.h"
#include "graph/gbm/gbm_reader.h"
#include "graph/onnx_importer.h"

namespace gearbox {
namespace {

// Every node of g and of its subgraphs, outer before inner.
void walk(const Graph& g, const std::function<void(const Node&)>& fn) {
  for (const auto& n : g.nodes) {
    fn(*n);
    for_each_subgraph(*n, [&](const Graph& sg) { walk(sg, fn); });
  }
}

std::set<std::string> node_names(const Graph& g) {
  std::set<std::string> names;
  walk(g, [&](const Node& n) { names.insert(n.name); });
  return names;
}

// A node name as a file name: letters, digits, '.', '-' and '_' kept, the rest '_'.
std::string sanitize(const std::string& name) {
  std::string s;
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
  if (s.empty() || s[0] == '.') s = "_" + s;
  return s;
}

// Where a main-graph node of the imported model went in the optimized graph: the first
// optimized node that produces one of the values downstream of it (a fusion keeps the
// pattern's last output), or a folded constant. Both graphs are looked up by value name:
// a Value of the optimized graph may still point at a node the passes erased.
std::string replacement(const Graph& original, const Graph& optimized, const Node& gone) {
  std::unordered_map<std::string, const Node*> producer;
  for (const auto& n : optimized.nodes)
    for (const Value* o : n->outputs)
      if (o) producer[o->name] = n.get();
  std::set<std::string> constants;
  for (const Value* v : optimized.initializers) constants.insert(v->name);
  std::unordered_map<std::string, std::vector<const Node*>> readers;
  for (const auto& n : original.nodes)
    for (const Value* i : n->inputs)
      if (i) readers[i->name].push_back(n.get());
  std::deque<std::string> queue;
  std::set<std::string> seen;
  for (const Value* o : gone.outputs)
    if (o) queue.push_back(o->name);
  while (!queue.empty()) {
    std::string v = queue.front();
    queue.pop_front();
    if (!seen.insert(v).second) continue;
    if (auto it = producer.find(v); it != producer.end())
      return "was fused into '" + it->second->name + "' (" + it->second->qualified_op() + ")";
    if (constants.count(v)) return "was folded into the constant '" + v + "'";
    for (const Node* r : readers[v])
      for (const Value* o : r->outputs)
        if (o) queue.push_back(o->name);
  }
  return "was removed by the optimizer";
}

}  // namespace

bool DumpPattern::matches(const Node& n) const {
  return target == "*" || n.name == target || n.op_type == target || n.qualified_op() == target;
}

Result<DumpPattern> parse_dump_pattern(const std::string& spec) {
  DumpPattern p;
  p.spec = spec;
  std::string when = "post";
  const size_t colon = spec.rfind(':');
  p.target = spec.substr(0, colon);
  if (colon != std::string::npos) when = spec.substr(colon + 1);
  if (p.target.empty())
    return make_error(ErrorCode::USAGE, "--dump-tensors '", spec,
                      "' names no node or op type; write OPTYPE_OR_NODE:post (outputs) or OPTYPE_OR_NODE:pre "
                      "(inputs), e.g. Conv:post");
  if (when == "post") p.post = true;
  else if (when == "pre") p.pre = true;
  else
    return make_error(ErrorCode::USAGE, "--dump-tensors '", spec, "': unknown suffix ':", when,
                      "'; use ':post' (the node's outputs) or ':pre' (its inputs)");
  return p;
}

Result<std::vector<std::string>> check_dump_patterns(const Session& session, const std::string& model_path,
                                                     const std::vector<DumpPattern>& patterns) {
  const Graph& runs = *session.model().graph;
  const std::set<std::string> running = node_names(runs);
  std::vector<size_t> matched(patterns.size(), 0);
  walk(runs, [&](const Node& n) {
    for (size_t i = 0; i < patterns.size(); ++i)
      if (patterns[i].matches(n)) ++matched[i];
  });

  // The model as imported, when the optimizer changed the graph (a .gbm has no other form).
  const OptimizerReport& rep = session.optimizer_report();
  const bool changed = std::any_of(rep.passes.begin(), rep.passes.end(),
                                   [](const PassReport& p) { return p.ran && (p.matches > 0 || p.nodes_before != p.nodes_after); });
  std::optional<Model> original;
  if (changed && !gbm::is_gbm_file(model_path)) {
    auto m = import_onnx_file(model_path);
    if (m.ok()) original = std::move(m).value();
  }
  // Per pattern, the imported model's nodes that no longer run.
  std::vector<std::vector<const Node*>> gone(patterns.size());
  if (original)
    walk(*original->graph, [&](const Node& n) {
      for (size_t i = 0; i < patterns.size(); ++i)
        if (patterns[i].matches(n) && !running.count(n.name)) gone[i].push_back(&n);
    });

  // Which pass removed a node: the first pass (pipeline order) without which it runs again.
  std::map<std::string, std::string> pass_of;
  if (std::any_of(gone.begin(), gone.end(), [](const auto& g) { return !g.empty(); }))
    for (const PassReport& p : rep.passes) {
      if (!p.ran || (p.matches == 0 && p.nodes_before == p.nodes_after)) continue;
      auto m = import_onnx_file(model_path);
      if (!m.ok()) break;
      OptimizerOptions without = session.options().optimizer;
      without.disabled_passes.push_back(p.name);
      without.plan_memory = false;
      if (!optimize(*m, without).ok()) continue;
      const std::set<std::string> back = node_names(*m->graph);
      for (const auto& g : gone)
        for (const Node* n : g)
          if (back.count(n->name) && !pass_of.count(n->name)) pass_of[n->name] = p.name;
    }

  std::vector<std::string> warnings;
  for (size_t i = 0; i < patterns.size(); ++i) {
    const DumpPattern& p = patterns[i];
    if (gone[i].empty() && matched[i] > 0) continue;
    if (gone[i].empty()) {
      std::set<std::string> ops;
      walk(runs, [&](const Node& n) { ops.insert(n.qualified_op()); });
      std::string list;
      for (const std::string& op : ops) list += (list.empty() ? "" : ", ") + op;
      return make_error(ErrorCode::USAGE, "--dump-tensors '", p.spec, "' matches no node of ", model_path,
                        ": no node is named '", p.target, "' and none has that op type; op types that run: ", list);
    }
    std::string what;
    for (size_t k = 0; k < gone[i].size() && k < 5; ++k) {
      const Node& n = *gone[i][k];
      auto it = pass_of.find(n.name);
      what += (what.empty() ? "" : "; ") + std::string("node '") + n.name + "' (" + n.qualified_op() + ") " +
              replacement(*original->graph, runs, n) +
              (it != pass_of.end() ? " by pass " + it->second + " (--disable-pass " + it->second + " keeps it)"
                                   : " (GEARBOX_DISABLE_PASSES=all keeps it)");
    }
    if (gone[i].size() > 5) what += "; and " + std::to_string(gone[i].size() - 5) + " more";
    if (matched[i] == 0)
      return make_error(ErrorCode::USAGE, "--dump-tensors '", p.spec,
                        "' matches no node that runs: the optimizer changed the graph: ", what,
                        ". Dump the fused node instead, or switch the pass off");
    warnings.push_back("--dump-tensors '" + p.spec + "' dumps " + std::to_string(matched[i]) +
                       " node(s), but not these, which no longer run: " + what);
  }
  return warnings;
}

Result<std::unique_ptr<TensorDumper>> TensorDumper::create(std::vector<DumpPattern> patterns, std::string dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::FILE_WRITE_FAILED, "cannot create dump folder '", dir, "': ", ec.message());
  return std::unique_ptr<TensorDumper>(new TensorDumper(std::move(patterns), std::move(dir)));
}

bool TensorDumper::wants(const Node& node, bool pre) const {
  for (const DumpPattern& p : patterns_)
    if ((pre ? p.pre : p.post) && p.matches(node)) return true;
  return false;
}

Status TensorDumper::before_node(const Node& node, int depth, const std::vector<const RuntimeValue*>& inputs) {
  if (!wants(node, true)) return Status::OK();
  std::lock_guard<std::mutex> lock(mu_);
  const int call = pre_calls_[&node]++;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i] && i < node.inputs.size() && node.inputs[i]) GBX_RETURN_IF_ERROR(dump(node, depth, call, true, i, inputs[i]));
  return Status::OK();
}

Status TensorDumper::after_node(const Node& node, int depth, const std::vector<RuntimeValue>& outputs) {
  if (!wants(node, false)) return Status::OK();
  std::lock_guard<std::mutex> lock(mu_);
  const int call = post_calls_[&node]++;
  for (size_t i = 0; i < outputs.size(); ++i)
    if (i < node.outputs.size() && node.outputs[i]) GBX_RETURN_IF_ERROR(dump(node, depth, call, false, i, &outputs[i]));
  return Status::OK();
}

Status TensorDumper::dump(const Node& node, int depth, int call, bool input, size_t index, const RuntimeValue* value) {
  nlohmann::json entry{{"node", node.name},
                       {"op_type", node.qualified_op()},
                       {"depth", depth},
                       {"call", call},
                       {"io", input ? "input" : "output"},
                       {"index", index},
                       {"value", input ? node.inputs[index]->name : node.outputs[index]->name}};
  if (!value->is_tensor()) {
    entry["reason"] = value->is_sequence() ? "a sequence of " + std::to_string(value->sequence().tensors.size()) +
                                                 " tensors (.npy holds one tensor)"
                                           : std::string("no value (an empty optional or an output not produced)");
    skipped_.push_back(std::move(entry));
    return Status::OK();
  }
  // Node names are unique, but sanitizing can make two equal: the later one gets a suffix.
  std::string base = sanitize(node.name) + (input ? "_in" : "_out") + std::to_string(index) +
                     (call > 0 ? "_call" + std::to_string(call) : "");
  std::string file = base + ".npy";
  for (int k = 2; used_names_.count(file); ++k) file = base + "_" + std::to_string(k) + ".npy";
  const Tensor& t = value->tensor();
  Status st = write_npy((std::filesystem::path(dir_) / file).string(), t);
  if (!st.ok()) {
    if (st.code() == ErrorCode::FILE_WRITE_FAILED) return st;
    entry["reason"] = st.message();  // e.g. a string tensor: .npy here holds numbers and bool
    skipped_.push_back(std::move(entry));
    return Status::OK();
  }
  used_names_.insert(file);
  entry["file"] = file;
  entry["dtype"] = std::string(dtype_name(t.dtype()));
  entry["shape"] = t.dims();
  files_.push_back(std::move(entry));
  return Status::OK();
}

Status TensorDumper::write_index() const {
  nlohmann::json patterns = nlohmann::json::array();
  for (const DumpPattern& p : patterns_) patterns.push_back(p.spec);
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json doc{{"patterns", patterns}, {"files", files_}, {"skipped", skipped_}};
  const std::string path = (std::filesystem::path(dir_) / "index.json").string();
  return write_file_atomically(path, doc.dump(1) + "\n");
}

size_t TensorDumper::files_written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return files_.size();
}

}  // namespace gearbox
