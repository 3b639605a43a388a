#include "runtime/precision.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "base/half.h"
#include "base/strings.h"
#include "kernels/kernel_support.h"
#include "runtime/partitioner.h"

namespace gearbox {
namespace {

struct ModeName {
  PrecisionMode mode;
  std::string_view name;
};
constexpr std::array<ModeName, 7> kModes{{
    {PrecisionMode::ForceFp32, "force_fp32"},
    {PrecisionMode::AllowFp32ToBf16, "allow_fp32_to_bf16"},
    {PrecisionMode::AllowFp32ToFp16, "allow_fp32_to_fp16"},
    {PrecisionMode::AllowMixBf16, "allow_mix_precision_bf16"},
    {PrecisionMode::AllowMixFp16, "allow_mix_precision_fp16"},
    {PrecisionMode::ForceBf16, "force_bf16"},
    {PrecisionMode::ForceFp16, "force_fp16"},
}};

bool is_mix(PrecisionMode m) { return m == PrecisionMode::AllowMixBf16 || m == PrecisionMode::AllowMixFp16; }
bool is_force(PrecisionMode m) { return m == PrecisionMode::ForceBf16 || m == PrecisionMode::ForceFp16; }

// Whether n reads float32: an input typed float32, or, in a graph built without shape
// inference (GraphBuilder, the frontend's traces), untyped inputs and no typed one of another
// dtype. A node lowered on a guess is safe: its kernel computes in the reduced dtype only when
// the tensors it is given at run time are float32 (the kernels' dtype sets see to it).
bool reads_float32(const Node& n) {
  bool f32 = false, untyped = false, other = false;
  for (const Value* v : n.inputs) {
    if (!v) continue;
    if (v->type.kind == ValueType::Kind::Tensor && v->type.dtype == DType::F32) f32 = true;
    else if (v->type.kind == ValueType::Kind::Tensor && v->type.dtype == DType::Undefined) untyped = true;
    else other = true;
  }
  return f32 || (untyped && !other);
}

PrecisionClass class_of(const Node& n, const PrecisionLists& lists) {
  if (auto it = lists.classes.find(precision_op_type(n)); it != lists.classes.end()) return it->second;
  if (auto it = lists.classes.find(n.qualified_op()); it != lists.classes.end()) return it->second;
  return op_descriptor(n.domain, n.op_type).precision;
}

bool computes_in(const KernelDef* def, DType dtype) { return def && kernel_computes_in(*def, dtype); }

class Assigner {
 public:
  Assigner(PrecisionMode mode, const PrecisionLists& lists, const Partition& partition,
           const std::map<std::string, std::string>& final_nodes, PrecisionReport* report)
      : mode_(mode), dtype_(reduced_dtype(mode)), lists_(lists), partition_(partition), report_(report) {
    // A kept name is the node of that name, or the node that computes its result after the passes.
    for (const std::string& name : lists_.keep_nodes) {
      keep_by_running_name_.emplace(name, name);
      if (auto it = final_nodes.find(name); it != final_nodes.end() && !it->second.empty())
        keep_by_running_name_.emplace(it->second, name);
    }
  }

  void visit(Graph& g) {
    for (auto& node : g.nodes) {
      Node& n = *node;
      n.compute_dtype = DType::Undefined;
      if (reads_float32(n)) decide(n);
      for (auto& [name, a] : n.attrs) {
        if (a.g) visit(*a.g);
        for (auto& sg : a.graphs) visit(*sg);
      }
    }
  }

  // --keep-dtype entries that matched no node.
  std::vector<std::string> unmatched() const {
    std::vector<std::string> out;
    for (const auto& name : lists_.keep_nodes)
      if (!matched_.count(name)) out.push_back(name);
    for (const auto& op : lists_.keep_op_types)
      if (!matched_.count("OpType::" + op)) out.push_back("OpType::" + op);
    return out;
  }

 private:
  void keep(const std::string& why) { ++report_->kept[why]; }

