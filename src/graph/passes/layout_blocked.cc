// Layout pass: regions of channels-last convolutions run in oneDNN's blocked layout nChw16c.
//
// Why: with 16-channel blocks oneDNN 2.6 runs its jit_1x1 kernel instead of brgconv_1x1, which
// reads cold weights faster and adds a residual (the sum post-op) for a fraction of what
// brgconv_1x1 pays on channels-last outputs; and Winograd works in this layout, so the
// reorders around every Winograd layer go away. ResNet-50's four stages as a oneDNN chain
// (2 threads, weights and activations cold): 21.6-21.8 -> 20.6-20.7 ms at batch 1, 188 -> 177
// ms at batch 8 (docs/performance.md). Channels-last stays where blocks do not fit or do not
// pay: channel counts that are not multiples of 16 (the 3-channel stem), grouped and depthwise
// convolutions, spatial kernels that do not run as Winograd (see blocked_flops) and the pools.
//
// The blocked layout is an ordinary tensor, as NHWC is: [N, C/16, H, W, 16], channel c of
// pixel (h, w) at [n, c / 16, h, w, c % 16]. Rewritten: com.gearbox.NhwcConv (after
// layout_nhwc) with group 1, input and output channels that are known multiples of 16, and a
// 1x1 or Winograd-shaped 3x3 kernel -> com.gearbox.Nchw16cConv (the same inputs and
// attributes; X, Z and Y blocked, W unchanged).
// A value entering a region is converted by Reshape([0, 0, 0, C/16, 16]) + Transpose(0, 3, 1,
// 2, 4); a value leaving it (read outside, or a graph output) by Transpose(0, 2, 3, 1, 4) +
// Reshape([0, 0, 0, C]) back into the original value, so every other reader is unchanged.
// A region (convolutions connected through X or Z) is rewritten only when its convolutions
// do at least kFlopsPerConvertedByte flops per byte its conversions copy, per image: a
// conversion is a memory copy (~0.1 ns per byte here), and blocking saves some 5-10% of a
// convolution's time (~0.01 ns per flop at ~100 GFLOP/s), which breaks even near 400.
// ResNet-50 is one region at 1536 (eight conversions); MobileNetV2's regions, 1x1 pairs
// between depthwise layers, reach 160 and stay channels-last.
#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/logging.h"
#include "device/device.h"
#include "graph/passes/passes.h"

