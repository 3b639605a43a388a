// The pass registry, the default pipeline and its switches.
#include "graph/optimizer.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "base/logging.h"
#include "base/strings.h"
#include "graph/passes/passes.h"

namespace gearbox {

namespace {

struct PassEntry {
  PassInfo info;
  passes::PassFn fn;
  // Runs only when the session's engines prefer cpu.dnnl: the layouts such a pass writes
  // pay only on oneDNN (the reference kernels rearrange in and out).
  bool dnnl_only = false;
};

const std::vector<PassEntry>& pipeline() {
  static const std::vector<PassEntry> kPipeline = {
      {{"float16_widening",
        "a model stored in float16 computes in float32 inside: weights widened once, Casts at "
        "its float16 inputs and outputs (graphs of ops that compute the same function in any float type)"},
       passes::widen_float16},
      {{"remove_noop", "remove Identity, inference-mode Dropout, Cast to the same type and Pad by zeros"},
       passes::remove_noop_ops},
      {{"shape_folding", "Shape/Size of values with static shapes become constants"}, passes::fold_static_shapes},
      {{"constant_folding", "run nodes whose inputs are all constants at compile time (size cap)"},
       passes::fold_constants},
      {{"cse", "merge nodes computing the same operator on the same inputs"}, passes::eliminate_common_subexpressions},
      {{"transpose_reshape_cancel",
        "Transpose∘Transpose -> one Transpose (or none), Reshape∘Reshape -> one Reshape, "
        "Reshape to the same static shape -> none"},
       passes::cancel_transpose_reshape},
      {{"conv_bn_fold", "fold BatchNormalization into the preceding Conv's weights and bias"},
       passes::fold_conv_batchnorm},
      {{"batchnorm_decompose",
        "a BatchNormalization no Conv absorbed -> Mul and Add by per-channel constants (vectorized, and "
        "transparent to transpose_sinking)"},
       passes::decompose_batchnorm},
      {{"pad_fold",
        "a constant Pad by zeros on the spatial axes -> the padding of the Conv or AveragePool "
        "(count_include_pad) reading it"},
       passes::fold_pads},
      {{"gelu_fusion", "Div/Erf/Add/Mul/Mul (and the tanh form) -> com.gearbox.Gelu"}, passes::fuse_gelu},
      {{"layer_norm_fusion", "ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add -> com.gearbox.LayerNormalization"},
       passes::fuse_layer_norm},
      {{"skip_layer_norm_fusion", "Add + LayerNormalization -> com.gearbox.SkipLayerNormalization"},
       passes::fuse_skip_layer_norm},
      {{"attention_fusion", "multi-head attention with its reshapes and transposes -> com.gearbox.Attention"},
       passes::fuse_attention},
      {{"matmul_fusion", "MatMul/Gemm (+bias)(+activation) -> com.gearbox.FusedMatMul / FusedGemm"},
       passes::fuse_matmul},
      {{"conv_fusion", "Conv (+residual Add)(+activation) -> com.gearbox.FusedConv"}, passes::fuse_conv},
      {{"layout_nhwc",
        "regions of 2-D Conv/FusedConv and pools -> channels-last com.gearbox.Nhwc* ops with "
        "Transposes at the boundaries (only when the engines prefer cpu.dnnl)"},
       passes::layout_nhwc,
       true},
      {{"layout_blocked",
        "regions of channels-last convolutions with channel counts that are multiples of 16 -> "
        "com.gearbox.Nchw16cConv in oneDNN's blocked layout, with Reshape + Transpose at the boundaries (only when "
        "the engines prefer cpu.dnnl)"},
       passes::layout_blocked,
       true},
      {{"transpose_sinking",
        "move a Transpose down through element-wise ops (and Binary(Transpose, Transpose) -> "
        "Transpose(Binary)) when it then merges with the next Transpose"},
       passes::sink_transposes},
      {{"dead_node_elimination", "remove nodes whose outputs nothing reads"}, passes::eliminate_dead_nodes},
  };
  return kPipeline;
}

// True when the channels-last ops the layout pass writes would run on cpu.dnnl: the first
// engine of the list with a kernel for com.gearbox.NhwcConv is cpu.dnnl (cpu.ref's transposes
// around the NCHW kernels, which would only cost). Empty is the default list
// (runtime/session.h kDefaultEngines, where cpu.dnnl comes before cpu.ref).
bool engines_prefer_dnnl(const std::string& engines) {
  if (engines.empty()) return true;
  const auto& registry = KernelRegistry::global();
  for (const std::string& e : split_list(engines))
    if (registry.find(kGearboxDomain, "NhwcConv", 1, e, DType::F32)) return e == "cpu.dnnl";
  return false;
}

std::string valid_names() {
  std::string s;
  for (const auto& p : pipeline()) s += (s.empty() ? "" : ", ") + p.info.name;
  return s;
}

}  // namespace

const std::vector<PassInfo>& optimizer_passes() {
  static const std::vector<PassInfo> kInfos = [] {
    std::vector<PassInfo> v;
    for (const auto& p : pipeline()) v.push_back(p.info);
    return v;
  }();
  return kInfos;
}

Status check_pass_names(const std::vector<std::string>& names, const std::string& where) {
  for (const auto& n : names) {
    bool known = false;
    for (const auto& p : pipeline())
      if (p.info.name == n) known = true;
    if (!known)
      return make_error(ErrorCode::PASS_UNKNOWN, "'", n, "' (", where, ") is not a pass; valid names: ", valid_names());
  }
  return Status::OK();
}

Result<std::map<std::string, bool>> read_fusion_switch_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(ErrorCode::FUSION_SWITCH_INVALID, "cannot open fusion switch file '", path, "'");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return make_error(ErrorCode::FUSION_SWITCH_INVALID, "'", path,
                      "' is not a JSON object of pass name -> \"on\" or \"off\"");
  std::map<std::string, bool> out;
  std::vector<std::string> names;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& v = it.value();
    if (!v.is_string() || (v.get<std::string>() != "on" && v.get<std::string>() != "off"))
      return make_error(ErrorCode::FUSION_SWITCH_INVALID, "'", path, "': the value for '", it.key(),
                        "' must be \"on\" or \"off\", got ", v.dump());
    out[it.key()] = v.get<std::string>() == "on";
    names.push_back(it.key());
  }
  GBX_RETURN_IF_ERROR(check_pass_names(names, path));
  return out;
}

