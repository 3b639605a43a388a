// Partitioning: one engine per node, the regions they form, the [PARTITION] log.
#include "runtime/partitioner.h"

#include <algorithm>
#include <set>

#include "base/logging.h"
#include "base/strings.h"
#include "kernels/kernel.h"
#include "runtime/control_flow.h"
#include "runtime/plugin_loader.h"

namespace gearbox {

namespace {

bool matches_op(const KernelDef& def, const Node& n) {
  return def.op_type == n.op_type && def.domain == n.domain && def.serves(n.opset);
}

// What `engine` offers node n: any kernel for its op at its opset, and one that accepts it
// (its declared dtypes and its predicate) or may accept it at run time.
struct Support {
  bool op = false;
  bool accepted = false;
  bool later = false;  // accepted only if the run-time shapes fit
  std::string reason;  // why the engine's kernels refused it (for messages)
};

bool output_dtypes_fit(const KernelDef& def, const Node& n) {
  const KernelSupport* decl = KernelSupportTable::global().find(def.fn);
  if (!decl) return true;
  for (size_t i = 0; i < decl->outputs.size() && i < n.outputs.size(); ++i) {
    const Value* v = n.outputs[i];
    const auto& set = decl->outputs[i];
    if (!v || set.empty() || v->type.kind != ValueType::Kind::Tensor || v->type.dtype == DType::Undefined) continue;
    if (std::find(set.begin(), set.end(), v->type.dtype) == set.end()) return false;
  }
  return true;
}

Support support(const Node& n, std::string_view engine) {
  Support s;
  const KernelQuery q = static_query(n);
  for (const KernelDef& def : KernelRegistry::global().all()) {
    if (def.engine != engine || !matches_op(def, n)) continue;
    s.op = true;
    Verdict v = kernel_accepts(def, q);
    if (v.accepted() && !output_dtypes_fit(def, n)) v = refuse("its output dtype is not one the kernel writes");
    if (v.accepted()) {
      s.accepted = true;
      s.later = false;
      return s;
    }
    if (v.later()) s.later = true;
    else if (s.reason.empty()) s.reason = v.reason;
  }
  return s;
}

}  // namespace

const KernelDef* kernel_on(const Node& n, std::string_view engine, bool or_later) {
  const KernelQuery q = static_query(n);
  const KernelDef* later = nullptr;
  for (const KernelDef& def : KernelRegistry::global().all()) {
    if (def.engine != engine || !matches_op(def, n)) continue;
    const Verdict v = kernel_accepts(def, q);
    if (v.accepted() && output_dtypes_fit(def, n)) return &def;
    if (v.later() && !later) later = &def;
  }
  return or_later ? later : nullptr;
}

namespace {

// Every engine some kernel is registered for, sorted.
std::vector<std::string> known_engines() {
  std::set<std::string> names;
  for (const KernelDef& def : KernelRegistry::global().all()) names.insert(std::string(def.engine));
  return {names.begin(), names.end()};
}

// Engines (any, not only the session's) with a kernel for n's op at its opset.
std::vector<std::string> engines_serving(const Node& n) {
  std::set<std::string> names;
  for (const KernelDef& def : KernelRegistry::global().all())
    if (matches_op(def, n)) names.insert(std::string(def.engine));
  return {names.begin(), names.end()};
}

// The OP_UNSUPPORTED for a node none of `engines` serves, with the way out that applies.
Status unsupported(const Node& n, const std::vector<std::string>& engines) {
  std::vector<std::string> elsewhere = engines_serving(n);
  std::set<std::string> opset_ranges;
  for (const KernelDef& def : KernelRegistry::global().all())
    if (def.op_type == n.op_type && def.domain == n.domain)
      opset_ranges.insert(def.end_version >= (1 << 30)
                              ? std::to_string(def.since_version) + "+"
                              : std::to_string(def.since_version) + "-" + std::to_string(def.end_version));
  std::string fix;
  if (!elsewhere.empty())
    fix = "engine(s) " + join(elsewhere) +
          " have it: add one to the engine list (GEARBOX_ENGINES) or force it with --engine " + n.op_type + "=" +
          elsewhere.front();
  else if (!opset_ranges.empty())
    fix = "gearbox implements it only at opset(s) " + join({opset_ranges.begin(), opset_ranges.end()}) +
          ": re-export the model at one of them";
  else
    fix =
        "no engine of this gearbox implements it: re-export the model without it or decompose it into supported "
        "operators";
  // Where a plugin could have come from, and which ones did (runtime/plugin_loader.h).
  return make_error(ErrorCode::OP_UNSUPPORTED, "node '", n.name, "': operator ", n.op_type, " (domain ",
                    n.domain.empty() ? "ai.onnx" : n.domain, ", opset ", n.opset,
                    ") has no kernel on the engines tried (", join(engines), "); ", fix, op_path_note());
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

class Partitioner {
 public:
  Partitioner(const Graph& main, const std::vector<std::string>& engines, const std::vector<EngineOverride>& overrides,
              bool keep_placed)
      : main_(main),
        engines_(engines),
        overrides_(overrides),
        keep_placed_(keep_placed),
        matched_(overrides.size(), false) {
    out_.engines = engines;
  }

  Result<Partition> run(Graph& main) {
    const std::vector<std::string> known = known_engines();
    for (const EngineOverride& ov : overrides_)
      if (std::find(known.begin(), known.end(), ov.engine) == known.end())
        return make_error(ErrorCode::ENGINE_UNKNOWN, "--engine ", ov.target, "=", ov.engine, ": '", ov.engine,
                          "' is not an engine of this gearbox; the engines are ", join(known));
    GBX_RETURN_IF_ERROR(visit(main, main.name.empty() ? "main" : main.name));
    for (size_t i = 0; i < overrides_.size(); ++i)
      if (!matched_[i]) return unmatched(overrides_[i]);
    if (out_.reassigned)
      GBX_LOG_WARN("PARTITION",
                   "{} node(s) came with an engine this session cannot use (engines {}) and were placed again: {}",
                   out_.reassigned, join(engines_, ","), join(reassigned_names_));
    GBX_LOG_INFO("PARTITION", "{}", out_.summary());
    for (const std::string& r : out_.refusals) GBX_LOG_DEBUG("PARTITION", "passed over: {}", r);
    for (const PartitionRegion& r : out_.regions)
      GBX_LOG_DEBUG("PARTITION", "region {}: {} in graph '{}', {} node(s), {} .. {}", r.id, r.engine, r.graph, r.nodes,
                    r.first_node, r.last_node);
    return std::move(out_);
  }

 private:
  // The override for n: one naming the node beats one naming its op type. Both count as
  // matched (an op-type override beaten by a name is not a typo to report).
  const EngineOverride* override_for(const Node& n) {
    const EngineOverride* by_name = nullptr;
    const EngineOverride* by_op = nullptr;
    for (size_t i = 0; i < overrides_.size(); ++i) {
      const std::string& t = overrides_[i].target;
      if (t == n.name) {
        matched_[i] = true;
        if (!by_name) by_name = &overrides_[i];
      } else if (t == n.op_type || t == n.qualified_op()) {
        matched_[i] = true;
        if (!by_op) by_op = &overrides_[i];
      }
    }
    return by_name ? by_name : by_op;
  }

  Status place(Node& n) {
    if (const EngineOverride* ov = override_for(n)) {
      const Support s = support(n, ov->engine);
      if (!s.op || (!s.accepted && !s.later)) {
        std::vector<std::string> have = engines_serving(n);
        return make_error(ErrorCode::ENGINE_LACKS_KERNEL, "--engine ", ov->target, "=", ov->engine, ": node '", n.name,
                          "' (", n.qualified_op(), ", opset ", n.opset, ") has no kernel on ", ov->engine,
                          s.op ? " that handles it (" + s.reason + ")" : std::string(),
                          have.empty() ? "; no engine has one" : "; engines with it: " + join(have),
                          " (force one of those, or name the node rather than its op type)");
      }
      n.engine = ov->engine;
      out_.forced.insert(&n);
      if (s.later) out_.decided_at_run_time.insert(&n);
      return Status::OK();
    }
    if (!keep_placed_) n.engine.clear();
    if (!n.engine.empty()) {
      const bool listed = std::find(engines_.begin(), engines_.end(), n.engine) != engines_.end();
      if (listed) {
        const Support s = support(n, n.engine);
        if (s.accepted || s.later) {
          if (s.later) out_.decided_at_run_time.insert(&n);
          return Status::OK();
        }
      }
      GBX_LOG_DEBUG("PARTITION", "node '{}' ({}): engine {} is not usable here; placing it again", n.name,
                    n.qualified_op(), n.engine);
      if (reassigned_names_.size() < 5) reassigned_names_.push_back(n.name + " (" + n.engine + ")");
      else if (reassigned_names_.size() == 5) reassigned_names_.push_back("...");
      ++out_.reassigned;
      n.engine.clear();
    }
    // The first engine whose kernel accepts the node (or may, once the run-time shapes are
    // known: then the executor decides); else the first with the op at all, where the run
    // reports DTYPE_UNSUPPORTED if the dtype really arrives (the static type may be wrong).
    std::string first_with_op;
    for (const std::string& e : engines_) {
      const Support s = support(n, e);
      if (s.accepted || s.later) {
        n.engine = e;
        if (s.later) out_.decided_at_run_time.insert(&n);
        return Status::OK();
      }
      if (s.op) {
        out_.refusals.push_back("node '" + n.name + "' (" + n.qualified_op() + "): " + e + ": " + s.reason);
        if (first_with_op.empty()) first_with_op = e;
      }
    }
    if (first_with_op.empty()) return unsupported(n, engines_);
    n.engine = first_with_op;
    return Status::OK();
  }

  Status visit(Graph& g, const std::string& name) {
    for (auto& node : g.nodes) GBX_RETURN_IF_ERROR(place(*node));
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = *g.nodes[i];
      ++out_.nodes;
      ++out_.node_counts[n.engine];
      if (i == 0 || g.nodes[i - 1]->engine != n.engine) {
        PartitionRegion r;
        r.id = static_cast<int>(out_.regions.size());
        r.graph = name;
        r.engine = n.engine;
        r.first = i;
        r.first_node = n.name;
        out_.regions.push_back(std::move(r));
      }
      out_.regions.back().nodes++;
      out_.regions.back().last_node = n.name;
    }
    for (auto& node : g.nodes)
      for (auto& [attr, a] : node->attrs) {
        const std::string sub = node->name + "/" + attr;
        if (a.g) GBX_RETURN_IF_ERROR(visit(*a.g, a.g->name.empty() ? sub : a.g->name));
        for (auto& sg : a.graphs) GBX_RETURN_IF_ERROR(visit(*sg, sg->name.empty() ? sub : sg->name));
      }
    return Status::OK();
  }

  Status unmatched(const EngineOverride& ov) {
    // Close names: node names and op types within a small edit distance, or containing it.
    std::set<std::string> ops;
    std::vector<std::string> close;
    auto consider = [&](const std::string& s) {
      if (close.size() >= 6 || std::find(close.begin(), close.end(), s) != close.end()) return;
      if (edit_distance(s, ov.target) <= 2 || (ov.target.size() >= 3 && s.find(ov.target) != std::string::npos))
        close.push_back(s);
    };
    names_.clear();
    collect(main_, ops);
    for (const std::string& s : ops) consider(s);
    for (const std::string& s : names_) consider(s);
    return make_error(
        ErrorCode::ENGINE_OVERRIDE_UNMATCHED, "--engine ", ov.target, "=", ov.engine, ": no node is named '", ov.target,
        "' or has that op type (after graph optimization, which fuses and renames nodes)",
        close.empty() ? "; the op types are " + join({ops.begin(), ops.end()}) : "; close names: " + join(close),
        ". Name a node or op type of the optimized graph (GEARBOX_LOG_LEVEL=debug lists the regions), "
        "or switch the fusing pass off with --disable-pass");
  }

  void collect(const Graph& g, std::set<std::string>& ops) {
    for (const auto& n : g.nodes) {
      ops.insert(n->op_type);
      if (!n->domain.empty()) ops.insert(n->qualified_op());
      names_.push_back(n->name);
      for_each_subgraph(*n, [&](const Graph& sg) { collect(sg, ops); });
    }
  }

 private:
  const Graph& main_;
  const std::vector<std::string>& engines_;
  const std::vector<EngineOverride>& overrides_;
  const bool keep_placed_;
  std::vector<bool> matched_;
  std::vector<std::string> reassigned_names_;
  std::vector<std::string> names_;
  Partition out_;
};

}  // namespace

Result<std::vector<EngineOverride>> parse_engine_overrides(const std::vector<std::string>& specs) {
  std::vector<EngineOverride> out;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return make_error(ErrorCode::USAGE, "--engine '", spec,
                        "' is not NODE_OR_OPTYPE=ENGINE (e.g. --engine Conv=cpu.ref or --engine conv1=cpu.dnnl)");
    EngineOverride ov{spec.substr(0, eq), spec.substr(eq + 1)};
    for (const EngineOverride& prev : out)
      if (prev.target == ov.target && prev.engine != ov.engine)
        return make_error(ErrorCode::USAGE, "--engine gives '", ov.target, "' two engines: ", prev.engine, " and ",
                          ov.engine);
    out.push_back(std::move(ov));
  }
  return out;
}

