// ImportedModel (see imported_model.h): which initializers are trained, and the eager forward.
#include "frontend/onnx_training/imported_model.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "frontend/autodiff/gradient_registry.h"
#include "frontend/autodiff/tape.h"
#include "frontend/onnx_training/recurrent_lowering.h"
#include "frontend/ops/internal.h"
#include "frontend/tensor_impl.h"
#include "graph/ir.h"
#include "graph/onnx_importer.h"

namespace gbx::nn::onnx_training {

namespace {

using gearbox::ErrorCode;
using gearbox::make_error;

// Inputs of ONNX ops that take no gradient (shapes, axes, indices, running statistics, bounds):
// a float initializer feeding only these is not trained, and a path through them is no path.
const std::map<std::string, std::set<size_t>, std::less<>>& non_differentiable_inputs() {
  static const std::map<std::string, std::set<size_t>, std::less<>> table{
      {"Reshape", {1}},
      {"Expand", {1}},
      {"Tile", {1}},
      {"Slice", {1, 2, 3, 4}},
      {"Unsqueeze", {1}},
      {"Squeeze", {1}},
      {"ReduceSum", {1}},
      {"ReduceMean", {1}},
      {"ReduceMax", {1}},
      {"ReduceMin", {1}},
      {"Split", {1}},
      {"Gather", {1}},
      {"GatherElements", {1}},
      {"GatherND", {1}},
      {"Pad", {1, 2, 3}},
      {"Resize", {1, 2, 3}},
      {"BatchNormalization", {3, 4}},
      {"Dropout", {1, 2}},
      {"TopK", {1}},
      {"OneHot", {0, 1, 2}},
      {"ScatterElements", {1}},
      {"ScatterND", {1}},
      {"CumSum", {1}},
      {"Clip", {1, 2}},
      {"Pow", {1}},
      {"ConstantOfShape", {0}},
      {"Range", {0, 1, 2}},
      {"Shape", {0}},
      {"Size", {0}},
      {"Where", {0}},
  };
  return table;
}

bool in_default_domain(const gearbox::Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

bool differentiable_input(const gearbox::Node& n, size_t slot) {
  if (!in_default_domain(n)) return true;
  auto it = non_differentiable_inputs().find(n.op_type);
  return it == non_differentiable_inputs().end() || !it->second.count(slot);
}

// A value that can carry a gradient: float, or of a type shape inference left unknown.
bool float_valued(const gearbox::Value* v) {
  const gearbox::DType t = v->type.dtype;
  return v->type.kind == gearbox::ValueType::Kind::Tensor && (t == gearbox::DType::Undefined || gearbox::is_float(t));
}

std::string node_label(const gearbox::Node& n) { return "node '" + n.name + "' (" + n.qualified_op() + ")"; }

// The attributes and outputs a gradient builder expects of a node (they read the forward op as
// nn's ops record it): Transpose's default perm, Concat's axis non-negative.
gearbox::AttributeMap normalized_attrs(const gearbox::Node& n, const std::vector<Tensor>& ins) {
  gearbox::AttributeMap a = n.attrs;
  if (n.op_type == "Transpose" && !a.count("perm") && !ins.empty() && ins[0].defined()) {
    std::vector<int64_t> perm(ins[0].rank());
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(perm.size() - 1 - i);
    a["perm"] = gearbox::attr_ints(perm);
  }
  if (n.op_type == "Concat" && a.count("axis") && a["axis"].i < 0 && !ins.empty() && ins[0].defined())
    a["axis"].i += static_cast<int64_t>(ins[0].rank());
  return a;
}

// Slice on a trained path: the axes made explicit (0, 1, ... when omitted), steps all 1.
void normalize_slice(const gearbox::Node& n, std::vector<Tensor>& ins) {
  if (ins.size() < 3 || !ins[1].defined())
    throw_status(make_error(ErrorCode::OP_UNSUPPORTED, node_label(n), ": a Slice without starts/ends inputs ",
                            "(opset < 10) has no gradient in gearbox"));
  if (ins.size() > 4 && ins[4].defined())
    for (int64_t step : ins[4].to_int64_vector())
      if (step != 1)
        throw_status(make_error(ErrorCode::OP_UNSUPPORTED, node_label(n), " has step ", step,
                                "; the Slice gradient handles step 1 only"));
  if (ins.size() < 4) ins.resize(4);
  std::vector<int64_t> axes(static_cast<size_t>(ins[1].numel()));
  for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
  if (ins[3].defined()) axes = ins[3].to_int64_vector();
  for (int64_t& a : axes) a = normalize_axis(a, ins[0].rank(), "Slice");  // the gradient indexes with them
  ins[3] = int64s(axes);
}

}  // namespace

ImportedModel::~ImportedModel() = default;
ImportedModel::ImportedModel(ImportedModel&&) noexcept = default;
ImportedModel& ImportedModel::operator=(ImportedModel&&) noexcept = default;

ImportedModel ImportedModel::load(const std::string& path, const std::string& output) {
  auto imported = gearbox::import_onnx_file(path);
  if (!imported.ok()) throw_status(imported.status());
  ImportedModel m;
  m.model_ = std::make_unique<gearbox::Model>(std::move(imported).value());
  const gearbox::Graph& g = *m.model_->graph;

  std::string names;
  for (const gearbox::Value* v : g.outputs) {
    names += (names.empty() ? "" : ", ") + v->name;
    if (!m.output_ && (output.empty() || v->name == output)) m.output_ = v;
  }
  if (!m.output_)
    throw_status(make_error(ErrorCode::OUTPUT_UNKNOWN, "--output '", output, "' is not an output of ", path,
                            "; its outputs are ", names.empty() ? "none" : names));
  m.output_name_ = m.output_->name;
  for (const gearbox::Value* v : g.inputs) {
    Input in{v->name, std::string(gearbox::dtype_name(v->type.dtype)), {}, v->type.shape.ranked};
    for (const gearbox::Dim& d : v->type.shape.dims) in.dims.push_back(d.known() ? d.value : -1);
    m.inputs_.push_back(std::move(in));
  }

  // Forward: values a float initializer reaches through differentiable inputs.
  std::unordered_set<const gearbox::Value*> reached;
  for (const gearbox::Value* v : g.initializers)
    if (v->initializer.dtype() == gearbox::DType::F32) reached.insert(v);
  for (const auto& n : g.nodes) {
    bool any = false;
    for (size_t i = 0; i < n->inputs.size(); ++i)
      any = any || (n->inputs[i] && reached.count(n->inputs[i]) && differentiable_input(*n, i));
    if (!any) continue;
    for (const gearbox::Value* o : n->outputs)
      if (o && float_valued(o)) reached.insert(o);
  }
  // Backward from the output: the reached values it depends on through differentiable inputs.
  std::unordered_set<const gearbox::Value*> needed;
  if (reached.count(m.output_)) needed.insert(m.output_);
  m.on_grad_path_.assign(g.nodes.size(), false);
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const gearbox::Node& n = *g.nodes[k];
    bool feeds = false;
    for (const gearbox::Value* o : n.outputs) feeds = feeds || (o && needed.count(o));
    if (!feeds) continue;
    bool reads = false;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const gearbox::Value* in = n.inputs[i];
      if (in && reached.count(in) && differentiable_input(n, i)) {
        needed.insert(in);
        reads = true;
      }
    }
    if (!reads) continue;
    m.on_grad_path_[k] = true;
    // Before opset 13 Softmax/LogSoftmax normalize over all axes from `axis` on (coerced to 2-D);
    // the gradients are those of one axis, the same only when it is the last.
    if ((n.op_type == "Softmax" || n.op_type == "LogSoftmax") && n.opset < 13) {
      const gearbox::Value* x = n.inputs.empty() ? nullptr : n.inputs[0];
      auto a = n.attrs.find("axis");
      const int64_t axis = a == n.attrs.end() ? 1 : a->second.i;
      const bool last =
          x && x->type.shape.ranked && (axis == -1 || axis == static_cast<int64_t>(x->type.shape.rank()) - 1);
      if (!last)
        throw_status(make_error(ErrorCode::OP_UNSUPPORTED, node_label(n), " at opset ", n.opset,
                                " normalizes over every axis from ", axis,
                                " on, which gearbox's gradient does not "
                                "handle unless that is the last axis; re-export the model at opset 13 or later"));
    }
    if (in_default_domain(n) && is_lowered_recurrent(n.op_type)) {
      if (std::string why = recurrent_lowering_refusal(n); !why.empty())
        throw_status(make_error(ErrorCode::OP_UNSUPPORTED, node_label(n), " lies between a trained initializer and ",
                                "the loss output '", m.output_name_, "', and training through ", n.op_type,
                                " does not handle ", why, ". Train a model without it, or take the loss on an output ",
                                "before it (--output)"));
      continue;  // forward() writes it out in ops that have gradients
    }
    if (!GradientRegistry::global().find(n.domain == "ai.onnx" ? "" : n.domain, n.op_type))
      throw_status(make_error(ErrorCode::OP_UNSUPPORTED, node_label(n), " lies between a trained initializer and ",
                              "the loss output '", m.output_name_, "', and gearbox has no gradient for ",
                              n.qualified_op(), " (autodiff/gradients/; docs/framework.md lists the ops with one). ",
                              "Train a model without it, or take the loss on an output before it (--output)"));
  }