int OptimizerReport::matches(const std::string& pass) const {
  for (const auto& p : passes)
    if (p.name == pass) return p.matches;
  return 0;
}

std::map<std::string, std::string> OptimizerReport::final_nodes() const {
  std::map<std::string, std::string> by;  // the first removal of a name: a later pass may reuse it
  for (const PassReport& pass : passes)
    for (const NodeReplacement& r : pass.replaced) by.emplace(r.node, r.constant.empty() ? r.by : "");
  std::map<std::string, std::string> out;
  for (const auto& [node, first] : by) {
    std::string at = first;
    // A replacement is removed in a later pass at most once per pass: the chain is short.
    for (size_t hops = 0; hops <= passes.size() && !at.empty(); ++hops) {
      auto next = by.find(at);
      if (next == by.end() || next->first == node) break;
      at = next->second;
    }
    out[node] = at;
  }
  return out;
}

std::string OptimizerReport::to_json(bool with_timings) const {
  nlohmann::json j;
  j["nodes_before"] = nodes_before;
  j["nodes_after"] = nodes_after;
  if (with_timings) j["ms"] = ms;
  j["passes"] = nlohmann::json::array();
  for (const auto& p : passes) {
    nlohmann::json pj{{"name", p.name},
                      {"ran", p.ran},
                      {"nodes_before", p.nodes_before},
                      {"nodes_after", p.nodes_after},
                      {"matches", p.matches}};
    if (with_timings) pj["ms"] = p.ms;
    j["passes"].push_back(std::move(pj));
  }
  j["memory"] = memory.summary();
  return j.dump();
}