std::string Partition::summary() const {
  std::string s = std::to_string(nodes) + (nodes == 1 ? " node, " : " nodes, ") + std::to_string(regions.size()) +
                  (regions.size() == 1 ? " region:" : " regions:");
  bool first = true;
  for (const std::string& e : engines) {
    auto it = node_counts.find(e);
    if (it == node_counts.end()) continue;
    s += (first ? " " : ", ") + e + " " + std::to_string(it->second);
    first = false;
  }
  // Engines placed by an override but not in the priority list.
  for (const auto& [e, count] : node_counts)
    if (std::find(engines.begin(), engines.end(), e) == engines.end()) {
      s += (first ? " " : ", ") + e + " " + std::to_string(count);
      first = false;
    }
  if (!decided_at_run_time.empty()) s += ", " + std::to_string(decided_at_run_time.size()) + " decided at run time";
  return s;
}

KernelQuery static_query(const Node& n) {
  std::vector<KernelQuery::Input> inputs(n.inputs.size());
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value* v = n.inputs[i];
    KernelQuery::Input& in = inputs[i];
    if (!v) continue;
    in.present = true;
    in.constant = v->is_initializer;
    if (v->is_initializer) {
      in.tensor = true;
      in.dtype = v->initializer.dtype();
      in.rank = static_cast<int64_t>(v->initializer.rank());
      in.dims = v->initializer.dims();
      in.value = &v->initializer;
      continue;
    }
    in.tensor = v->type.kind == ValueType::Kind::Tensor;
    in.maybe_none = v->type.kind == ValueType::Kind::Optional;
    if (!in.tensor) continue;
    in.dtype = v->type.dtype;
    if (v->type.shape.ranked) in.rank = static_cast<int64_t>(v->type.shape.rank());
    in.dims = v->type.shape.concrete();
  }
  std::vector<bool> wanted;
  for (const Value* out : n.outputs) wanted.push_back(out != nullptr);
  return KernelQuery(OpInfo{n.name, n.op_type, n.domain, n.opset, &n.attrs}, std::move(inputs), std::move(wanted));
}

Result<Partition> partition(Model& model, const std::vector<std::string>& engines,
                            const std::vector<EngineOverride>& overrides, bool keep_placed) {
  register_control_flow_kernels();  // If/Loop/Scan are kernels too; idempotent
  if (!model.graph) return make_error(ErrorCode::INTERNAL, "partition: the model has no graph");
  return Partitioner(*model.graph, engines, overrides, keep_placed).run(*model.graph);
}

}  // namespace gearbox
