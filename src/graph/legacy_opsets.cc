// The rewrites of ai.onnx opset-1-to-6 forms (legacy_opsets.h). Each function owns one family
// of ops; a node is changed in place (attributes, inputs, opset), with at most one node
// inserted in front of it (an Unsqueeze, a shape constant).
#include "graph/legacy_opsets.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "graph/passes/pass_util.h"

namespace gearbox {
namespace {

Status unsupported(const Node& n, const std::string& what, const std::string& fix) {
  return make_error(ErrorCode::OP_UNSUPPORTED, "node '", n.name, "' (", n.op_type, ", opset ", n.opset, "): ", what,
                    " is not supported; ", fix);
}

// Element-wise ops with opset-1-6 `broadcast` / `axis` (B aligned with A's dims from `axis`,
// or with A's trailing dims when `axis` is absent). Opset 7 broadcasts as numpy does, aligning
// trailing dims: B aligned from `axis` needs rank(A) - axis - rank(B) trailing 1s, which an
// Unsqueeze gives it.
Status upgrade_broadcast_binary(Graph& g, Node& n) {
  const bool broadcast = passes::attr_int(n, "broadcast", 0) != 0;
  const bool has_axis = n.attrs.count("axis") > 0;
  if (broadcast && has_axis && n.inputs.size() == 2 && n.inputs[0] && n.inputs[1]) {
    const int ra = passes::static_rank(n.inputs[0]), rb = passes::static_rank(n.inputs[1]);
    if (ra < 0 || rb < 0)
      return unsupported(n, "broadcast with an axis between inputs whose ranks are not known at import",
                         "give the graph's inputs static ranks, or re-export at opset 7 or later");
    int64_t axis = passes::attr_int(n, "axis", 0);
    if (axis < 0) axis += ra;
    if (axis < 0 || axis + rb > ra)
      return make_error(ErrorCode::ATTRIBUTE_INVALID, "node '", n.name, "' (", n.op_type, ", opset ", n.opset,
                        "): axis ", passes::attr_int(n, "axis", 0), " does not place B (rank ", rb, ") inside A (rank ",
                        ra, ")");
    const int64_t trailing = ra - axis - rb;
    if (trailing > 0) {
      std::vector<int64_t> axes;
      for (int64_t i = 0; i < trailing; ++i) axes.push_back(rb + i);
      Node* u = passes::insert_node_before(g, &n, "Unsqueeze", n.name + "/legacy_axis");
      u->opset = 13;
      Value* b = g.add_value(n.name + "/legacy_axis_out");
      b->type = n.inputs[1]->type;
      if (b->type.shape.ranked)
        for (int64_t i = 0; i < trailing; ++i) b->type.shape.dims.push_back(Dim{1});
      b->producer = u;
      u->inputs = {n.inputs[1], passes::add_constant(g, n.name + "/legacy_axes", Tensor::from_vector<int64_t>(axes))};
      u->outputs = {b};
      n.inputs[1] = b;
    }
  }
  n.attrs.erase("broadcast");
  n.attrs.erase("axis");
  n.opset = 7;
  return Status::OK();
}

// Gemm-1..6: `broadcast` of C, which opset 7's unidirectional broadcast covers.
Status upgrade_gemm(Graph&, Node& n) {
  n.attrs.erase("broadcast");
  n.opset = 7;
  return Status::OK();
}

// BatchNormalization-1..6: is_test (default 0: training), spatial (default 1), momentum,
// epsilon. Test mode with spatial statistics is opset 9's operator; its mean, variance and
// saved outputs must then be unused.
Status upgrade_batch_norm(Graph& g, Node& n) {
  if (passes::attr_int(n, "is_test", 0) == 0)
    return unsupported(n, "training-mode BatchNormalization (is_test = 0, the default of opsets 1-6)",
                       "export the model in eval mode (is_test = 1)");
  if (passes::attr_int(n, "spatial", 1) == 0)
    return unsupported(n, "per-activation statistics (spatial = 0)", "re-export with spatial statistics");
  std::optional<passes::GraphIndex> index;  // who reads the extra outputs, built if there are any
  for (size_t i = 1; i < n.outputs.size(); ++i) {
    if (!n.outputs[i]) continue;
    if (!index) index.emplace(g);
    if (index->num_uses(n.outputs[i]) > 0 || index->pinned(n.outputs[i]))
      return unsupported(n, "reading the running or saved statistics of a test-mode BatchNormalization",
                         "read only its output Y");
    n.outputs[i]->producer = nullptr;
    n.outputs[i] = nullptr;
  }
  while (n.outputs.size() > 1 && !n.outputs.back()) n.outputs.pop_back();
  for (const char* a : {"is_test", "spatial", "consumed_inputs"}) n.attrs.erase(a);
  n.opset = 9;
  return Status::OK();
}

// Reshape-1..4: the target shape is the `shape` attribute; from 5 an input.
Status upgrade_reshape(Graph& g, Node& n) {
  if (!n.attrs.count("shape"))
    return make_error(ErrorCode::MODEL_INVALID, "node '", n.name, "' (Reshape, opset ", n.opset,
                      ") has no shape attribute");
  std::vector<int64_t> shape = passes::attr_ints(n, "shape");
  n.inputs.resize(1);
  n.inputs.push_back(passes::add_constant(g, n.name + "/legacy_shape", Tensor::from_vector<int64_t>(shape)));
  n.attrs.erase("shape");
  n.attrs.erase("consumed_inputs");
  n.opset = 5;
  return Status::OK();
}

// Pad-1: `paddings`, renamed `pads` at opset 2 (same layout).
Status upgrade_pad(Graph&, Node& n) {
  auto it = n.attrs.find("paddings");
  if (it != n.attrs.end()) {
    Attribute pads = it->second;
    n.attrs.erase(it);
    n.attrs["pads"] = std::move(pads);
  }
  n.opset = 2;
  return Status::OK();
}

// The ops whose opset-1 form only adds `consumed_inputs` and whose kernels start later.
Status upgrade_instance_norm(Graph&, Node& n) {
  n.attrs.erase("consumed_inputs");
  n.opset = 6;
  return Status::OK();
}

using Upgrade = Status (*)(Graph&, Node&);

// Op -> (the last opset of its legacy form, the rewrite).
const std::unordered_map<std::string_view, std::pair<int, Upgrade>>& upgrades() {
  static const std::unordered_map<std::string_view, std::pair<int, Upgrade>> table{
      {"Add", {6, upgrade_broadcast_binary}},
      {"Sub", {6, upgrade_broadcast_binary}},
      {"Mul", {6, upgrade_broadcast_binary}},
      {"Div", {6, upgrade_broadcast_binary}},
      {"Pow", {6, upgrade_broadcast_binary}},
      {"And", {6, upgrade_broadcast_binary}},
      {"Or", {6, upgrade_broadcast_binary}},
      {"Xor", {6, upgrade_broadcast_binary}},
      {"Equal", {6, upgrade_broadcast_binary}},
      {"Greater", {6, upgrade_broadcast_binary}},
      {"Less", {6, upgrade_broadcast_binary}},
      {"Gemm", {6, upgrade_gemm}},
      {"BatchNormalization", {6, upgrade_batch_norm}},
      {"Reshape", {4, upgrade_reshape}},
      {"Pad", {1, upgrade_pad}},
      {"InstanceNormalization", {5, upgrade_instance_norm}},
  };
  return table;
}

}  // namespace

Result<int> upgrade_legacy_ops(Graph& g) {
  int upgraded = 0;
  std::vector<Node*> order;
  for (auto& n : g.nodes) order.push_back(n.get());
  for (Node* n : order) {
    for (auto& [name, a] : n->attrs) {
      if (a.g) {
        GBX_ASSIGN_OR_RETURN(int k, upgrade_legacy_ops(*a.g));
        upgraded += k;
      }
      for (auto& sg : a.graphs) {
        GBX_ASSIGN_OR_RETURN(int k, upgrade_legacy_ops(*sg));
        upgraded += k;
      }
    }
    if (!n->domain.empty() && n->domain != "ai.onnx") continue;
    const auto it = upgrades().find(n->op_type);
    if (it == upgrades().end() || n->opset > it->second.first) continue;
    GBX_RETURN_IF_ERROR(it->second.second(g, *n));
    ++upgraded;
  }
  return upgraded;
}

}  // namespace gearbox
