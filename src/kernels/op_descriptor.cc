// The op descriptor table and its cost functions. See op_descriptor.h.
#include "kernels/op_descriptor.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace gearbox {
namespace {

// ---- cost functions (conventions in runtime/op_cost.h) ----

const Tensor* tensor_in(const KernelContext& ctx, size_t i) {
  return ctx.has_input(i) && ctx.input_value(i).is_tensor() ? &ctx.input(i) : nullptr;
}
double out_elems(const std::vector<RuntimeValue>& outs) {
  return !outs.empty() && outs[0].is_tensor() ? static_cast<double>(outs[0].tensor().numel()) : 0.0;
}
// Product of dims [from, rank).
double tail_product(const Tensor& t, size_t from) {
  double p = 1;
  for (size_t i = from; i < t.rank(); ++i) p *= static_cast<double>(t.dim(i));
  return p;
}

double no_flops(const KernelContext&, const std::vector<RuntimeValue>&) { return 0; }
double per_output(const KernelContext&, const std::vector<RuntimeValue>& outs) { return out_elems(outs); }

// 2 * numel(Y) * (C_in/group * prod(kernel)); the weight is input 1 (QLinearConv: 3).
double conv_flops(const KernelContext& ctx, const std::vector<RuntimeValue>& outs) {
  const Tensor* w = tensor_in(ctx, ctx.op().op_type == "QLinearConv" ? 3 : 1);
  return w && w->rank() >= 2 ? 2.0 * out_elems(outs) * tail_product(*w, 1) : 0.0;
}
// 2 * numel(X) * (C_out/group * prod(kernel)).
double conv_transpose_flops(const KernelContext& ctx, const std::vector<RuntimeValue>&) {
  const Tensor* x = tensor_in(ctx, 0);
  const Tensor* w = tensor_in(ctx, 1);
  return x && w && w->rank() >= 2 ? 2.0 * static_cast<double>(x->numel()) * tail_product(*w, 1) : 0.0;
}
// 2 * numel(Y) * K, K the last dim of A.
double matmul_flops(const KernelContext& ctx, const std::vector<RuntimeValue>& outs) {
  const Tensor* a = tensor_in(ctx, 0);
  return a && a->rank() >= 1 ? 2.0 * out_elems(outs) * static_cast<double>(a->dim(a->rank() - 1)) : 0.0;
}
// 2 * M * N * K with K after transA.
double gemm_flops(const KernelContext& ctx, const std::vector<RuntimeValue>& outs) {
  const Tensor* a = tensor_in(ctx, 0);
  if (!a || a->rank() != 2) return 0.0;
  const bool trans_a = ctx.attr_int("transA", 0) != 0;
  return 2.0 * out_elems(outs) * static_cast<double>(trans_a ? a->dim(0) : a->dim(1));
}

// GroupQueryAttention: Q.K^T and the weighted sum of V over every present key row, 2 * 2 *
// numel(Y) * T with T the rows of present_key [B, kvN, T, H] (an upper bound: the causal mask
// skips about half of them in a prompt).
double gqa_flops(const KernelContext&, const std::vector<RuntimeValue>& outs) {
  if (outs.size() < 2 || !outs[1].is_tensor() || outs[1].tensor().rank() != 4) return 0.0;
  return 4.0 * out_elems(outs) * static_cast<double>(outs[1].tensor().dim(2));
}

// The dims of Transpose(Reshape(x, shape), perm), with Reshape's 0 (copy) and -1 (infer);
// empty when they cannot be derived.
std::vector<int64_t> reshaped_permuted(const Tensor& x, const Tensor* shape, const std::vector<int64_t>& perm) {
  if (!shape || shape->dtype() != DType::I64) return {};
  std::vector<int64_t> dims(shape->data<int64_t>(), shape->data<int64_t>() + shape->numel());
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && i < x.rank()) dims[i] = x.dim(i);
    if (dims[i] == -1) {
      if (infer >= 0) return {};
      infer = static_cast<int>(i);
    } else if (dims[i] > 0) {
      known *= dims[i];
    } else {
      return {};
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0) return {};
    dims[static_cast<size_t>(infer)] = x.numel() / known;
  }
  if (perm.size() != dims.size()) return {};
  std::vector<int64_t> out(dims.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || static_cast<size_t>(perm[i]) >= dims.size()) return {};
    out[i] = dims[static_cast<size_t>(perm[i])];
  }
  return out;
}