namespace {

// Adds to r.replaced the nodes of `before` (name, op) that are no longer in g and that the
// pass did not record; drops records of nodes still in g (a pass that re-made a node under
// its old name).
void record_silent_removals(const Graph& g, const std::vector<std::pair<std::string, std::string>>& before,
                            PassReport& r) {
  std::set<std::string> now;
  for (const auto& n : g.nodes) now.insert(n->name);
  std::set<std::string> recorded;
  std::vector<NodeReplacement> kept;
  for (NodeReplacement& rep : r.replaced)
    if (!now.count(rep.node) && recorded.insert(rep.node).second) kept.push_back(std::move(rep));
  r.replaced = std::move(kept);
  for (const auto& [name, op] : before)
    if (!now.count(name) && !recorded.count(name)) r.replaced.push_back({name, op, {}, {}, {}});
}

}  // namespace

Result<OptimizerReport> optimize(Model& model, const OptimizerOptions& options) {
  GBX_RETURN_IF_ERROR(check_pass_names(options.disabled_passes, "--disable-pass"));
  std::vector<std::string> switch_names;
  for (const auto& [k, v] : options.switches) switch_names.push_back(k);
  GBX_RETURN_IF_ERROR(check_pass_names(switch_names, "fusion switch"));
  std::set<std::string> off(options.disabled_passes.begin(), options.disabled_passes.end());
  for (const auto& [k, on] : options.switches)
    if (!on) off.insert(k);
  bool all_off = !options.enabled;
  OptimizerReport report;
  Graph& g = *model.graph;
  report.nodes_before = g.nodes.size();
  passes::PassContext ctx;
  ctx.constant_fold_max_bytes = options.constant_fold_max_bytes;
  const auto t_start = std::chrono::steady_clock::now();
  progress_begin(options.progress, "passes", pipeline().size());
  for (const auto& p : pipeline()) {
    progress_advance(options.progress, report.passes.size());
    PassReport r;
    r.name = p.info.name;
    r.nodes_before = r.nodes_after = g.nodes.size();
    if (all_off || off.count(p.info.name)) {
      if (!all_off) GBX_LOG_INFO("GRAPH_OPTIMIZER", "{}: off", r.name);
      report.passes.push_back(r);
      continue;
    }
    if (p.dnnl_only && !engines_prefer_dnnl(options.engines)) {
      GBX_LOG_DEBUG("GRAPH_OPTIMIZER", "{}: skipped, engines '{}' do not prefer cpu.dnnl", r.name, options.engines);
      report.passes.push_back(r);
      continue;
    }
    // The nodes before the pass: those it removes without recording a replacement are
    // recorded as removed (dead code, no-ops, cancelled transposes).
    std::vector<std::pair<std::string, std::string>> before;
    before.reserve(g.nodes.size());
    for (const auto& n : g.nodes) before.emplace_back(n->name, n->qualified_op());
    ctx.record = &r;
    const auto t0 = std::chrono::steady_clock::now();
    auto m = p.fn(g, ctx);
    ctx.record = nullptr;
    if (!m.ok()) return m.status().with_context("graph pass " + p.info.name + ": ");
    record_silent_removals(g, before, r);
    r.ran = true;
    r.matches = *m;
    r.nodes_after = g.nodes.size();
    r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    GBX_LOG_INFO("GRAPH_OPTIMIZER", "{}: {} matches, nodes {} -> {}, {:.2f} ms", r.name, r.matches, r.nodes_before,
                 r.nodes_after, r.ms);
    report.passes.push_back(r);
  }
  // Fusions insert nodes next to the pattern they replace; a sort keeps the invariant (and
  // catches a pass that broke it).
  if (!all_off) GBX_RETURN_IF_ERROR(topological_sort(g));
  for (const auto& n : g.nodes)
    if (n->domain == kGearboxDomain) model.opsets[std::string(kGearboxDomain)] = 1;
  report.nodes_after = g.nodes.size();
  report.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
  progress_advance(options.progress, report.passes.size());
  if (options.plan_memory) {
    progress_begin(options.progress, "plan");
    report.memory = plan_memory(g, options.memory);
  }
  if (!all_off)
    GBX_LOG_INFO("GRAPH_OPTIMIZER", "graph '{}': {} -> {} nodes in {:.1f} ms", g.name, report.nodes_before,
                 report.nodes_after, report.ms);
  return report;
}

}  // namespace gearbox