  void decide(Node& n) {
    ++report_->float_nodes;
    if (dtype_ == DType::Undefined) return;
    const std::string op = precision_op_type(n);
    if (auto [first, last] = keep_by_running_name_.equal_range(n.name); first != last) {
      for (auto it = first; it != last; ++it) matched_.insert(it->second);
      return keep("--keep-dtype");
    }
    if (lists_.keep_op_types.count(op) || lists_.keep_op_types.count(n.qualified_op())) {
      matched_.insert("OpType::" + (lists_.keep_op_types.count(op) ? op : n.qualified_op()));
      return keep("--keep-dtype");
    }
    const PrecisionClass cls = class_of(n, lists_);
    if (is_mix(mode_)) {
      if (cls == PrecisionClass::Black) return keep("black list: " + op);
      if (cls == PrecisionClass::Gray && !fed_by_lowered(n)) return keep("gray, fed in fp32: " + op);
    }
    if (!computes_in(kernel_on(n, n.engine, true), dtype_) && !move_to_reduced_kernel(n))
      return keep(std::string("no ") + std::string(dtype_name(dtype_)) + " kernel for " + op);
    if (is_force(mode_) && cls == PrecisionClass::Black)
      report_->warnings.push_back("node '" + n.name + "' (" + op + ") is on the black list and computes in " +
                                  std::string(dtype_name(dtype_)) + " (" + std::string(precision_mode_name(mode_)) +
                                  "); expect a loss of accuracy");
    n.compute_dtype = dtype_;
    lowered_.insert(&n);
    report_->lowered.push_back(n.name);
  }

  // Places n on the first engine of the session's list whose kernel takes it statically and
  // computes in the reduced dtype (cpu.dnnl's bf16 matmul for a MatMul cpu.simd would run in
  // fp32); false when none does, or an --engine override placed n.
  bool move_to_reduced_kernel(Node& n) {
    if (partition_.forced.count(&n)) return false;
    for (const std::string& e : partition_.engines) {
      if (e == n.engine || !computes_in(kernel_on(n, e, true), dtype_)) continue;
      n.engine = e;
      ++report_->moved;
      return true;
    }
    return false;
  }

  bool fed_by_lowered(const Node& n) const {
    return std::any_of(n.inputs.begin(), n.inputs.end(),
                       [&](const Value* v) { return v && v->producer && lowered_.count(v->producer); });
  }

  PrecisionMode mode_;
  DType dtype_;
  const PrecisionLists& lists_;
  const Partition& partition_;
  PrecisionReport* report_;
  std::unordered_set<const Node*> lowered_;
  std::multimap<std::string, std::string> keep_by_running_name_;  // running node -> --keep-dtype names
  std::set<std::string> matched_;
};

// Who reads each value of g (its nodes), and the values that must keep the dtype the model gave
// them: g's outputs and whatever a subgraph reads.
struct Readers {
  std::unordered_map<const Value*, std::vector<const Node*>> consumers;
  std::unordered_set<const Value*> excluded;
};
Readers readers_of(const Graph& g) {
  Readers r;
  r.excluded.insert(g.outputs.begin(), g.outputs.end());
  for (const auto& node : g.nodes) {
    for (const Value* v : node->inputs)
      if (v) r.consumers[v].push_back(node.get());
    for_each_subgraph(*node, [&](const Graph& sg) { collect_reads(sg, r.excluded); });
  }
  return r;
}

// The second step: which values between lowered nodes are stored in the reduced dtype. A
// float32 tensor output of a lowered node is stored in it when
//   - it is not an output of its graph, and no subgraph reads it (the caller, a loop's next
//     iteration or an If branch see values in the dtype the model gave them);
//   - it has consumers, and every one of them is lowered;
//   - with the value typed in the reduced dtype, the producer's kernel on its engine and each
//     consumer's still take the node statically (KernelSupport: the producer declares the
//     reduced dtype among the dtypes it writes, the consumers among those they read) and still
//     compute in the reduced dtype.
// The conversion a consumer would make of the float32 value on every run (X into bf16) is
// then made once, by the producer rounding its result; the value's own dtype says so, for the
// memory planner, the .gbm and whoever reads intermediate values.
class StorageAssigner {
 public:
  StorageAssigner(DType dtype, PrecisionReport* report) : dtype_(dtype), report_(report) {}