// com.gearbox.Attention (inputs in kernels/cpu/ref/fused_attention.cc): Q [.., Sq, D] times
// K [.., D, Sk] gives the scores, P V with V [.., Sk, Dv] the output. With `batch` the
// product of the leading dims and S = batch * Sq * Sk score elements:
//   2 S D (Q K) + 2 S Dv (P V) + S (scale) + S (mask, when given) + 5 S (softmax: max,
//   subtract, exp, sum, divide).
double attention_flops(const KernelContext& ctx, const std::vector<RuntimeValue>&) {
  const Tensor* q = tensor_in(ctx, 0);
  const Tensor* k = tensor_in(ctx, 1);
  const Tensor* v = tensor_in(ctx, 2);
  if (!q || !k || !v) return 0.0;
  const std::vector<int64_t> qd = reshaped_permuted(*q, tensor_in(ctx, 4), ctx.attr_ints("q_perm", {0, 2, 1, 3}));
  const std::vector<int64_t> kd = reshaped_permuted(*k, tensor_in(ctx, 5), ctx.attr_ints("k_perm", {0, 2, 3, 1}));
  const std::vector<int64_t> vd = reshaped_permuted(*v, tensor_in(ctx, 6), ctx.attr_ints("v_perm", {0, 2, 1, 3}));
  if (qd.size() < 2 || kd.size() < 2 || vd.size() < 2) return 0.0;
  double batch = 1;
  for (size_t i = 0; i + 2 < qd.size(); ++i) batch *= static_cast<double>(qd[i]);
  const double sq = static_cast<double>(qd[qd.size() - 2]), d = static_cast<double>(qd.back());
  const double sk = static_cast<double>(kd.back()), dv = static_cast<double>(vd.back());
  const double scores = batch * sq * sk;
  const double elementwise = 1.0 + (ctx.has_input(8) ? 1.0 : 0.0) + 5.0;
  return 2.0 * scores * d + 2.0 * scores * dv + elementwise * scores;
}

// ---- the table ----

constexpr std::string_view G = kGearboxDomain;
using A = ActivationKind;

OpDescriptor make(std::string_view domain, std::string_view op, OpKind kind, CostFn cost) {
  OpDescriptor d;
  d.domain = domain;
  d.op_type = op;
  d.kind = kind;
  d.flops = cost;
  d.precision = kind == OpKind::Contraction ? PrecisionClass::White
                : kind == OpKind::Normalization || kind == OpKind::Reduction || kind == OpKind::Recurrent
                    ? PrecisionClass::Black
                    : PrecisionClass::Gray;
  return d;
}
// An element-wise unary op: in place, commutes with a transpose, one FLOP per element.
OpDescriptor unary(std::string_view op, A act = A::None) {
  OpDescriptor d = make("", op, OpKind::ElementwiseUnary, per_output);
  d.in_place = {{0, 0}};
  d.transpose = TransposeRule::Unary;
  d.activation = act;
  return d;
}
// An element-wise op over broadcast inputs: in place over either input (of the output's size).
OpDescriptor binary(std::string_view op) {
  OpDescriptor d = make("", op, OpKind::ElementwiseBinary, per_output);
  d.in_place = {{0, 0}, {1, 0}};
  d.transpose = TransposeRule::Broadcast;
  return d;
}
// A comparison or logical op: broadcasts, but its bool output never fits a float input.
OpDescriptor predicate(std::string_view op) {
  OpDescriptor d = binary(op);
  d.in_place.clear();
  return d;
}
// Copies/reorders/selects: no FLOPs.
OpDescriptor moves(std::string_view op) { return make("", op, OpKind::DataMovement, no_flops); }
OpDescriptor of(std::string_view op, OpKind kind, CostFn cost = per_output) { return make("", op, kind, cost); }
OpDescriptor fused_op(std::string_view op, OpKind kind, CostFn cost = per_output) { return make(G, op, kind, cost); }
OpDescriptor with(OpDescriptor d, auto&& edit) {
  edit(d);
  return d;
}