namespace gearbox::passes {
namespace {

constexpr int64_t kBlock = 16;
constexpr double kFlopsPerConvertedByte = 400;

// The channel count of a channels-last rank-4 value when it is a known multiple of 16, else 0.
int64_t blocked_channels(const Value* v) {
  if (!v || v->type.kind != ValueType::Kind::Tensor || v->type.dtype != DType::F32 || !v->type.shape.ranked ||
      v->type.shape.rank() != 4)
    return 0;
  const Dim& c = v->type.shape.dims[3];
  return c.known() && c.value > 0 && c.value % kBlock == 0 ? c.value : 0;
}

// Per image: the multiply-adds x 2 of a convolution that runs blocked, else 0. Blocked pays
// for 1x1 convolutions (jit_1x1) and for the 3x3 ones that run as Winograd (the kernel's
// rule, src/kernels/cpu/dnnl/conv.cc winograd_candidate: at least 64 channels in and out,
// stride and dilation 1, an output of at least 7x7); other spatial kernels run oneDNN's
// blocked direct kernel, 15-25% slower than brgconv on channels-last in ResNet-50 (its
// stride-2 and 7x7 3x3 layers, gearbox profile), so they stay channels-last.
double blocked_flops(const Node& n) {
  if (n.domain != kGearboxDomain || n.op_type != "NhwcConv" || n.inputs.size() < 2 || n.outputs.empty()) return 0;
  const int64_t c = blocked_channels(n.inputs[0]), m = blocked_channels(n.outputs[0]);
  const auto w = static_dims(n.inputs[1]);
  if (!c || !m || !w || w->size() != 4 || attr_int(n, "group", 1) != 1) return 0;
  const Dim &oh = n.outputs[0]->type.shape.dims[1], &ow = n.outputs[0]->type.shape.dims[2];
  if (!oh.known() || !ow.known()) return 0;  // conversions could not be weighed
  const int64_t kh = (*w)[2], kw = (*w)[3];
  auto all_one = [&](const char* attr) {
    for (int64_t v : attr_ints(n, attr))
      if (v != 1) return false;
    return true;
  };
  const bool pointwise = kh == 1 && kw == 1;
  const bool winograd = kh == 3 && kw == 3 && c >= 64 && m >= 64 && all_one("strides") && all_one("dilations") &&
                        oh.value >= 7 && ow.value >= 7;
  if (!pointwise && !winograd) return 0;
  return 2.0 * static_cast<double>(oh.value * ow.value * m * c * kh * kw);
}

// [N, H, W, C] -> [N, H, W, C/16, 16] (split) or [N, C/16, H, W, 16] (blocked).
Shape split_shape(const Shape& s) {
  const auto& d = s.dims;
  return Shape({d[0], d[1], d[2], Dim(d[3].value / kBlock), Dim(kBlock)});
}
Shape blocked_shape(const Shape& s) {
  const auto& d = s.dims;
  return Shape({d[0], Dim(d[3].value / kBlock), d[1], d[2], Dim(kBlock)});
}

}  // namespace

Result<int> layout_blocked(Graph& g, const PassContext& ctx) {
  // nChw16c is oneDNN's AVX-512 layout (16 floats a vector). Without AVX-512 oneDNN 2.x has
  // no fast kernel for it and runs its reference convolution: ResNet-50 took >100 s instead of
  // 0.36 s on an AVX2-only EPYC. Decided at run time from the CPU that compiles the graph.
  static const bool avx512 = device::detect_cpu_capabilities().has("avx512f");
  if (!avx512) return 0;
  int onnx_opset = 13;  // the model's ai.onnx opset for the Reshapes and Transposes
  for (auto& n : g.nodes)
    if (n->domain.empty() && n->opset > 0) onnx_opset = n->opset;
  if (onnx_opset < 5) return 0;  // Reshape takes its shape as an input from opset 5 on

  GraphIndex idx(g);
  Regions regions;
  std::unordered_map<const Node*, double> flops;
  for (auto& n : g.nodes)
    if (const double f = blocked_flops(*n); f > 0) {
      regions.parent[n.get()] = n.get();
      flops[n.get()] = f;
    }
  if (regions.parent.empty()) return 0;
  auto in_region = [&](const Node* n) { return n && regions.parent.count(n) > 0; };
  for (auto& n : g.nodes)
    if (in_region(n.get()))
      for (Value* in : activation_inputs(n.get()))
        if (Node* p = idx.producer(in); in_region(p)) regions.join(n.get(), p);

  // A value leaves the region when something other than a region node's X or Z reads it.
  auto leaves = [&](const Value* y) {
    if (idx.pinned(y)) return true;
    for (const Node* c : idx.consumers(y)) {
      if (!in_region(c)) return true;
      const std::vector<Value*> acts = activation_inputs(c);
      if (std::find(acts.begin(), acts.end(), y) == acts.end() || c->inputs[1] == y ||
          (c->inputs.size() > 2 && c->inputs[2] == y))
        return true;
    }
    return false;
  };
  // Per region and image: the convolutions' flops and the bytes its conversions copy.
  auto image_bytes = [](const Value* v) {
    const auto& d = v->type.shape.dims;
    return d[1].known() && d[2].known() ? 4.0 * static_cast<double>(d[1].value * d[2].value * d[3].value)
                                        : std::numeric_limits<double>::infinity();
  };
  std::unordered_map<const Node*, double> region_flops, region_bytes;
  std::unordered_set<const Value*> converted;
  for (auto& n : g.nodes) {
    if (!in_region(n.get())) continue;
    const Node* r = regions.find(n.get());
    region_flops[r] += flops.at(n.get());
    for (Value* in : activation_inputs(n.get()))
      if (!in_region(idx.producer(in)) && converted.insert(in).second) region_bytes[r] += image_bytes(in);
    if (leaves(n->outputs[0])) region_bytes[r] += image_bytes(n->outputs[0]);
  }
  std::unordered_set<const Node*> rewrite;
  for (auto& n : g.nodes) {
    if (!in_region(n.get())) continue;
    const Node* r = regions.find(n.get());
    if (region_flops[r] >= kFlopsPerConvertedByte * region_bytes[r]) rewrite.insert(n.get());
  }
  for (auto& [r, f] : region_flops)
    GBX_LOG_DEBUG("GRAPH_OPTIMIZER", "layout_blocked: region of {}: {:.0f} flops per converted byte", r->name,
                  f / region_bytes[r]);
  if (rewrite.empty()) return 0;

  std::map<std::vector<int64_t>, Value*> shape_consts;  // one Reshape target per shape
  auto shape_const = [&](const std::vector<int64_t>& dims) {
    Value*& v = shape_consts[dims];
    if (!v) {
      Tensor t(DType::I64, {static_cast<int64_t>(dims.size())});
      for (size_t i = 0; i < dims.size(); ++i) t.data<int64_t>()[i] = dims[i];
      std::string name = "layout_blocked/shape";
      for (int64_t d : dims) name.append("_").append(std::to_string(d));
      v = add_constant(g, name, std::move(t));
    }
    return v;
  };
  auto add_node = [&](const Node* anchor, const std::string& op, const std::string& name,
                      std::vector<Value*> inputs, Value* out) {
    Node* t = insert_node_before(g, anchor, op, name);
    t->opset = onnx_opset;
    t->inputs = std::move(inputs);
    t->outputs = {out};
    out->producer = t;
    return t;
  };

  std::vector<Node*> order;
  for (auto& n : g.nodes)
    if (rewrite.count(n.get())) order.push_back(n.get());
  std::unordered_map<const Value*, Value*> blocked;  // channels-last value -> its blocked twin
  std::unordered_set<const Node*> dead;
  for (Node* n : order) {
    for (Value* in : activation_inputs(n)) {
      if (blocked.count(in)) continue;
      const int64_t c = in->type.shape.dims[3].value;
      Value* split = g.add_value(in->name + "/split16");
      split->type = in->type;
      split->type.shape = split_shape(in->type.shape);
      add_node(n, "Reshape", split->name, {in, shape_const({0, 0, 0, c / kBlock, kBlock})}, split);
      Value* twin = g.add_value(in->name + "/nChw16c");
      twin->type = in->type;
      twin->type.shape = blocked_shape(in->type.shape);
      add_node(n, "Transpose", twin->name, {split}, twin)->attrs["perm"] = attr_ints({0, 3, 1, 2, 4});
      record_twin(ctx, *twin, *in, "nChw16c", {0, 2, 3, 1, 4}, true);
      blocked[in] = twin;
    }
    std::vector<Value*> inputs = n->inputs;
    inputs[0] = blocked.at(inputs[0]);
    if (inputs.size() > 3 && inputs[3]) inputs[3] = blocked.at(inputs[3]);
    Value* y = n->outputs[0];
    Value* y_twin = g.add_value(y->name + "/nChw16c");
    y_twin->type = y->type;
    y_twin->type.shape = blocked_shape(y->type.shape);
    Node* r = add_node(n, "Nchw16cConv", n->name + "/nChw16c", std::move(inputs), y_twin);
    r->domain = kGearboxDomain;
    r->opset = 1;
    r->attrs = n->attrs;
    record_replacement(ctx, *n, *r);
    record_twin(ctx, *y_twin, *y, "nChw16c", {0, 2, 3, 1, 4}, true);
    blocked[y] = y_twin;
    if (leaves(y)) {
      Value* split = g.add_value(y->name + "/split16");
      split->type = y->type;
      split->type.shape = split_shape(y->type.shape);
      add_node(n, "Transpose", split->name, {y_twin}, split)->attrs["perm"] = attr_ints({0, 2, 3, 1, 4});
      add_node(n, "Reshape", y->name + "/merge16", {split, shape_const({0, 0, 0, y->type.shape.dims[3].value})}, y);
    } else {
      y->producer = nullptr;
    }
    dead.insert(n);
  }
  erase_nodes(g, dead);
  return static_cast<int>(order.size());
}

}  // namespace gearbox::passes