  void visit(Graph& g) {
    auto [consumers, excluded] = readers_of(g);
    for (auto& node : g.nodes) {
      Node& n = *node;
      if (n.compute_dtype == dtype_)
        for (Value* v : n.outputs)
          if (v && !excluded.count(v)) consider(n, v, consumers[v]);
      for (auto& [name, a] : n.attrs) {
        if (a.g) visit(*a.g);
        for (auto& sg : a.graphs) visit(*sg);
      }
    }
  }

 private:
  void consider(const Node& producer, Value* v, const std::vector<const Node*>& consumers) {
    if (v->type.kind != ValueType::Kind::Tensor || v->type.dtype != DType::F32 || consumers.empty()) return;
    for (const Node* c : consumers)
      if (c->compute_dtype != dtype_) return;
    v->type.dtype = dtype_;
    bool fits = takes(producer);
    for (const Node* c : consumers) fits = fits && takes(*c);
    if (!fits) {
      v->type.dtype = DType::F32;
      return;
    }
    ++report_->stored;
  }

  // Whether n's kernel on its engine takes n as the graph now types it, without waiting for
  // run-time shapes (a choice made at run time might land on a kernel that does not read the
  // reduced dtype), and computes in the reduced dtype.
  bool takes(const Node& n) const { return computes_in(kernel_on(n, n.engine, false), dtype_); }

  DType dtype_;
  PrecisionReport* report_;
};

// For a .gbm (store_weights_reduced): constant float32 weights read only by lowered nodes whose
// kernels read them in the reduced dtype, converted once. Same rules as StorageAssigner's, with
// initializers in place of node outputs.
class WeightStorage {
 public:
  WeightStorage(DType dtype, WeightStorageReport* report) : dtype_(dtype), report_(report) {}

  void visit(Graph& g) {
    auto [consumers, excluded] = readers_of(g);
    for (Value* v : g.initializers)
      if (v && !excluded.count(v)) consider(v, consumers[v]);
    for (auto& node : g.nodes)
      for (auto& [name, a] : node->attrs) {
        if (a.g) visit(*a.g);
        for (auto& sg : a.graphs) visit(*sg);
      }
  }

 private:
  void consider(Value* v, const std::vector<const Node*>& consumers) {
    if (!v->is_initializer || v->initializer.dtype() != DType::F32 || consumers.empty()) return;
    for (const Node* c : consumers)
      if (c->compute_dtype != dtype_) return;
    auto converted = Tensor::allocate(dtype_, v->initializer.dims());
    if (!converted.ok()) return;
    const float* src = v->initializer.data<float>();
    for (int64_t i = 0; i < v->initializer.numel(); ++i) {
      if (dtype_ == DType::BF16) converted->data<BFloat16>()[i] = BFloat16(src[i]);
      else converted->data<Half>()[i] = Half(src[i]);
    }
    // The kernels are asked with the weight as it would be stored (a constant's dtype is its
    // tensor's); any that would not take it keeps it float32.
    Tensor original = std::move(v->initializer);
    v->initializer = std::move(converted).value();
    v->type.dtype = dtype_;
    for (const Node* c : consumers)
      if (!computes_in(kernel_on(*c, c->engine, false), dtype_)) {
        v->initializer = std::move(original);
        v->type.dtype = DType::F32;
        return;
      }
    report_->bytes_before += original.nbytes();
    report_->bytes_after += v->initializer.nbytes();
    ++report_->weights;
  }

  DType dtype_;
  WeightStorageReport* report_;
};

// Undoes the storage of an earlier assign_precision on the same graph: a value a lowered node
// writes in the reduced dtype is float32 again (a lowered node reads float32, and its outputs
// were float32 before the pass).
void clear_storage(Graph& g) {
  for (auto& node : g.nodes) {
    if (node->compute_dtype != DType::Undefined)
      for (Value* v : node->outputs)
        if (v && v->type.kind == ValueType::Kind::Tensor && v->type.dtype == node->compute_dtype)
          v->type.dtype = DType::F32;
    for (auto& [name, a] : node->attrs) {
      if (a.g) clear_storage(*a.g);
      for (auto& sg : a.graphs) clear_storage(*sg);
    }
  }
}

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(" \t\r") - b + 1));
}