std::vector<OpDescriptor> build_table() {
  const auto omits = [](OpDescriptor& d) { d.may_omit_outputs = true; };
  const auto view = [](OpDescriptor& d) { d.output_views_input0 = true; };
  const auto adds_residual_in_place = [](OpDescriptor& d) { d.kernel_overwrites_input = 3; };  // Z
  const auto preprocessing = [](OpDescriptor& d) { d.preprocessing = true; };
  // Element-wise ops whose relative error grows with their argument (exp, log, pow) and the
  // losses stay fp32 in the mixed-precision modes.
  const auto keeps_fp32 = [](OpDescriptor& d) { d.precision = PrecisionClass::Black; };
  std::vector<OpDescriptor> t = {
      // element-wise unary
      unary("Abs"),
      unary("Acos"),
      unary("Acosh"),
      unary("Asin"),
      unary("Asinh"),
      unary("Atan"),
      unary("Atanh"),
      unary("Ceil"),
      unary("Celu"),
      unary("Cos"),
      unary("Cosh"),
      unary("Elu"),
      unary("Erf"),
      with(unary("Exp"), keeps_fp32),
      unary("Floor"),
      unary("HardSigmoid", A::HardSigmoid),
      unary("HardSwish", A::HardSwish),
      unary("LeakyRelu", A::LeakyRelu),
      with(unary("Log"), keeps_fp32),
      unary("Mish"),
      unary("Neg"),
      with(unary("Reciprocal"), keeps_fp32),
      unary("Relu", A::Relu),
      unary("Round"),
      unary("Selu"),
      unary("Shrink"),
      unary("Sigmoid", A::Sigmoid),
      unary("Sign"),
      unary("Sin"),
      unary("Sinh"),
      with(unary("Softplus"), keeps_fp32),
      unary("Softsign"),
      unary("Sqrt"),
      unary("Tan"),
      unary("Tanh", A::Tanh),
      unary("ThresholdedRelu"),
      unary("BitwiseNot"),
      with(unary("Not"), [](OpDescriptor& d) { d.in_place.clear(); }),
      with(unary("IsInf"), [](OpDescriptor& d) { d.in_place.clear(); }),
      with(unary("IsNaN"), [](OpDescriptor& d) { d.in_place.clear(); }),
      with(unary("Clip", A::Clip), [](OpDescriptor& d) { d.transpose = TransposeRule::UnaryScalarOperands; }),
      with(fused_op("Gelu", OpKind::ElementwiseUnary),
           [](OpDescriptor& d) {
             d.in_place = {{0, 0}};
             d.activation = A::Gelu;  // "approximate" = "tanh": GeluTanh (fusion_util.cc)
           }),
      // Gelu's gradient (dY, X) -> dX: written by the framework's autodiff, never by an importer.
      with(fused_op("GeluGrad", OpKind::ElementwiseBinary),
           [](OpDescriptor& d) {
             d.in_place = {{0, 0}};
           }),
      // Relu's gradient (dY, Y) -> dX, from the autodiff too.
      with(fused_op("ReluGrad", OpKind::ElementwiseBinary),
           [](OpDescriptor& d) {
             d.in_place = {{0, 0}};
           }),
      // element-wise over broadcast inputs
      binary("Add"),
      binary("Sub"),
      binary("Mul"),
      binary("Div"),
      with(binary("Pow"), keeps_fp32),
      binary("Mod"),
      binary("PRelu"),
      binary("BitShift"),
      binary("BitwiseAnd"),
      binary("BitwiseOr"),
      binary("BitwiseXor"),
      binary("Max"),
      binary("Min"),
      binary("Sum"),
      binary("Mean"),
      predicate("Equal"),
      predicate("Less"),
      predicate("Greater"),
      predicate("LessOrEqual"),
      predicate("GreaterOrEqual"),
      predicate("And"),
      predicate("Or"),
      predicate("Xor"),
      // data movement: no FLOPs. Cast/CastLike/Identity commute with a transpose and run in place.
      with(moves("Cast"),
           [](OpDescriptor& d) {
             d.in_place = {{0, 0}};
             d.transpose = TransposeRule::Unary;
             d.preprocessing = true;
           }),
      moves("CastLike"),
      with(moves("Identity"),
           [](OpDescriptor& d) {
             d.transpose = TransposeRule::Unary;
             d.output_views_input0 = true;
           }),
      with(moves("Reshape"), view),
      with(moves("Flatten"), view),
      with(moves("Squeeze"), view),
      with(moves("Unsqueeze"), view),
      with(moves("Transpose"), preprocessing),
      with(moves("Concat"), [](OpDescriptor& d) { d.transpose = TransposeRule::Axis; }),
      moves("Split"),
      moves("Slice"),
      moves("Gather"),
      moves("GatherElements"),
      moves("GatherND"),
      moves("Expand"),
      moves("Tile"),
      with(moves("Pad"), preprocessing),
      with(moves("CenterCropPad"), preprocessing),
      of("Col2Im", OpKind::DataMovement),
      moves("Constant"),
      moves("ConstantOfShape"),
      moves("Range"),
      moves("DepthToSpace"),
      moves("SpaceToDepth"),
      moves("ScatterND"),
      moves("ScatterElements"),
      moves("NonZero"),
      moves("OneHot"),
      moves("Where"),
      moves("Compress"),
      moves("SplitToSequence"),
      moves("ConcatFromSequence"),
      moves("SequenceAt"),
      moves("SequenceConstruct"),
      of("Scatter", OpKind::DataMovement),
      of("ReverseSequence", OpKind::DataMovement),
      of("Trilu", OpKind::DataMovement),
      of("EyeLike", OpKind::DataMovement),
      with(of("Resize", OpKind::DataMovement), preprocessing),
      with(of("Upsample", OpKind::DataMovement), preprocessing),
      of("SequenceEmpty", OpKind::DataMovement),
      of("SequenceErase", OpKind::DataMovement),
      of("SequenceInsert", OpKind::DataMovement),
      of("SequenceLength", OpKind::DataMovement),
      make("", "Shape", OpKind::Shape, no_flops),
      make("", "Size", OpKind::Shape, no_flops),
      // contractions
      of("Conv", OpKind::Contraction, conv_flops),
      of("ConvInteger", OpKind::Contraction, conv_flops),
      of("QLinearConv", OpKind::Contraction, conv_flops),
      of("ConvTranspose", OpKind::Contraction, conv_transpose_flops),
      of("DeformConv", OpKind::Contraction, conv_flops),
      of("MatMul", OpKind::Contraction, matmul_flops),
      of("MatMulInteger", OpKind::Contraction, matmul_flops),
      of("QLinearMatMul", OpKind::Contraction, matmul_flops),
      of("Gemm", OpKind::Contraction, gemm_flops),
      of("Einsum", OpKind::Contraction),
      of("Det", OpKind::Other),
      // NhwcConv and Nchw16cConv (the layout passes' FusedConv) keep OIHW weights, and the
      // output's element count does not depend on its layout, so they count like Conv.
      fused_op("FusedConv", OpKind::Contraction, conv_flops),
      with(fused_op("NhwcConv", OpKind::Contraction, conv_flops), adds_residual_in_place),
      with(fused_op("Nchw16cConv", OpKind::Contraction, conv_flops), adds_residual_in_place),
      fused_op("FusedMatMul", OpKind::Contraction, matmul_flops),
      fused_op("FusedGemm", OpKind::Contraction, gemm_flops),
      fused_op("Attention", OpKind::Contraction, attention_flops),
      // reductions
      of("ReduceL1", OpKind::Reduction),
      of("ReduceL2", OpKind::Reduction),
      of("ReduceLogSum", OpKind::Reduction),
      of("ReduceLogSumExp", OpKind::Reduction),
      of("ReduceMax", OpKind::Reduction),
      of("ReduceMean", OpKind::Reduction),
      of("ReduceMin", OpKind::Reduction),
      of("ReduceProd", OpKind::Reduction),
      of("ReduceSum", OpKind::Reduction),
      of("ReduceSumSquare", OpKind::Reduction),
      of("ArgMax", OpKind::Reduction),
      of("ArgMin", OpKind::Reduction),
      of("TopK", OpKind::Reduction),
      of("CumSum", OpKind::Reduction),
      // normalizations
      of("BatchNormalization", OpKind::Normalization),
      // Training-mode BatchNormalization's gradient (dY, X, scale, mean, var) -> (dX, dscale,
      // dbias), from the autodiff.
      fused_op("BatchNormalizationGrad", OpKind::Normalization),
      of("InstanceNormalization", OpKind::Normalization),
      of("GroupNormalization", OpKind::Normalization),
      of("LayerNormalization", OpKind::Normalization),
      of("LpNormalization", OpKind::Normalization),
      of("MeanVarianceNormalization", OpKind::Normalization),
      of("LRN", OpKind::Normalization),
      of("Softmax", OpKind::Normalization),
      of("LogSoftmax", OpKind::Normalization),
      of("Hardmax", OpKind::Normalization),
      fused_op("LayerNormalization", OpKind::Normalization),
      fused_op("SkipLayerNormalization", OpKind::Normalization),
      // pooling
      of("AveragePool", OpKind::Pooling),
      of("MaxPool", OpKind::Pooling),
      // MaxPool's gradient (dY, Indices, shape) -> dX, from the autodiff.
      fused_op("MaxPoolGrad", OpKind::Pooling),
      of("LpPool", OpKind::Pooling),
      of("GlobalAveragePool", OpKind::Pooling),
      of("GlobalMaxPool", OpKind::Pooling),
      of("GlobalLpPool", OpKind::Pooling),
      of("MaxUnpool", OpKind::Pooling),
      fused_op("NhwcMaxPool", OpKind::Pooling),
      fused_op("NhwcAveragePool", OpKind::Pooling),
      fused_op("NhwcGlobalAveragePool", OpKind::Pooling),
      // recurrent
      of("RNN", OpKind::Recurrent),
      of("GRU", OpKind::Recurrent),
      of("LSTM", OpKind::Recurrent),
      // control flow and optionals: a branch or an empty optional may leave outputs empty
      with(of("If", OpKind::ControlFlow), omits),
      with(of("Loop", OpKind::ControlFlow), omits),
      of("Scan", OpKind::ControlFlow),
      of("SequenceMap", OpKind::ControlFlow),
      with(of("Optional", OpKind::ControlFlow), omits),
      with(of("OptionalGetElement", OpKind::ControlFlow), omits),
      of("OptionalHasElement", OpKind::ControlFlow),
      // random: never folded into a constant, never deduplicated
      of("RandomNormal", OpKind::Random),
      of("RandomUniform", OpKind::Random),
      of("RandomNormalLike", OpKind::Random),
      of("RandomUniformLike", OpKind::Random),
      of("Multinomial", OpKind::Random),
      of("Bernoulli", OpKind::Random),
      with(of("Dropout", OpKind::Random), view),  // in inference: the identity
      // the rest
      of("QuantizeLinear", OpKind::Other),
      of("DequantizeLinear", OpKind::Other),
      of("DynamicQuantizeLinear", OpKind::Other),
      of("NonMaxSuppression", OpKind::Other),
      of("RoiAlign", OpKind::Other),
      of("GridSample", OpKind::Other),
      of("AffineGrid", OpKind::Other),
      of("StringNormalizer", OpKind::Other),
      of("TfIdfVectorizer", OpKind::Other),
      of("Unique", OpKind::Other),
      of("DFT", OpKind::Other),
      of("STFT", OpKind::Other),
      of("BlackmanWindow", OpKind::Other),
      of("HammingWindow", OpKind::Other),
      of("HannWindow", OpKind::Other),
      of("MelWeightMatrix", OpKind::Other),
      with(of("NegativeLogLikelihoodLoss", OpKind::Other), keeps_fp32),
      with(of("SoftmaxCrossEntropyLoss", OpKind::Other), keeps_fp32),
      // ONNX Runtime's contrib ops that run on their own kernels (the others are rewritten at
      // import into the ops above: graph/contrib_ops.h)
      make("com.microsoft", "RotaryEmbedding", OpKind::Other, per_output),
      make("com.microsoft", "GroupQueryAttention", OpKind::Contraction, gqa_flops),
      make("com.microsoft", "QLinearConcat", OpKind::DataMovement, no_flops),
      make("com.microsoft", "QLinearAveragePool", OpKind::Pooling, per_output),
      make("com.microsoft", "QLinearSoftmax", OpKind::Normalization, per_output),
      // optimizer steps: parameters and their state stay in full precision
      with(make("ai.onnx.preview.training", "Adagrad", OpKind::Other, per_output), keeps_fp32),
      with(make("ai.onnx.preview.training", "Adam", OpKind::Other, per_output), keeps_fp32),
      with(make("ai.onnx.preview.training", "Momentum", OpKind::Other, per_output), keeps_fp32),
  };
  return t;
}

