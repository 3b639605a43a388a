// float16 widening: a model stored in float16 (weights, activations and I/O) computes in
// float32 inside, with its I/O unchanged -- the fast engines' kernels are float32 (and bf16),
// while the reference's float16 kernels round every intermediate to float16, 5-9x slower than
// ONNX Runtime and further from its results. ONNX Runtime's CPU provider does the same for the
// ops it has no float16 kernel for (it inserts Casts around them).
//
// The weights become float32 constants once (at compile: the .gbm stores them widened), each
// float16 graph input gets a Cast to float32 in front of its readers, each float16 graph output
// a Cast back from the float32 value its producer now writes, and every other float16 value is
// typed float32. Only graphs whose nodes all compute the same function in any float type are
// rewritten (the ops below: convolutions, products, element-wise, pooling, normalizations,
// shape and data movement, Constant); a graph with anything else -- a Cast to float16 (an explicit
// rounding step), an op with a dtype attribute, a subgraph -- is left as it is.
#include <set>
#include <string>
#include <unordered_set>

#include "base/half.h"
#include "graph/passes/passes.h"

namespace gearbox::passes {
namespace {

bool is_f16_tensor(const Value* v) {
  return v && v->type.kind == ValueType::Kind::Tensor && v->type.dtype == DType::F16;
}

// ai.onnx ops whose result in float32 is their float16 result before its last rounding.
bool widens(const Node& n) {
  static const std::set<std::string, std::less<>> kOps{"Abs",
                                                       "Add",
                                                       "AveragePool",
                                                       "BatchNormalization",
                                                       "Clip",
                                                       "Concat",
                                                       "Conv",
                                                       "ConvTranspose",
                                                       "Div",
                                                       "Elu",
                                                       "Erf",
                                                       "Exp",
                                                       "Expand",
                                                       "Flatten",
                                                       "Gather",
                                                       "Gemm",
                                                       "GlobalAveragePool",
                                                       "GlobalMaxPool",
                                                       "HardSigmoid",
                                                       "HardSwish",
                                                       "Identity",
                                                       "InstanceNormalization",
                                                       "LayerNormalization",
                                                       "LeakyRelu",
                                                       "Log",
                                                       "LogSoftmax",
                                                       "MatMul",
                                                       "Max",
                                                       "MaxPool",
                                                       "Mean",
                                                       "Min",
                                                       "Mul",
                                                       "Neg",
                                                       "Pad",
                                                       "Pow",
                                                       "PRelu",
                                                       "ReduceMax",
                                                       "ReduceMean",
                                                       "ReduceMin",
                                                       "ReduceSum",
                                                       "Relu",
                                                       "Reshape",
                                                       "Resize",
                                                       "Selu",
                                                       "Shape",
                                                       "Sigmoid",
                                                       "Slice",
                                                       "Softmax",
                                                       "Softplus",
                                                       "Split",
                                                       "Sqrt",
                                                       "Squeeze",
                                                       "Sub",
                                                       "Sum",
                                                       "Tanh",
                                                       "Tile",
                                                       "Transpose",
                                                       "Unsqueeze",
                                                       "Upsample",
                                                       "Where"};
  if (!n.domain.empty() || has_subgraph(n)) return false;
  if (n.op_type == "Cast") return attr_int(n, "to", 0) != 10;  // TensorProto FLOAT16
  if (n.op_type == "Constant") return true;                    // its float16 value is widened
  return kOps.count(n.op_type) > 0;
}

Tensor widened(const Tensor& t) {
  Tensor f(DType::F32, t.dims());
  const Half* src = t.data<Half>();
  for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = static_cast<float>(src[i]);
  return f;
}

Node* cast_node(Graph& g, const Node* anchor, Value* in, Value* out, DType to, int opset) {
  Node* c = insert_node_before(g, anchor, "Cast", out->name + "/widening_cast");
  c->opset = opset;
  c->inputs = {in};
  c->outputs = {out};
  c->attrs["to"] = attr_int(to == DType::F32 ? 1 : 10);  // TensorProto FLOAT / FLOAT16
  out->producer = c;
  return c;
}

}  // namespace

Result<int> widen_float16(Graph& g, const PassContext&) {
  bool any = false;
  for (const Value* v : g.inputs) any |= is_f16_tensor(v);
  for (const Value* v : g.initializers) any |= is_f16_tensor(v);
  int opset = 13;  // the model's ai.onnx opset for the Casts (Cast is unchanged since 13)
  for (const auto& n : g.nodes) {
    for (const Value* v : n->outputs) any |= is_f16_tensor(v);
    if (n->domain.empty() && n->opset > 0) opset = n->opset;
  }
  if (!any) return 0;
  for (const auto& n : g.nodes)
    if (!widens(*n)) return 0;

  int changed = 0;
  // Weights: float32 constants from now on.
  for (Value* v : g.initializers)
    if (is_f16_tensor(v) && v->initializer.defined()) {
      v->initializer = widened(v->initializer);
      v->type.dtype = DType::F32;
      ++changed;
    }
  // Constant nodes' float16 values likewise.
  for (const auto& n : g.nodes) {
    if (n->op_type != "Constant") continue;
    auto it = n->attrs.find("value");
    if (it != n->attrs.end() && it->second.t.defined() && it->second.t.dtype() == DType::F16) {
      it->second.t = widened(it->second.t);
      ++changed;
    }
  }
  // Inputs: read through a Cast (the model's input stays float16).
  const Node* first = g.nodes.empty() ? nullptr : g.nodes.front().get();
  for (Value* in : g.inputs) {
    if (!is_f16_tensor(in)) continue;
    Value* wide = g.add_value(in->name + "/float32");
    wide->type = in->type;
    wide->type.dtype = DType::F32;
    replace_uses(g, in, wide);
    cast_node(g, first, in, wide, DType::F32, opset);
    ++changed;
  }
  // Outputs: their producers write a float32 twin, cast back into the output.
  const std::unordered_set<const Value*> is_output(g.outputs.begin(), g.outputs.end());
  std::vector<std::pair<Value*, Value*>> narrow;  // (float32 twin, float16 output)
  for (const auto& n : g.nodes) {
    for (Value*& out : n->outputs) {
      if (!is_f16_tensor(out)) continue;
      if (is_output.count(out)) {
        Value* wide = g.add_value(out->name + "/float32");
        wide->type = out->type;
        wide->type.dtype = DType::F32;
        wide->producer = n.get();
        replace_uses(g, out, wide);  // other readers of the output read the float32 value
        narrow.emplace_back(wide, out);
        out = wide;
      } else {
        out->type.dtype = DType::F32;
      }
      ++changed;
    }
  }
  for (auto& [wide, out] : narrow) cast_node(g, nullptr, wide, out, DType::F16, opset);
  return changed;
}

}  // namespace gearbox::passes