// "Conv", "FusedConv" (gearbox's own) or a qualified "com.microsoft.Gelu" the table describes.
bool known_op_type(const std::string& op) {
  if (find_op_descriptor("", op) || find_op_descriptor(kGearboxDomain, op)) return true;
  const size_t dot = op.rfind('.');
  return dot != std::string::npos && find_op_descriptor(std::string_view(op).substr(0, dot), op.substr(dot + 1));
}

Status list_error(const std::string& path, const std::string& what) {
  return make_error(ErrorCode::PRECISION_LIST_INVALID, path, ": ", what);
}

}  // namespace

std::string precision_op_type(const Node& n) {
  if (n.domain != kGearboxDomain) return n.qualified_op();
  for (std::string_view prefix : {"Fused", "Nhwc", "Nchw16c"})
    if (n.op_type.size() > prefix.size() && n.op_type.compare(0, prefix.size(), prefix) == 0)
      return n.op_type.substr(prefix.size());
  return n.qualified_op();
}

Result<PrecisionMode> parse_precision_mode(std::string_view name) {
  if (name.empty() || name == "fp32") return PrecisionMode::ForceFp32;
  std::string names;
  for (const ModeName& m : kModes) {
    if (m.name == name) return m.mode;
    names += (names.empty() ? "" : ", ") + std::string(m.name);
  }
  return make_error(ErrorCode::PRECISION_MODE_UNKNOWN, "precision mode '", name, "' is not one of ", names);
}

std::string_view precision_mode_name(PrecisionMode m) {
  for (const ModeName& n : kModes)
    if (n.mode == m) return n.name;
  return "force_fp32";
}

DType reduced_dtype(PrecisionMode m) {
  switch (m) {
    case PrecisionMode::ForceFp32:
      return DType::Undefined;
    case PrecisionMode::AllowFp32ToBf16:
    case PrecisionMode::AllowMixBf16:
    case PrecisionMode::ForceBf16:
      return DType::BF16;
    case PrecisionMode::AllowFp32ToFp16:
    case PrecisionMode::AllowMixFp16:
    case PrecisionMode::ForceFp16:
      return DType::F16;
  }
  return DType::Undefined;
}

Status read_keep_dtype(const std::string& path, PrecisionLists* lists) {
  std::ifstream in(path);
  if (!in) return list_error(path, "cannot be read (--keep-dtype)");
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    const std::string entry = trim(line);
    if (entry.empty()) continue;
    constexpr std::string_view kOpType = "OpType::";
    if (entry.compare(0, kOpType.size(), kOpType) == 0) {
      const std::string op = trim(entry.substr(kOpType.size()));
      if (op.empty()) return list_error(path, "line " + std::to_string(no) + ": 'OpType::' names no op type");
      lists->keep_op_types.insert(op);
    } else {
      lists->keep_nodes.insert(entry);
    }
  }
  return Status::OK();
}

