#include "runtime/precision_compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "base/strings.h"
#include "runtime/node_observer.h"
#include "runtime/precision.h"

namespace gearbox {
namespace {

// The elements of a tensor as floats (bf16 and fp16 widen exactly; integers as far as a float
// holds them), for measuring; non-numeric tensors give none.
std::vector<float> as_floats(const Tensor& t) {
  std::vector<float> v;
  if (t.dtype() == DType::String || t.dtype() == DType::Undefined) return v;
  v.resize(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::F32) std::copy_n(t.data<float>(), v.size(), v.begin());
  else
    for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = static_cast<float>(t.at_double(i));
  return v;
}

ValueError measure(const std::string& name, const std::vector<float>& got, const std::vector<float>& ref) {
  ValueError e;
  e.value = name;
  e.elements = static_cast<int64_t>(ref.size());
  double dot = 0, gg = 0, rr = 0;
  bool finite_mismatch = false;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double a = got[i], r = ref[i];
    if (!std::isfinite(a) || !std::isfinite(r)) {
      // The same NaN or infinity on both sides is agreement; one side only is the worst error.
      if (!(std::isnan(a) && std::isnan(r)) && a != r) finite_mismatch = true;
      continue;
    }
    e.max_abs = std::max(e.max_abs, std::fabs(a - r));
    e.max_ref = std::max(e.max_ref, std::fabs(r));
    dot += a * r;
    gg += a * a;
    rr += r * r;
  }
  if (finite_mismatch) {
    e.relative = std::numeric_limits<double>::infinity();
    e.cosine = std::numeric_limits<double>::quiet_NaN();
    return e;
  }
  e.relative = e.max_abs == 0 ? 0 : e.max_ref > 0 ? e.max_abs / e.max_ref : std::numeric_limits<double>::infinity();
  e.cosine = gg == 0 && rr == 0 ? 1 : gg > 0 && rr > 0 ? dot / std::sqrt(gg * rr) : 0;
  return e;
}

// The fp32 twin's outputs, by value name (main graph only: a subgraph's values are rewritten
// on every iteration).
class Recorder : public NodeObserver {
 public:
  Status before_node(const Node&, int, const std::vector<const RuntimeValue*>&) override { return Status::OK(); }
  Status after_node(const Node& node, int depth, const std::vector<RuntimeValue>& outputs) override {
    if (depth > 0) return Status::OK();
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < outputs.size() && i < node.outputs.size(); ++i)
      if (node.outputs[i] && outputs[i].is_tensor()) values[node.outputs[i]->name] = as_floats(outputs[i].tensor());
    return Status::OK();
  }
  std::unordered_map<std::string, std::vector<float>> values;

 private:
  std::mutex mu_;
};

// Measures each node of the reduced run against the recorded fp32 values as it completes.
class Measurer : public NodeObserver {
 public:
  Measurer(const Recorder& fp32, const OptimizerReport& report) : fp32_(fp32) {
    for (const auto& [removed, now] : report.final_nodes())
      if (!now.empty()) from_[now].push_back(removed);
  }
  Status before_node(const Node&, int, const std::vector<const RuntimeValue*>&) override { return Status::OK(); }
  Status after_node(const Node& node, int depth, const std::vector<RuntimeValue>& outputs) override {
    if (depth > 0) return Status::OK();
    std::lock_guard<std::mutex> lock(mu_);
    NodeError n;
    n.node = node.name;
    n.op_type = precision_op_type(node);
    if (auto it = from_.find(node.name); it != from_.end()) n.from = it->second;
    n.engine = node.engine;
    n.compute_dtype = node.compute_dtype;
    for (const Value* in : node.inputs)
      if (in)
        if (auto it = error_of_.find(in->name); it != error_of_.end()) n.given = std::max(n.given, it->second);
    for (size_t i = 0; i < outputs.size() && i < node.outputs.size(); ++i) {
      if (!node.outputs[i] || !outputs[i].is_tensor()) continue;
      const std::string& name = node.outputs[i]->name;
      auto ref = fp32_.values.find(name);
      const std::vector<float> got = as_floats(outputs[i].tensor());
      if (ref == fp32_.values.end() || ref->second.size() != got.size()) {
        ++unmatched;
        continue;
      }
      n.outputs.push_back(measure(name, got, ref->second));
      n.error = std::max(n.error, n.outputs.back().relative);
      error_of_[name] = n.outputs.back().relative;
      if (is_output_.count(name)) outputs_[name] = n.outputs.back();
    }
    nodes.push_back(std::move(n));
    return Status::OK();
  }
  void expect_outputs(const std::vector<IoInfo>& infos) {
    for (const IoInfo& io : infos) is_output_[io.name] = true;
  }
  std::vector<NodeError> nodes;
  size_t unmatched = 0;
  std::map<std::string, ValueError> outputs_;

