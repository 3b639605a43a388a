// Pad folding: a constant-mode Pad by zeros on the spatial axes, read only by a Conv or an
// AveragePool, becomes that op's own padding:
//   Conv(Pad(x, p))                                   -> Conv(x, pads += p)
//   AveragePool(Pad(x, p), count_include_pad = any)   -> AveragePool(x, pads = p, count_include_pad = 1)
// (the padded zeros are in every window's count, as count_include_pad says). torch exports
// AvgPool2d(padding=k) with its default count_include_pad=True as such a Pad (Inception-v3's
// branch pools), and TensorFlow converters write explicit Pads before "SAME" convolutions; the
// Pad ran on the reference engine and split the channels-last region around it. Not folded:
// other modes, a non-zero constant, pads on the batch or channel axes or negative ones, Pad-18's
// axes input, a pool with auto_pad, ceil_mode or padding of its own (AveragePool's padded count
// at the far edge under ceil_mode differs between runtimes), MaxPool (it pads with -inf).
#include <algorithm>

#include "graph/passes/passes.h"

namespace gearbox::passes {
namespace {

std::string string_attr(const Node& n, const char* name, const char* def) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? def : it->second.s;
}

// The Pad's pads ([begin of each axis..., end of each axis...]) when it is a constant-mode Pad by
// zeros; empty otherwise.
std::vector<int64_t> zero_constant_pads(const Node& pad) {
  if (pad.op_type != "Pad" || !pad.domain.empty() || pad.outputs.size() != 1 || pad.inputs.empty()) return {};
  if (string_attr(pad, "mode", "constant") != "constant") return {};
  if (pad.opset < 11) {
    if (attr_float(pad, "value", 0.f) != 0.f) return {};
    return attr_ints(pad, "pads");
  }
  if (pad.inputs.size() < 2 || !is_const(pad.inputs[1]) || pad.inputs[1]->initializer.dtype() != DType::I64) return {};
  if (pad.inputs.size() > 3 && pad.inputs[3]) return {};  // axes (opset 18)
  if (pad.inputs.size() > 2 && pad.inputs[2]) {
    auto v = const_scalar(pad.inputs[2]);
    if (!v || *v != 0) return {};
  }
  const Tensor& t = pad.inputs[1]->initializer;
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

// The consumer's spatial pads with the Pad's added ([begins..., ends...] over rank - 2 axes),
// or empty when the Pad cannot be folded into it.
std::vector<int64_t> folded_pads(const Node& op, const std::vector<int64_t>& p) {
  if (p.size() % 2 != 0 || p.size() < 6) return {};
  const size_t rank = p.size() / 2, spatial = rank - 2;
  for (size_t a : {size_t{0}, size_t{1}})
    if (p[a] != 0 || p[rank + a] != 0) return {};
  if (std::any_of(p.begin(), p.end(), [](int64_t v) { return v < 0; })) return {};
  const std::string auto_pad = string_attr(op, "auto_pad", "NOTSET");
  if (auto_pad != "NOTSET") return {};
  std::vector<int64_t> own = attr_ints(op, "pads");
  if (own.empty()) own.assign(2 * spatial, 0);
  if (own.size() != 2 * spatial) return {};
  if (op.op_type == "AveragePool") {
    if (attr_int(op, "ceil_mode", 0) != 0 || std::any_of(own.begin(), own.end(), [](int64_t v) { return v != 0; }))
      return {};
  }
  for (size_t a = 0; a < spatial; ++a) {
    own[a] += p[2 + a];
    own[spatial + a] += p[rank + 2 + a];
  }
  return own;
}

}  // namespace

Result<int> fold_pads(Graph& g, const PassContext& ctx) {
  GraphIndex idx(g);
  std::unordered_set<const Node*> dead;
  int matches = 0;
  for (auto& up : g.nodes) {
    Node* op = up.get();
    if (!op->domain.empty() || (op->op_type != "Conv" && op->op_type != "AveragePool") || op->inputs.empty()) continue;
    Node* pad = idx.producer(op->inputs[0]);
    if (!pad || dead.count(pad) || idx.sole_consumer(pad->outputs[0]) != op || idx.pinned(pad->outputs[0])) continue;
    // The consumer must read the padded value as its data input only (not also as a weight).
    if (std::count(op->inputs.begin(), op->inputs.end(), pad->outputs[0]) != 1) continue;
    const std::vector<int64_t> pads = folded_pads(*op, zero_constant_pads(*pad));
    if (pads.empty()) continue;
    op->inputs[0] = pad->inputs[0];
    op->attrs["pads"] = attr_ints(pads);
    if (op->op_type == "AveragePool") op->attrs["count_include_pad"] = attr_int(1);
    pad->outputs[0]->producer = nullptr;
    pad->inputs.clear();
    dead.insert(pad);
    record_replacement(ctx, *pad, *op);
    ++matches;
  }
  erase_nodes(g, dead);
  return matches;
}

}  // namespace gearbox::passes
