// Tensor dumps (--dump-tensors). See tensor_dump.h.
#include "runtime/tensor_dump.h"

#include "base/atomic_file.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <unordered_map>

#include "base/logging.h"
#include "base/npy.h"

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

// y = x transposed by perm: y.dims[i] = x.dims[perm[i]] (any dtype but string).
Tensor permuted(const Tensor& x, const std::vector<int64_t>& perm) {
  const size_t r = x.rank();
  Dims out(r);
  std::vector<int64_t> in_stride(r, 1);
  for (size_t i = r; i-- > 1;) in_stride[i - 1] = in_stride[i] * x.dim(i);
  std::vector<int64_t> stride(r);  // the input stride of each output dim
  for (size_t i = 0; i < r; ++i) {
    out[i] = x.dim(static_cast<size_t>(perm[i]));
    stride[i] = in_stride[static_cast<size_t>(perm[i])];
  }
  Tensor y(x.dtype(), out);
  const size_t es = dtype_size(x.dtype());
  const auto* src = static_cast<const unsigned char*>(x.raw());
  auto* dst = static_cast<unsigned char*>(y.mutable_raw());
  std::vector<int64_t> idx(r, 0);
  for (int64_t k = 0; k < y.numel(); ++k) {
    int64_t off = 0;
    for (size_t i = 0; i < r; ++i) off += idx[i] * stride[i];
    std::memcpy(dst + static_cast<size_t>(k) * es, src + static_cast<size_t>(off) * es, es);
    for (size_t i = r; i-- > 0;) {
      if (++idx[i] < out[i]) break;
      idx[i] = 0;
    }
  }
  return y;
}

// A bf16 tensor as float32 (exact).
Tensor widened_to_f32(const Tensor& t) {
  Tensor f(DType::F32, t.dims());
  const BFloat16* src = t.data<BFloat16>();
  float* dst = f.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = static_cast<float>(src[i]);
  return f;
}

// The value `twin` holds in the layout of the value it stands for (LayoutTwin); nullopt
// when the tensor does not have the rank the record implies.
std::optional<Tensor> to_source(const Tensor& t, const LayoutTwin& twin) {
  if (t.rank() != twin.perm.size() || t.dtype() == DType::String || t.dtype() == DType::Undefined) return std::nullopt;
  Tensor y = permuted(t, twin.perm);
  if (!twin.merge_last_two) return y;
  Dims d = y.dims();
  d[d.size() - 2] *= d.back();
  d.pop_back();
  return y.reshaped(d);
}

// A node a pass removed, with the pass (the optimizer's record, OptimizerReport).
struct Removal {
  const NodeReplacement* rec;
  const std::string* pass;
};

// What happened to a removed node, from the optimizer's record: what replaced it in its
// pass, then what became of that node in later passes, up to a node that runs.
std::string fate(const std::map<std::string, Removal>& removed, const std::set<std::string>& running,
                 const Removal& first) {
  auto step = [](const Removal& r) {
    if (!r.rec->constant.empty()) return "was folded into the constant '" + r.rec->constant + "' by pass " + *r.pass;
    if (r.rec->by.empty()) return "was removed by pass " + *r.pass;
    return "was fused into '" + r.rec->by + "' (" + r.rec->by_op + ") by pass " + *r.pass;
  };
  std::string s = step(first);
  const Removal* cur = &first;
  for (int hops = 0; hops < 16 && !cur->rec->by.empty() && !running.count(cur->rec->by); ++hops) {
    auto it = removed.find(cur->rec->by);
    if (it == removed.end()) break;
    cur = &it->second;
    s += ", which then " + step(*cur);
  }
  return s + " (--disable-pass " + *first.pass + " keeps it)";
}

bool matches_removed(const DumpPattern& p, const NodeReplacement& r) {
  if (p.target == "*" || r.node == p.target || r.op == p.target) return true;
  const size_t dot = r.op.rfind('.');
  return dot != std::string::npos && r.op.compare(dot + 1, std::string::npos, p.target) == 0;
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

  // The nodes the passes removed, from the optimizer's own record (a .gbm carries none: its
  // graph is the one that runs). A name reused after its removal counts as running.
  const OptimizerReport& rep = session.optimizer_report();
  std::map<std::string, Removal> removed;
  for (const PassReport& pass : rep.passes)
    for (const NodeReplacement& r : pass.replaced) removed.emplace(r.node, Removal{&r, &pass.name});
  std::vector<std::vector<const Removal*>> gone(patterns.size());
  for (const PassReport& pass : rep.passes)
    for (const NodeReplacement& r : pass.replaced) {
      const Removal& rm = removed.at(r.node);
      if (rm.rec != &r || running.count(r.node)) continue;
      for (size_t i = 0; i < patterns.size(); ++i)
        if (matches_removed(patterns[i], r)) gone[i].push_back(&rm);
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
      const Removal& r = *gone[i][k];
      what += (what.empty() ? "" : "; ") + std::string("node '") + r.rec->node + "' (" + r.rec->op + ") " +
              fate(removed, running, r);
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

Result<std::unique_ptr<TensorDumper>> TensorDumper::create(std::vector<DumpPattern> patterns, std::string dir,
                                                            const OptimizerReport* report, bool raw_layout) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::FILE_WRITE_FAILED, "cannot create dump folder '", dir, "': ", ec.message());
  std::unique_ptr<TensorDumper> d(new TensorDumper(std::move(patterns), std::move(dir)));
  d->raw_layout_ = raw_layout;
  if (report)
    for (const PassReport& p : report->passes)
      for (const LayoutTwin& t : p.twins) d->twins_.emplace(t.value, t);
  return d;
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
                       {"index", index}};
  // The value in the model's own layout and name, unless the raw layout is asked for: undo
  // each layout pass's re-making (NCHW16c -> NHWC -> NCHW), as the optimizer recorded it.
  const std::string& raw_name = input ? node.inputs[index]->name : node.outputs[index]->name;
  std::string name = raw_name;
  std::optional<Tensor> logical;
  std::string layouts;
  for (auto it = twins_.find(name); it != twins_.end() && layouts.size() < 256; it = twins_.find(name)) {
    layouts += (layouts.empty() ? "" : ",") + it->second.layout;
    if (!raw_layout_ && value->is_tensor()) {
      std::optional<Tensor> back = to_source(logical ? *logical : value->tensor(), it->second);
      if (!back) break;
      logical = std::move(back);
    }
    name = it->second.of;
  }
  if (raw_layout_ || !logical) {
    entry["value"] = raw_name;
    if (!layouts.empty()) entry["layout"] = layouts;  // the engine's layout, as run
  } else {
    entry["value"] = name;
    entry["raw_value"] = raw_name;
    entry["raw_layout"] = layouts;
    entry["raw_shape"] = value->tensor().dims();
  }
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
  const Tensor& held = logical ? *logical : value->tensor();
  // numpy has no bf16: a value stored in bf16 (runtime/precision.h) is written as float32,
  // which holds every bf16 value exactly, and the index says what the engine held.
  const Tensor t = held.dtype() == DType::BF16 ? widened_to_f32(held) : held;
  if (held.dtype() != t.dtype()) entry["stored_dtype"] = std::string(dtype_name(held.dtype()));
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