  // Which float initializers are trained, and why the others are not.
  std::unordered_map<const gearbox::Value*, std::string> first_use;
  for (const auto& n : g.nodes)
    for (size_t i = 0; i < n->inputs.size(); ++i)
      if (n->inputs[i] && !first_use.count(n->inputs[i]) && !differentiable_input(*n, i))
        first_use[n->inputs[i]] = "input " + std::to_string(i) + " of " + node_label(*n) + " takes no gradient";
  for (const gearbox::Value* v : g.initializers) {
    gearbox::Tensor value = v->initializer.clone();  // a private, writable copy
    if (needed.count(v)) {
      Tensor t = wrap(std::move(value), /*requires_grad=*/true);
      m.params_.emplace_back(v->name, t);
      m.constants_[v] = t;
      continue;
    }
    if (gearbox::is_float(v->initializer.dtype())) {
      std::string why = v->initializer.dtype() != gearbox::DType::F32
                            ? std::string(gearbox::dtype_name(v->initializer.dtype())) + " (only float32 is trained)"
                        : first_use.count(v) ? first_use[v]
                                             : "no differentiable path to '" + m.output_name_ + "'";
      m.frozen_.emplace_back(v->name, why);
    }
    m.constants_[v] = wrap(std::move(value));
  }
  if (m.params_.empty())
    throw_status(make_error(ErrorCode::INVALID_ARGUMENT, path, " has no float32 initializer from which a ",
                            "differentiable path leads to the output '", m.output_name_, "' (", g.initializers.size(),
                            " initializers, ", m.frozen_.size(),
                            " of them float and not trainable): nothing to train. Export the model with its "
                            "weights as initializers (torch.onnx.export does by default), or pick another "
                            "output with --output"));
  return m;
}