Status read_modify_mixlist(const std::string& path, PrecisionLists* lists) {
  std::ifstream in(path);
  if (!in) return list_error(path, "cannot be read (--modify-mixlist)");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return list_error(path, "is not a JSON object");
  const std::map<std::string, PrecisionClass> kLists{
      {"white-list", PrecisionClass::White}, {"black-list", PrecisionClass::Black}, {"gray-list", PrecisionClass::Gray}};
  std::map<std::string, std::string> added;  // op -> the list it was added to
  for (const auto& [key, body] : j.items()) {
    auto list = kLists.find(key);
    if (list == kLists.end()) return list_error(path, "unknown key '" + key + "' (white-list, black-list, gray-list)");
    if (!body.is_object()) return list_error(path, "'" + key + "' is not an object with to-add / to-remove");
    for (const auto& [verb, ops] : body.items()) {
      if (verb != "to-add" && verb != "to-remove")
        return list_error(path, "'" + key + "' has key '" + verb + "' (to-add, to-remove)");
      if (!ops.is_array()) return list_error(path, "'" + key + "." + verb + "' is not a list of op types");
      for (const auto& op_json : ops) {
        if (!op_json.is_string()) return list_error(path, "'" + key + "." + verb + "' holds a non-string");
        const std::string op = op_json.get<std::string>();
        if (!known_op_type(op))
          return list_error(path, "'" + key + "." + verb + "': gearbox knows no op type '" + op + "'");
        if (verb == "to-add") {
          if (auto prev = added.find(op); prev != added.end() && prev->second != key)
            return list_error(path, "op type '" + op + "' is added to both " + prev->second + " and " + key);
          added[op] = key;
          lists->classes[op] = list->second;
        } else if (!added.count(op)) {
          lists->classes[op] = PrecisionClass::Gray;
        }
      }
    }
  }
  return Status::OK();
}

std::string PrecisionReport::summary() const {
  std::string s = std::string(precision_mode_name(mode));
  if (mode == PrecisionMode::ForceFp32) return s + ": every node in its own dtype";
  s += ": " + std::to_string(lowered.size()) + " of " + std::to_string(float_nodes) + " float nodes compute in " +
       std::string(dtype_name(reduced_dtype(mode)));
  if (stored > 0)
    s += ", " + std::to_string(stored) + " values between them stored in " +
         std::string(dtype_name(reduced_dtype(mode)));
  if (storage_skipped) s += ", every value stored in float32 (this CPU has no bf16 arithmetic)";
  if (!kept.empty()) {
    // The largest groups first.
    std::vector<std::pair<std::string, size_t>> v(kept.begin(), kept.end());
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    s += "; kept in fp32: ";
    for (size_t i = 0; i < v.size() && i < 6; ++i) s += (i ? ", " : "") + v[i].first + " x" + std::to_string(v[i].second);
    if (v.size() > 6) s += ", ...";
  }
  return s;
}

Result<PrecisionReport> assign_precision(Model& model, const Partition& partition, PrecisionMode mode,
                                         const PrecisionLists& lists,
                                         const std::map<std::string, std::string>& final_nodes, bool arithmetic) {
  PrecisionReport report;
  report.mode = mode;
  if (!model.graph) return make_error(ErrorCode::INTERNAL, "assign_precision: the model has no graph");
  clear_storage(*model.graph);
  Assigner a(mode, lists, partition, final_nodes, &report);
  a.visit(*model.graph);
  // The values between lowered nodes, once every node's precision and engine is known.
  if (mode != PrecisionMode::ForceFp32 && arithmetic) StorageAssigner(reduced_dtype(mode), &report).visit(*model.graph);
  report.storage_skipped = mode != PrecisionMode::ForceFp32 && !arithmetic;
  if (mode != PrecisionMode::ForceFp32) {
    if (std::vector<std::string> missing = a.unmatched(); !missing.empty())
      return make_error(ErrorCode::PRECISION_LIST_INVALID, "--keep-dtype names ", join(missing),
                        ", which match no node of the model (names are the model's node names; OpType:: takes an ",
                        "op type such as Conv)");
  }
  return report;
}

WeightStorageReport store_weights_reduced(Model& model) {
  WeightStorageReport report;
  if (!model.graph || model.precision_mode.empty()) return report;
  auto mode = parse_precision_mode(model.precision_mode);
  if (!mode.ok() || reduced_dtype(*mode) == DType::Undefined) return report;
  WeightStorage(reduced_dtype(*mode), &report).visit(*model.graph);
  return report;
}

size_t count_lowered(const Model& model, DType dtype) {
  size_t count = 0;
  std::function<void(const Graph&)> visit = [&](const Graph& g) {
    for (const auto& n : g.nodes) {
      count += n->compute_dtype == dtype;
      for_each_subgraph(*n, visit);
    }
  };
  if (model.graph) visit(*model.graph);
  return count;
}

}  // namespace gearbox