 private:
  const Recorder& fp32_;
  std::mutex mu_;
  std::unordered_map<std::string, double> error_of_;
  std::unordered_map<std::string, bool> is_output_;
  std::unordered_map<std::string, std::vector<std::string>> from_;
};

// The relative error a single rounding to `dtype` makes: 2^-8 for bf16 (8 significant bits),
// 2^-11 for fp16; fp32's own for a session without a reduced dtype.
double unit_roundoff(DType dtype) {
  if (dtype == DType::BF16) return std::ldexp(1.0, -8);
  if (dtype == DType::F16) return std::ldexp(1.0, -11);
  return std::ldexp(1.0, -24);
}

std::string dtype_label(DType d) { return d == DType::Undefined ? "as is" : std::string(dtype_name(d)); }

std::string number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return "inf";
  return fmt::format("{:.3g}", v);
}

nlohmann::json value_json(const ValueError& e) {
  auto num = [](double v) -> nlohmann::json { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(number(v)); };
  return {{"value", e.value},       {"max_abs", num(e.max_abs)}, {"max_ref", num(e.max_ref)},
          {"relative", num(e.relative)}, {"cosine", num(e.cosine)},   {"elements", e.elements}};
}

}  // namespace

ValueError compare_values(const std::string& name, const Tensor& reduced, const Tensor& fp32) {
  const std::vector<float> got = as_floats(reduced), ref = as_floats(fp32);
  if (got.size() != ref.size()) {
    ValueError e;  // shapes that differ agree in nothing
    e.value = name;
    e.relative = std::numeric_limits<double>::infinity();
    e.cosine = std::numeric_limits<double>::quiet_NaN();
    return e;
  }
  return measure(name, got, ref);
}

Result<PrecisionComparison> compare_precision(const Session& fp32, const Session& reduced,
                                              const std::map<std::string, Tensor>& inputs) {
  if (fp32.model().graph->nodes.size() != reduced.model().graph->nodes.size())
    return make_error(ErrorCode::USAGE, "compare_precision: the two sessions' graphs differ (",
                      fp32.model().graph->nodes.size(), " and ", reduced.model().graph->nodes.size(),
                      " nodes): build both from the same model with the same passes");
  Recorder recorder;
  GBX_RETURN_IF_ERROR(fp32.run(inputs, nullptr, &recorder).status());
  Measurer measurer(recorder, reduced.optimizer_report());
  measurer.expect_outputs(reduced.outputs());
  GBX_RETURN_IF_ERROR(reduced.run(inputs, nullptr, &measurer).status());

  PrecisionComparison c;
  c.mode = reduced.model().precision_mode.empty() ? "force_fp32" : reduced.model().precision_mode;
  if (auto mode = parse_precision_mode(c.mode); mode.ok()) c.reduced = reduced_dtype(*mode);
  c.nodes = std::move(measurer.nodes);
  c.unmatched = measurer.unmatched;
  const double floor = unit_roundoff(c.reduced);
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    NodeError& n = c.nodes[i];
    n.gain = n.error / std::max(n.given, floor);
    n.jump = n.gain > kJumpFactor;
    if (n.jump && !c.first_jump) c.first_jump = i;
  }
  for (const IoInfo& io : reduced.outputs())
    if (auto it = measurer.outputs_.find(io.name); it != measurer.outputs_.end()) c.model_outputs.push_back(it->second);
  return c;
}