std::vector<Tensor> ImportedModel::parameter_tensors() const {
  std::vector<Tensor> out;
  for (const auto& [name, t] : params_) out.push_back(t);
  return out;
}

Tensor ImportedModel::forward(const std::map<std::string, Tensor>& feeds) const {
  const gearbox::Graph& g = *model_->graph;
  std::unordered_map<const gearbox::Value*, Tensor> env;
  for (const auto& [v, t] : constants_) env[v] = t;
  for (const gearbox::Value* v : g.inputs) {
    auto it = feeds.find(v->name);
    if (it == feeds.end())
      throw_status(make_error(ErrorCode::INPUT_MISSING, "model input '", v->name, "' was not given"));
    env[v] = it->second;
  }
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const gearbox::Node& n = *g.nodes[k];
    std::vector<Tensor> ins;
    ins.reserve(n.inputs.size());
    for (const gearbox::Value* v : n.inputs) {
      if (!v) {
        ins.emplace_back();
        continue;
      }
      auto it = env.find(v);
      if (it == env.end())
        throw_status(make_error(ErrorCode::INTERNAL, node_label(n), " reads '", v->name, "', which nothing produced"));
      ins.push_back(it->second);
    }
    // Slice's gradient reads the axes input (optional in ONNX) and handles step 1.
    if (n.op_type == "Slice" && on_grad_path_[k]) normalize_slice(n, ins);
    // MaxPool's gradient scatters through its Indices output: run it with both on a trained path.
    size_t outputs = n.outputs.size();
    if (n.op_type == "MaxPool" && on_grad_path_[k]) outputs = std::max<size_t>(outputs, 2);
    std::vector<Tensor> outs;
    try {
      if (on_grad_path_[k] && in_default_domain(n) && is_lowered_recurrent(n.op_type))
        outs = lower_recurrent(n, ins, n.outputs.size());
      else
        outs = apply(OpSpec{n.op_type, n.domain == "ai.onnx" ? "" : n.domain, n.opset}, ins, normalized_attrs(n, ins),
                     outputs);
    } catch (const Error& e) {
      throw Error(e.code(), std::string(e.what()) + " (at " + node_label(n) + ")");
    }
    for (size_t i = 0; i < n.outputs.size() && i < outs.size(); ++i)
      if (n.outputs[i]) env[n.outputs[i]] = outs[i];
  }
  auto it = env.find(output_);
  if (it == env.end())
    throw_status(make_error(ErrorCode::OUTPUT_MISSING, "output '", output_name_, "' was not produced"));
  return it->second;
}

}  // namespace gbx::nn::onnx_training
