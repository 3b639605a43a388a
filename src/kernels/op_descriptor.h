// Op descriptors: the one table of facts about each op type gearbox registers kernels for.
//
// Every layer that needs to know "what kind of op is this" reads this table instead of
// keeping its own list of op names: the memory planner (which ops may write their output
// over an input), transpose sinking (which ops commute with a layout transpose), the fusion
// passes and the fused kernels (which ops are fusable activations, and the one parser of an
// "activation" attribute), constant folding and cleanup (which ops are random), the executor
// (which ops may leave an output empty) and the profiler's cost model (FLOPs per execution).
// The framework layer fills the gradient slot (register_gradient) without the kernel layer
// depending on it.
//
// Adding a plain op: its kernel file (GBX_REGISTER_KERNEL) and one line in the table in
// op_descriptor.cc; the test OpDescriptor.EveryRegisteredOpHasADescriptor fails until the line
// is there. A fusable activation also gets an ActivationKind (below), its parameters in
// parse_fused_activation and apply_activation, and a case in each engine's epilogue.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/kernel.h"

namespace gearbox {

// What an op does, coarsely: the class the planner, the passes and the profiler reason about.
enum class OpKind : uint8_t {
  ElementwiseUnary,   // y[i] = f(x[i]) (possibly with scalar or attribute parameters)
  ElementwiseBinary,  // y = f(a, b) under numpy broadcasting (variadic Max/Min/Sum/Mean too)
  Reduction,          // reduces axes (ReduceSum, ArgMax, TopK, CumSum)
  DataMovement,       // copies, reorders or selects elements, computes nothing (Reshape, Gather, Cast)
  Shape,              // reads only the shape of its input (Shape, Size)
  Contraction,        // sums of products over an axis (Conv, MatMul, Gemm, Attention, Einsum)
  Normalization,      // normalizes over axes (BatchNorm, LayerNorm, Softmax)
  Pooling,            // windows over spatial axes (MaxPool, AveragePool, global pools)
  Recurrent,          // RNN, GRU, LSTM
  ControlFlow,        // runs subgraphs or optionals (If, Loop, Scan, Optional)
  Random,             // draws random numbers: never folded, never deduplicated
  Other,
  // A plugin's op (kernels/plugin_ops.h): gearbox knows its inputs, outputs and cost only, so
  // no pass reasons about what it computes (never folded, fused, moved across or run in place).
  Opaque,
};
std::string_view op_kind_name(OpKind k);

// How an op relates to a Transpose of its inputs (transpose sinking moves the Transpose past
// it, to cancel against another one).
enum class TransposeRule : uint8_t {
  None,                 // does not commute (or not known to)
  Unary,                // one tensor input, output of its shape: op(T(x)) = T(op(x))
  UnaryScalarOperands,  // like Unary when every other input is a constant scalar (Clip's min, max)
  Broadcast,            // two inputs under broadcasting: op(T(a), T'(b)) = T(op(a, b)) with b re-shaped
  Axis,                 // inputs transposed alike: op(T(a), T(b), ..., axis) = T(op(a, b, ..., axis = perm[axis]))
};

// How the mixed-precision modes treat an op (runtime/precision.h; CANN's lists): White ops
// are lowered to the reduced precision where a kernel computes them in it (contractions: the
// products are exact in fp32 accumulation, the rounding of the inputs is the only loss), Black
// ops stay fp32 (normalizations, reductions, exp/log/pow, losses: errors grow with the values
// or the reduction length), Gray ops follow their producer.
enum class PrecisionClass : uint8_t { Gray, White, Black };
std::string_view precision_class_name(PrecisionClass c);  // "white", "black", "gray"

// An activation a fused Conv/MatMul/Gemm can apply to its output ("activation" attribute).
// Silu is not an op: the fusion matches Mul(x, Sigmoid(x)).
enum class ActivationKind : uint8_t {
  None,
  Relu,
  LeakyRelu,
  Sigmoid,
  Tanh,
  HardSigmoid,
  HardSwish,
  Clip,
  Silu,
  Gelu,
  GeluTanh
};

// The name in the "activation" attribute ("" for None).
std::string_view activation_name(ActivationKind a);
// The one parser of an activation name; nullopt for an unknown one ("" is None).
std::optional<ActivationKind> parse_activation_name(std::string_view name);

// A fused activation with its parameters, defaults applied: LeakyRelu p0 = alpha (0.01);
// HardSigmoid p0 = alpha (0.2), p1 = beta (0.5); Clip p0 = min, p1 = max (+-FLT_MAX).
struct FusedActivation {
  ActivationKind kind = ActivationKind::None;
  float p0 = 0.f, p1 = 0.f;
};
// From the "activation" / "activation_params" attributes; nullopt for an unknown name.
std::optional<FusedActivation> parse_fused_activation(std::string_view name, std::span<const float> params);
// The node's fused activation (its "activation" / "activation_params"); nullopt when unknown.
std::optional<FusedActivation> fused_activation_of(const KernelContext& ctx);

// y = act(x) for one element, in T's precision with the standard library's functions: what a
// kernel without its own vector form applies (the SIMD and oneDNN epilogues have their own
// forms of the same kinds; the reference engine runs the unfused op kernels).
template <typename T>
T apply_activation(const FusedActivation& a, T x) {
  switch (a.kind) {
    case ActivationKind::None:
      return x;
    case ActivationKind::Relu:
      return x < T(0) ? T(0) : x;
    case ActivationKind::LeakyRelu:
      return x < T(0) ? x * static_cast<T>(a.p0) : x;
    case ActivationKind::Sigmoid:
      return T(1) / (T(1) + std::exp(-x));
    case ActivationKind::Tanh:
      return std::tanh(x);
    case ActivationKind::HardSigmoid: {
      const T v = static_cast<T>(a.p0) * x + static_cast<T>(a.p1);
      return v < T(0) ? T(0) : (v > T(1) ? T(1) : v);
    }
    case ActivationKind::HardSwish: {
      const T v = x / T(6) + T(0.5);
      return x * (v < T(0) ? T(0) : (v > T(1) ? T(1) : v));
    }
    case ActivationKind::Clip: {
      const T lo = static_cast<T>(a.p0), hi = static_cast<T>(a.p1);
      return x < lo ? lo : (x > hi ? hi : x);
    }
    case ActivationKind::Silu:
      return x / (T(1) + std::exp(-x));
    case ActivationKind::Gelu:
      return T(0.5) * x * (T(1) + std::erf(x * static_cast<T>(0.7071067811865476)));
    case ActivationKind::GeluTanh: {
      const T k = static_cast<T>(0.7978845608028654);  // sqrt(2 / pi)
      return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
    }
  }
  return x;
}
// y[i] = act(y[i]) over a span.
template <typename T>
void apply_activation(const FusedActivation& a, T* y, int64_t n) {
  if (a.kind == ActivationKind::None) return;
  for (int64_t i = 0; i < n; ++i) y[i] = apply_activation(a, y[i]);
}

// Output `output` may be written over input `input` element by element (same size and dtype
// checked by the caller: the memory planner).
struct InPlacePair {
  int input = 0;
  int output = 0;
};

// FLOPs of one execution of the node, from the tensors the kernel read (ctx, after it ran)
// and wrote (outs). Conventions in runtime/op_cost.h.
using CostFn = double (*)(const KernelContext& ctx, const std::vector<RuntimeValue>& outs);

// The gradient definition of an op, filled by the framework layer (src/frontend): the kernel
// layer only keeps the slot. GradientContext is defined there.
struct GradientContext;
using GradientBuilder = Status (*)(GradientContext& ctx);

struct OpDescriptor {
  std::string_view domain;  // "" is ai.onnx
  std::string_view op_type;
  OpKind kind = OpKind::Other;
  std::vector<InPlacePair> in_place;
  TransposeRule transpose = TransposeRule::None;
  ActivationKind activation = ActivationKind::None;  // when a fusion may absorb it into its producer
  bool may_omit_outputs = false;                     // may leave a tensor output empty (Optional, If/Loop branches)
  // Every engine's kernel returns input 0's buffer as output 0 (Reshape, Squeeze, Identity):
  // the memory planner gives the output no buffer of its own.
  bool output_views_input0 = false;
  // The input whose buffer the kernel writes output 0 over when the node reads it for the last
  // time (KernelContext::may_overwrite_input), or -1: cpu.dnnl's channels-last and blocked
  // convolutions add the residual Z where it lies. Unlike in_place (which says what an output
  // may overwrite), this is what the kernel does, and the planner plans for it as executed.
  int kernel_overwrites_input = -1;
  // Typically input preprocessing rather than the network (resizing, casting, layout changes):
  // the profile advisor suggests moving them out of the model when they take much of a run.
  bool preprocessing = false;
  // For the mixed-precision modes: by kind (Contraction white; Normalization, Reduction,
  // Recurrent black; the rest gray), with the exceptions the table names.
  PrecisionClass precision = PrecisionClass::Gray;
  CostFn flops = nullptr;
  // Bytes moved (read and written) by one execution, where the op knows better than the sizes
  // of its tensors (a plugin's cost); null or a negative answer: those sizes (runtime/op_cost.h).
  CostFn bytes = nullptr;
  // The registered gradient, or null (register_gradient).
  GradientBuilder gradient() const;
};

// The descriptor of (domain, op_type); nullptr when the table has none (a plugin's op).
const OpDescriptor* find_op_descriptor(std::string_view domain, std::string_view op_type);
// The descriptor, or a neutral one (Other, nothing in place, one FLOP per output element)
// for an op the table does not know.
const OpDescriptor& op_descriptor(std::string_view domain, std::string_view op_type);
// For a qualified op type as profiles print it ("Conv", "com.gearbox.FusedConv").
const OpDescriptor& op_descriptor_qualified(std::string_view qualified_op);
// Every entry of the table.
std::span<const OpDescriptor> all_op_descriptors();

// Adds the descriptor of an op registered at run time (a plugin's, kernels/plugin_ops.h),
// found by find_op_descriptor from then on. Its domain and op_type must outlive the process.
// INVALID_ARGUMENT when the table (or an earlier add) already describes (domain, op_type).
Status add_op_descriptor(OpDescriptor d);

// Sets the gradient of (domain, op_type): OP_UNSUPPORTED when the table has no such op.
Status register_gradient(std::string_view domain, std::string_view op_type, GradientBuilder builder);

}  // namespace gearbox