std::string PrecisionComparison::table(size_t limit) const {
  std::string s = fmt::format("{} against force_fp32, {} nodes in execution order (error: max |diff| / max |fp32| "
                              "of the node's outputs; given: the largest error among its inputs)\n",
                              mode, nodes.size());
  s += fmt::format("{:>5}  {:<36} {:<22} {:<9} {:>9} {:>9} {:>10} {:>12}\n", "#", "node", "op", "dtype", "error",
                   "given", "max|diff|", "cosine");
  // Every jump is shown; the other rows up to `limit`, the first ones in order.
  size_t shown = 0, hidden = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeError& n = nodes[i];
    if (!n.jump && shown >= limit) {
      ++hidden;
      continue;
    }
    ++shown;
    double max_abs = 0, cosine = 1;
    for (const ValueError& v : n.outputs) {
      max_abs = std::max(max_abs, v.max_abs);
      cosine = std::isnan(v.cosine) || std::isnan(cosine) ? std::numeric_limits<double>::quiet_NaN()
                                                          : std::min(cosine, v.cosine);
    }
    std::string name = n.node.size() > 36 ? "..." + n.node.substr(n.node.size() - 33) : n.node;
    std::string op = n.op_type.size() > 22 ? n.op_type.substr(n.op_type.size() - 22) : n.op_type;
    s += fmt::format("{:>5}  {:<36} {:<22} {:<9} {:>9} {:>9} {:>10} {:>12}{}\n", i, name, op,
                     dtype_label(n.compute_dtype), number(n.error), number(n.given), number(max_abs),
                     std::isnan(cosine) ? "nan" : fmt::format("{:.8f}", cosine),
                     first_jump && *first_jump == i ? "  <- first jump" : n.jump ? "  <- jump" : "");
  }
  if (hidden) s += fmt::format("  ({} more nodes without a jump; --top N shows more)\n", hidden);
  if (first_jump) {
    const NodeError& n = nodes[*first_jump];
    s += fmt::format("first jump: node '{}' ({}, {}): its error {} is {}x the largest it was given ({}) or one "
                     "rounding makes.\n",
                     n.node, n.op_type, dtype_label(n.compute_dtype), number(n.error), number(n.gain),
                     number(n.given));
    if (!n.from.empty()) s += "  the passes made it from the model's nodes " + join(n.from) + " (any of these names keeps it too)\n";
    if (n.compute_dtype != DType::Undefined)
      s += fmt::format("  keep it in fp32: a --keep-dtype FILE with the line '{}' (or 'OpType::{}' for every such "
                       "node)\n",
                       n.node, n.op_type);
    else
      s += "  it computes in its own dtype: the error comes from reduced-precision values it reads\n";
  } else {
    s += fmt::format("no jump: no node's error exceeds {}x what it was given (or the format's unit roundoff)\n",
                     kJumpFactor);
  }
  for (const ValueError& v : model_outputs)
    s += fmt::format("output {}: max |diff| {} (max |fp32| {}), relative {}, cosine {:.8f}\n", v.value,
                     number(v.max_abs), number(v.max_ref), number(v.relative), v.cosine);
  if (unmatched) s += fmt::format("({} values had no fp32 counterpart and were not compared)\n", unmatched);
  return s;
}

nlohmann::json PrecisionComparison::to_json() const {
  nlohmann::json j{{"mode", mode}, {"unmatched", unmatched}};
  j["first_jump"] = first_jump ? nlohmann::json(nodes[*first_jump].node) : nlohmann::json(nullptr);
  nlohmann::json list = nlohmann::json::array();
  for (const NodeError& n : nodes) {
    nlohmann::json outs = nlohmann::json::array();
    for (const ValueError& v : n.outputs) outs.push_back(value_json(v));
    list.push_back({{"node", n.node},
                    {"op_type", n.op_type},
                    {"from", n.from},
                    {"engine", n.engine},
                    {"compute_dtype", dtype_label(n.compute_dtype)},
                    {"error", std::isfinite(n.error) ? nlohmann::json(n.error) : nlohmann::json(number(n.error))},
                    {"given", n.given},
                    {"gain", std::isfinite(n.gain) ? nlohmann::json(n.gain) : nlohmann::json(number(n.gain))},
                    {"jump", n.jump},
                    {"outputs", outs}});
  }
  j["nodes"] = list;
  nlohmann::json outs = nlohmann::json::array();
  for (const ValueError& v : model_outputs) outs.push_back(value_json(v));
  j["outputs"] = outs;
  return j;
}

}  // namespace gearbox