struct Table {
  std::vector<OpDescriptor> entries = build_table();
  std::map<std::pair<std::string_view, std::string_view>, size_t> index;  // views of the literals above
  std::unique_ptr<std::atomic<GradientBuilder>[]> gradients { new std::atomic<GradientBuilder>[ entries.size() ] };
  Table() {
    for (size_t i = 0; i < entries.size(); ++i) {
      index.emplace(std::pair(entries[i].domain, entries[i].op_type), i);
      gradients[i].store(nullptr);
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

std::string_view precision_class_name(PrecisionClass c) {
  switch (c) {
    case PrecisionClass::White:
      return "white";
    case PrecisionClass::Black:
      return "black";
    case PrecisionClass::Gray:
      return "gray";
  }
  return "gray";
}

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::ElementwiseUnary:
      return "elementwise-unary";
    case OpKind::ElementwiseBinary:
      return "elementwise-binary";
    case OpKind::Reduction:
      return "reduction";
    case OpKind::DataMovement:
      return "data-movement";
    case OpKind::Shape:
      return "shape";
    case OpKind::Contraction:
      return "contraction";
    case OpKind::Normalization:
      return "normalization";
    case OpKind::Pooling:
      return "pooling";
    case OpKind::Recurrent:
      return "recurrent";
    case OpKind::ControlFlow:
      return "control-flow";
    case OpKind::Random:
      return "random";
    case OpKind::Other:
      return "other";
    case OpKind::Opaque:
      return "opaque";
  }
  return "other";
}

namespace {
constexpr std::pair<ActivationKind, std::string_view> kActivationNames[] = {{A::None, ""},
                                                                            {A::Relu, "Relu"},
                                                                            {A::LeakyRelu, "LeakyRelu"},
                                                                            {A::Sigmoid, "Sigmoid"},
                                                                            {A::Tanh, "Tanh"},
                                                                            {A::HardSigmoid, "HardSigmoid"},
                                                                            {A::HardSwish, "HardSwish"},
                                                                            {A::Clip, "Clip"},
                                                                            {A::Silu, "Silu"},
                                                                            {A::Gelu, "Gelu"},
                                                                            {A::GeluTanh, "GeluTanh"}};
}  // namespace

std::string_view activation_name(ActivationKind a) {
  for (const auto& [k, name] : kActivationNames)
    if (k == a) return name;
  return "";
}

std::optional<ActivationKind> parse_activation_name(std::string_view name) {
  for (const auto& [k, n] : kActivationNames)
    if (n == name) return k;
  return std::nullopt;
}

std::optional<FusedActivation> parse_fused_activation(std::string_view name, std::span<const float> params) {
  const std::optional<ActivationKind> kind = parse_activation_name(name);
  if (!kind) return std::nullopt;
  auto param = [&](size_t i, float def) { return i < params.size() ? params[i] : def; };
  FusedActivation a;
  a.kind = *kind;
  switch (*kind) {
    case A::LeakyRelu:
      a.p0 = param(0, 0.01f);
      break;
    case A::HardSigmoid:
      a.p0 = param(0, 0.2f);
      a.p1 = param(1, 0.5f);
      break;
    case A::Clip:
      a.p0 = param(0, -3.4028234e38f);
      a.p1 = param(1, 3.4028234e38f);
      break;
    default:
      break;
  }
  return a;
}

std::optional<FusedActivation> fused_activation_of(const KernelContext& ctx) {
  const std::vector<float> params = ctx.attr_floats("activation_params");
  return parse_fused_activation(ctx.attr_string("activation", ""), params);
}

GradientBuilder OpDescriptor::gradient() const {
  const Table& t = table();
  if (this < t.entries.data() || this >= t.entries.data() + t.entries.size()) return nullptr;
  return t.gradients[static_cast<size_t>(this - t.entries.data())].load();
}

namespace {
// Descriptors added at run time (plugins): a deque, so that the addresses handed out stay valid.
struct AddedTable {
  std::mutex mu;
  std::deque<OpDescriptor> entries;
};
AddedTable& added_table() {
  static AddedTable t;
  return t;
}
}  // namespace

const OpDescriptor* find_op_descriptor(std::string_view domain, std::string_view op_type) {
  const Table& t = table();
  if (domain == "ai.onnx") domain = "";
  auto it = t.index.find(std::pair(domain, op_type));
  if (it != t.index.end()) return &t.entries[it->second];
  AddedTable& added = added_table();
  std::lock_guard<std::mutex> lock(added.mu);
  for (const OpDescriptor& d : added.entries)
    if (d.domain == domain && d.op_type == op_type) return &d;
  return nullptr;
}

Status add_op_descriptor(OpDescriptor d) {
  if (d.domain == "ai.onnx") d.domain = "";
  if (find_op_descriptor(d.domain, d.op_type))
    return make_error(ErrorCode::INVALID_ARGUMENT, "op ", d.domain, d.domain.empty() ? "" : ".", d.op_type,
                      " already has an op descriptor");
  AddedTable& added = added_table();
  std::lock_guard<std::mutex> lock(added.mu);
  added.entries.push_back(std::move(d));
  return Status::OK();
}

const OpDescriptor& op_descriptor(std::string_view domain, std::string_view op_type) {
  if (const OpDescriptor* d = find_op_descriptor(domain, op_type)) return *d;
  static const OpDescriptor kUnknown = make("", "", OpKind::Other, per_output);
  return kUnknown;
}

const OpDescriptor& op_descriptor_qualified(std::string_view qualified_op) {
  const size_t dot = qualified_op.rfind('.');
  if (dot == std::string_view::npos) return op_descriptor("", qualified_op);
  return op_descriptor(qualified_op.substr(0, dot), qualified_op.substr(dot + 1));
}

std::span<const OpDescriptor> all_op_descriptors() { return table().entries; }

Status register_gradient(std::string_view domain, std::string_view op_type, GradientBuilder builder) {
  const OpDescriptor* d = find_op_descriptor(domain, op_type);
  if (!d)
    return make_error(ErrorCode::OP_UNSUPPORTED, "register_gradient: no op descriptor for '",
                      domain.empty() ? std::string(op_type) : std::string(domain) + "." + std::string(op_type),
                      "'; add the op to the table in src/kernels/op_descriptor.cc first");
  const Table& t = table();
  t.gradients[static_cast<size_t>(d - t.entries.data())].store(builder);
  return Status::OK();
}

}  // namespace gearbox
