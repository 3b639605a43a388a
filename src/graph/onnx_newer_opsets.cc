// The checking copy for models past libonnx's opsets, and gearbox's schemas of the ai.onnx
// ops that changed or appeared at opsets 18 to 21 (the forms torch exporters write). Each schema
// says what the ONNX operator documentation of that version says of its inputs, outputs,
// attributes and types; where the change is an added input or attribute, it is libonnx's
// previous schema with that addition (same types, same descriptions).
#include "graph/onnx_newer_opsets.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>

namespace gearbox {
namespace {

using onnx::AttributeProto;
using onnx::OpSchema;

// The shadow domain the newer schemas live in (for libonnx only: the model keeps ai.onnx),
// and the unregistered domain of ops no schema knows.
constexpr const char* kShadowDomain = "ai.onnx.gearbox_newer";
constexpr const char* kUnknownDomain = "ai.onnx.gearbox_unknown";
// The newest ai.onnx opset the shadow schemas cover.
constexpr int kShadowMaxOpset = 21;

// Output `o` gets input 0's element type and rank (dims unknown): for the ops whose output
// dims depend on input values gearbox reads at run time (Pad's pads, Split's sizes).
void type_and_rank_of_input0(onnx::InferenceContext& ctx) {
  for (size_t o = 0; o < ctx.getNumOutputs(); ++o) {
    onnx::propagateElemTypeFromInputToOutput(ctx, 0, o);
    if (!onnx::hasInputShape(ctx, 0)) continue;
    auto* shape = ctx.getOutputType(o)->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (int d = 0; d < ctx.getInputType(0)->tensor_type().shape().dim_size(); ++d) shape->add_dim();
  }
}

void broadcast_binary(onnx::InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (onnx::hasNInputShapes(ctx, 2))
    onnx::bidirectionalBroadcastShapeInference(ctx.getInputType(0)->tensor_type().shape(),
                                               ctx.getInputType(1)->tensor_type().shape(),
                                               *ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape());
}

// A schema `name`-`since` in the shadow domain with `base`'s inputs, outputs, attributes and
// inference function, and the type constraints of `types` (the op's own previous schema,
// when `base` is another op's: Reduce*-18 take ReduceSum-13's axes input).
OpSchema derive(const OpSchema& base, const OpSchema& types, const std::string& name, int since) {
  OpSchema s(name, __FILE__, __LINE__);
  s.SetDomain(kShadowDomain).SinceVersion(since);
  int i = 0;
  for (const auto& p : base.inputs())
    s.Input(i++, p.GetName(), p.GetDescription(), p.GetTypeStr(), p.GetOption(), p.GetIsHomogeneous(), p.GetMinArity());
  i = 0;
  for (const auto& p : base.outputs())
    s.Output(i++, p.GetName(), p.GetDescription(), p.GetTypeStr(), p.GetOption(), p.GetIsHomogeneous(),
             p.GetMinArity());
  for (const auto& [attr_name, attr] : base.attributes()) s.Attr(attr);
  for (const auto& tc : types.typeConstraintParams())
    s.TypeConstraint(tc.type_param_str, tc.allowed_type_strs, tc.description);
  s.TypeAndShapeInferenceFunction(base.GetTypeAndShapeInferenceFunction());
  return s;
}

const OpSchema& libonnx_schema(const char* op, int opset) {
  const OpSchema* s = onnx::OpSchemaRegistry::Schema(op, opset, "");
  if (!s) throw std::logic_error(std::string("libonnx has no schema of ") + op);  // caught in register_all
  return *s;
}

void add(OpSchema s) { onnx::OpSchemaRegistry::OpSchemaRegisterOnce once(s); }

std::vector<std::string> integer_tensor_types() {
  return {"tensor(uint8)", "tensor(uint16)", "tensor(uint32)", "tensor(uint64)",
          "tensor(int8)",  "tensor(int16)",  "tensor(int32)",  "tensor(int64)"};
}

void register_opset18() {
  // Reduce*: axes moved from the attribute into an optional second input, with
  // noop_with_empty_axes, exactly as ReduceSum did at 13.
  const OpSchema& reduce_sum13 = libonnx_schema("ReduceSum", 13);
  for (const char* op : {"ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                         "ReduceLogSumExp", "ReduceSumSquare", "ReduceMean"})
    add(derive(reduce_sum13, libonnx_schema(op, 17), op, 18));

  // Split: num_outputs, an alternative to the split input (uneven: the last chunk smaller).
  const OpSchema& split13 = libonnx_schema("Split", 17);
  add(derive(split13, split13, "Split", 18)
          .Attr("num_outputs", "Number of outputs to split parts of the tensor into.", AttributeProto::INT, false)
          .TypeAndShapeInferenceFunction(type_and_rank_of_input0));

  // Pad: optional axes input (pads then has 2 * len(axes) values).
  const OpSchema& pad13 = libonnx_schema("Pad", 17);
  add(derive(pad13, pad13, "Pad", 18)
          .Input(3, "axes", "1-D tensor of axes that pads apply to.", "Tind", OpSchema::Optional)
          .TypeConstraint("Tind", {"tensor(int32)", "tensor(int64)"}, "Constrain axes to integer tensors.")
          .TypeAndShapeInferenceFunction(type_and_rank_of_input0));

  // Resize: antialias, axes, keep_aspect_ratio_policy.
  const OpSchema& resize13 = libonnx_schema("Resize", 17);
  add(derive(resize13, resize13, "Resize", 18)
          .Attr("antialias", "Antialiasing filter when downsampling.", AttributeProto::INT, static_cast<int64_t>(0))
          .Attr("axes", "Axes that roi, scales and sizes refer to.", AttributeProto::INTS, false)
          .Attr("keep_aspect_ratio_policy", "stretch, not_larger or not_smaller.", AttributeProto::STRING,
                std::string("stretch"))
          .TypeAndShapeInferenceFunction(type_and_rank_of_input0));

  // ScatterND / ScatterElements: reduction gains max and min (a string: same schema).
  for (const char* op : {"ScatterND", "ScatterElements"}) {
    const OpSchema& prev = libonnx_schema(op, 17);
    add(derive(prev, prev, op, 18));
  }

  // LpPool: ceil_mode and dilations.
  const OpSchema& lp11 = libonnx_schema("LpPool", 17);
  add(derive(lp11, lp11, "LpPool", 18)
          .Attr("ceil_mode", "Whether to use ceil or floor to compute the output shape.", AttributeProto::INT,
                static_cast<int64_t>(0))
          .Attr("dilations", "Dilation value along each spatial axis.", AttributeProto::INTS, false)
          .TypeAndShapeInferenceFunction(type_and_rank_of_input0));

  // Bitwise And / Or / Xor / Not: new ops on integer tensors.
  for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"}) {
    OpSchema s(op, __FILE__, __LINE__);
    s.SetDomain(kShadowDomain)
        .SinceVersion(18)
        .Input(0, "A", "First input operand.", "T")
        .Input(1, "B", "Second input operand.", "T")
        .Output(0, "C", "Result, broadcast.", "T")
        .TypeConstraint("T", integer_tensor_types(), "Constrain input to integer tensors.")
        .TypeAndShapeInferenceFunction(broadcast_binary);
    add(std::move(s));
  }
  {
    OpSchema s("BitwiseNot", __FILE__, __LINE__);
    s.SetDomain(kShadowDomain)
        .SinceVersion(18)
        .Input(0, "X", "Input tensor.", "T")
        .Output(0, "Y", "Output tensor.", "T")
        .TypeConstraint("T", integer_tensor_types(), "Constrain input to integer tensors.")
        .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
    add(std::move(s));
  }
  {
    OpSchema s("Mish", __FILE__, __LINE__);
    s.SetDomain(kShadowDomain)
        .SinceVersion(18)
        .Input(0, "X", "Input tensor.", "T")
        .Output(0, "Y", "Output tensor.", "T")
        .TypeConstraint("T", {"tensor(float16)", "tensor(float)", "tensor(double)"},
                        "Constrain input X and output types to float tensors.")
        .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
    add(std::move(s));
  }

  // GroupNormalization (scale and bias per group; per channel from 21, below).
  for (int since : {18, 21}) {
    OpSchema s("GroupNormalization", __FILE__, __LINE__);
    s.SetDomain(kShadowDomain)
        .SinceVersion(since)
        .Attr("epsilon", "The epsilon value to use to avoid division by zero.", AttributeProto::FLOAT, 1e-5f)
        .Attr("num_groups", "The number of groups of channels.", AttributeProto::INT, true)
        .Input(0, "X", "Input data, [N, C, D1, ...].", "T")
        .Input(1, "scale", since >= 21 ? "Scale, one per channel." : "Scale, one per group.", "T")
        .Input(2, "bias", since >= 21 ? "Bias, one per channel." : "Bias, one per group.", "T")
        .Output(0, "Y", "The normalized data, X's shape.", "T")
        .TypeConstraint("T", {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)"},
                        "Constrain input and output types to float tensors.")
        .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
    if (since >= 21)
      s.Attr("stash_type", "The type of the statistics (1: float32).", AttributeProto::INT, static_cast<int64_t>(1));
    add(std::move(s));
  }

  // Col2Im: rearranges sliding blocks back into an image.
  {
    OpSchema s("Col2Im", __FILE__, __LINE__);
    s.SetDomain(kShadowDomain)
        .SinceVersion(18)
        .Attr("dilations", "Dilation value along each spatial axis.", AttributeProto::INTS, false)
        .Attr("pads", "Padding at the beginning and end of each spatial axis.", AttributeProto::INTS, false)
        .Attr("strides", "Stride along each spatial axis.", AttributeProto::INTS, false)
        .Input(0, "input", "The blocks, [N, C * prod(block_shape), L].", "T")
        .Input(1, "image_shape", "The image's spatial shape.", "tensor(int64)")
        .Input(2, "block_shape", "The block's spatial shape.", "tensor(int64)")
        .Output(0, "output", "The image, [N, C, image_shape...].", "T")
        .TypeConstraint("T", OpSchema::all_tensor_types_with_bfloat(), "Constrain input and output types.")
        .TypeAndShapeInferenceFunction(
            [](onnx::InferenceContext& ctx) { onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0); });
    add(std::move(s));
  }

  // CenterCropPad: crops or pads each named axis to a size around its centre.
  {
    OpSchema s("CenterCropPad", __FILE__, __LINE__);
    s.SetDomain(kShadowDomain)
        .SinceVersion(18)
        .Attr("axes", "The axes that shape names (default: all).", AttributeProto::INTS, false)
        .Input(0, "input_data", "Input to extract the centered crop from.", "T")
        .Input(1, "shape", "The size of each cropped or padded axis.", "Tind")
        .Output(0, "output_data", "The centered crop or padding of the input.", "T")
        .TypeConstraint("T", OpSchema::all_tensor_types_with_bfloat(), "Constrain input and output types.")
        .TypeConstraint("Tind", {"tensor(int32)", "tensor(int64)"}, "Constrain indices to integer types.")
        .TypeAndShapeInferenceFunction(type_and_rank_of_input0);
    add(std::move(s));
  }

  // OptionalHasElement / OptionalGetElement: also take a plain tensor or sequence (and
  // OptionalHasElement an omitted input).
  std::vector<std::string> any_value = OpSchema::all_optional_types();
  for (const auto& t : OpSchema::all_tensor_types()) any_value.push_back(t);
  for (const auto& t : OpSchema::all_tensor_sequence_types()) any_value.push_back(t);
  std::vector<std::string> plain = OpSchema::all_tensor_types();
  for (const auto& t : OpSchema::all_tensor_sequence_types()) plain.push_back(t);
  {
    OpSchema s("OptionalHasElement", __FILE__, __LINE__);
    s.SetDomain(kShadowDomain)
        .SinceVersion(18)
        .Input(0, "input", "The optional input.", "O", OpSchema::Optional)
        .Output(0, "output", "A scalar boolean tensor.", "B")
        .TypeConstraint("O", any_value, "Optional, tensor or sequence types.")
        .TypeConstraint("B", {"tensor(bool)"}, "Constrain output to a boolean tensor.")
        .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
          auto* out = ctx.getOutputType(0)->mutable_tensor_type();
          out->set_elem_type(onnx::TensorProto::BOOL);
          out->mutable_shape()->clear_dim();
        });
    add(std::move(s));
  }
  {
    OpSchema s("OptionalGetElement", __FILE__, __LINE__);
    s.SetDomain(kShadowDomain)
        .SinceVersion(18)
        .Input(0, "input", "The optional input.", "O")
        .Output(0, "output", "The element of the optional, or the input itself.", "V")
        .TypeConstraint("O", any_value, "Optional, tensor or sequence types.")
        .TypeConstraint("V", plain, "Tensor or sequence types.");
    add(std::move(s));
  }
}

// Opsets 19 to 21: the changes that add an attribute, an input or an op. The others widen
// type lists to float8 and int4 (gearbox has no kernels for those types; libonnx's opset-17
// schema refuses them with the checker's message) or change an attribute's values within the
// same schema (Pad-19's wrap mode, Resize-19's half_pixel_symmetric, GridSample-20's mode names:
// the kernels serve those opsets only where they implement the new values, kernel.cc).
void register_opsets19_to_21() {
  // AveragePool-19: dilations. MaxPool's inference, which already reads them, sizes the output.
  const OpSchema& avg11 = libonnx_schema("AveragePool", 17);
  add(derive(avg11, avg11, "AveragePool", 19)
          .Attr("dilations", "Dilation value along each spatial axis of the filter.", AttributeProto::INTS, false)
          .TypeAndShapeInferenceFunction(libonnx_schema("MaxPool", 17).GetTypeAndShapeInferenceFunction()));

  // Cast / CastLike-19 and QuantizeLinear-19: saturate (float8 targets only).
  for (const char* op : {"Cast", "CastLike", "QuantizeLinear"}) {
    const OpSchema& prev = libonnx_schema(op, 17);
    add(derive(prev, prev, op, 19)
            .Attr("saturate", "Saturate float8 conversions to the type's range.", AttributeProto::INT,
                  static_cast<int64_t>(1)));
  }

  // Quantize/DequantizeLinear-21: blocked quantization along `axis` (block_size), and
  // QuantizeLinear's output type without a zero point (output_dtype).
  const OpSchema& q13 = libonnx_schema("QuantizeLinear", 17);
  add(derive(q13, q13, "QuantizeLinear", 21)
          .Attr("saturate", "Saturate float8 conversions to the type's range.", AttributeProto::INT,
                static_cast<int64_t>(1))
          .Attr("block_size", "Size of the quantization blocks along axis (0: per-tensor or per-axis).",
                AttributeProto::INT, static_cast<int64_t>(0))
          .Attr("output_dtype", "Output type when y_zero_point is absent (0: uint8).", AttributeProto::INT,
                static_cast<int64_t>(0))
          .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
            const auto* dtype = ctx.getAttribute("output_dtype");
            auto* out = ctx.getOutputType(0)->mutable_tensor_type();
            if (ctx.getNumInputs() > 2 && ctx.getInputType(2)) onnx::propagateElemTypeFromInputToOutput(ctx, 2, 0);
            else
              out->set_elem_type(dtype && dtype->i() != 0 ? static_cast<int32_t>(dtype->i())
                                                          : static_cast<int32_t>(onnx::TensorProto::UINT8));
            if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
          }));
  const OpSchema& dq13 = libonnx_schema("DequantizeLinear", 17);
  add(derive(dq13, dq13, "DequantizeLinear", 21)
          .Attr("block_size", "Size of the quantization blocks along axis (0: per-tensor or per-axis).",
                AttributeProto::INT, static_cast<int64_t>(0)));

  // DeformConv-19: a convolution sampling at learned offsets.
  {
    OpSchema s("DeformConv", __FILE__, __LINE__);
    s.SetDomain(kShadowDomain)
        .SinceVersion(19)
        .Attr("dilations", "Dilation value along each spatial axis of the kernel.", AttributeProto::INTS, false)
        .Attr("group", "Number of groups of input and output channels.", AttributeProto::INT, static_cast<int64_t>(1))
        .Attr("kernel_shape", "Shape of the convolution kernel.", AttributeProto::INTS, false)
        .Attr("offset_group", "Number of groups of offset.", AttributeProto::INT, static_cast<int64_t>(1))
        .Attr("pads", "Padding at the beginning and end of each spatial axis.", AttributeProto::INTS, false)
        .Attr("strides", "Stride along each spatial axis.", AttributeProto::INTS, false)
        .Input(0, "X", "Input data, [N, C, H, W].", "T")
        .Input(1, "W", "Weights, [M, C / group, kH, kW].", "T")
        .Input(2, "offset", "Offsets, [N, offset_group * 2 * kH * kW, oH, oW].", "T")
        .Input(3, "B", "Bias, [M].", "T", OpSchema::Optional)
        .Input(4, "mask", "Mask, [N, offset_group * kH * kW, oH, oW].", "T", OpSchema::Optional)
        .Output(0, "Y", "Output data, [N, M, oH, oW].", "T")
        .TypeConstraint("T", {"tensor(float16)", "tensor(float)", "tensor(double)"},
                        "Constrain input and output types to float tensors.")
        .TypeAndShapeInferenceFunction(type_and_rank_of_input0);
    add(std::move(s));
  }

  // DFT-20: the axis moves from an attribute into an optional scalar input.
  {
    const OpSchema& dft17 = libonnx_schema("DFT", 17);
    OpSchema s("DFT", __FILE__, __LINE__);
    s.SetDomain(kShadowDomain)
        .SinceVersion(20)
        .Attr("inverse", "Whether to perform the inverse transform.", AttributeProto::INT, static_cast<int64_t>(0))
        .Attr("onesided", "Whether to return only the first half of the frequencies.", AttributeProto::INT,
              static_cast<int64_t>(0))
        .Input(0, "input", "The signal, [batch, ..., 1 or 2].", "T1")
        .Input(1, "dft_length", "The length of the signal as a scalar.", "T2", OpSchema::Optional)
        .Input(2, "axis", "The axis as a scalar (default -2).", "tensor(int64)", OpSchema::Optional)
        .Output(0, "output", "The Fourier transform, [batch, ..., 2].", "T1")
        .TypeAndShapeInferenceFunction(type_and_rank_of_input0);
    for (const auto& tc : dft17.typeConstraintParams())
      s.TypeConstraint(tc.type_param_str, tc.allowed_type_strs, tc.description);
    add(std::move(s));
  }

  // AffineGrid-20: the sampling grid of an affine transform.
  {
    OpSchema s("AffineGrid", __FILE__, __LINE__);
    s.SetDomain(kShadowDomain)
        .SinceVersion(20)
        .Attr("align_corners", "Whether -1 and 1 are the corner pixels' centres.", AttributeProto::INT,
              static_cast<int64_t>(0))
        .Input(0, "theta", "Affine matrices, [N, 2, 3] or [N, 3, 4].", "T1")
        .Input(1, "size", "The target image size, (N, C, H, W) or (N, C, D, H, W).", "T2")
        .Output(0, "grid", "The sampling grid, [N, H, W, 2] or [N, D, H, W, 3].", "T1")
        .TypeConstraint("T1", {"tensor(bfloat16)", "tensor(float16)", "tensor(float)", "tensor(double)"},
                        "Constrain grid types to float tensors.")
        .TypeConstraint("T2", {"tensor(int64)"}, "Constrain size's type to int64 tensors.")
        .TypeAndShapeInferenceFunction(
            [](onnx::InferenceContext& ctx) { onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0); });
    add(std::move(s));
  }

  // Gelu-20: a new op (gearbox's com.gearbox.Gelu, contrib_ops.cc).
  {
    OpSchema s("Gelu", __FILE__, __LINE__);
    s.SetDomain(kShadowDomain)
        .SinceVersion(20)
        .Attr("approximate", "none or tanh.", AttributeProto::STRING, std::string("none"))
        .Input(0, "X", "Input tensor.", "T")
        .Output(0, "Y", "Output tensor.", "T")
        .TypeConstraint("T", {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)"},
                        "Constrain input and output types to float tensors.")
        .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
    add(std::move(s));
  }
}

// Registers the shadow domain and its schemas once per process. A failure (a libonnx without
// the schemas derived from) leaves the op unregistered: its nodes then count as unknown.
void register_all() {
  static std::once_flag once;
  std::call_once(once, [] {
    onnx::OpSchemaRegistry::DomainToVersionRange::Instance().AddDomainToVersion(kShadowDomain, kLibOnnxMaxOpset + 1,
                                                                                kShadowMaxOpset);
    try {
      register_opset18();
      register_opsets19_to_21();
    } catch (const std::exception&) {
    }
  });
}

void rewrite_nodes(onnx::GraphProto& g, int opset, std::vector<std::pair<onnx::NodeProto*, std::string>>& moved,
                   std::vector<std::string>& newer, std::vector<std::string>& unknown) {
  const int checked = std::min(opset, kLibOnnxMaxOpset);
  for (auto& n : *g.mutable_node()) {
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) rewrite_nodes(*a.mutable_g(), opset, moved, newer, unknown);
      for (auto& sg : *a.mutable_graphs()) rewrite_nodes(sg, opset, moved, newer, unknown);
    }
    if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
    const std::string label = (n.name().empty() ? std::string("<unnamed>") : n.name()) + " (" + n.op_type() + ")";
    if (opset > kLibOnnxMaxOpset && onnx::OpSchemaRegistry::Schema(n.op_type(), opset, kShadowDomain)) {
      moved.emplace_back(&n, n.domain());
      n.set_domain(kShadowDomain);
      newer.push_back(label);
      continue;
    }
    if (onnx::OpSchemaRegistry::Schema(n.op_type(), checked, "")) continue;  // judged by libonnx
    // No schema at this opset: an unknown op, one that appeared later, or one deprecated
    // here. A deprecated op keeps the checker's own message (it names the version to use).
    const OpSchema* latest = onnx::OpSchemaRegistry::Schema(n.op_type(), "");
    if (latest && latest->Deprecated() && latest->SinceVersion() <= checked) continue;
    moved.emplace_back(&n, n.domain());
    n.set_domain(kUnknownDomain);
    unknown.push_back(label);
  }
}

}  // namespace

CheckingView::CheckingView(onnx::ModelProto& model, int onnx_opset) : model_(model) {
  register_all();
  imports_before_ = model.opset_import_size();
  rewrite_nodes(*model.mutable_graph(), onnx_opset, moved_, newer_ops_, unknown_ops_);
  ir_version_ = model.ir_version();
  rewritten_ = onnx_opset > kLibOnnxMaxOpset || !moved_.empty() || ir_version_ > kLibOnnxMaxIrVersion;
  if (!rewritten_) return;
  if (ir_version_ > kLibOnnxMaxIrVersion) model.set_ir_version(kLibOnnxMaxIrVersion);
  for (int i = 0; i < model.opset_import_size(); ++i) {
    auto* op = model.mutable_opset_import(i);
    if ((op->domain().empty() || op->domain() == "ai.onnx") && op->version() > kLibOnnxMaxOpset) {
      clamped_.emplace_back(i, op->version());
      op->set_version(kLibOnnxMaxOpset);
    }
  }
  if (!newer_ops_.empty()) {
    auto* op = model.add_opset_import();
    op->set_domain(kShadowDomain);
    op->set_version(onnx_opset);
  }
  if (!unknown_ops_.empty()) {
    auto* op = model.add_opset_import();
    op->set_domain(kUnknownDomain);
    op->set_version(1);
  }
}

CheckingView::~CheckingView() {
  if (rewritten_) model_.set_ir_version(ir_version_);
  for (auto& [node, domain] : moved_) node->set_domain(domain);
  for (auto [index, version] : clamped_) model_.mutable_opset_import(index)->set_version(version);
  while (model_.opset_import_size() > imports_before_) model_.mutable_opset_import()->RemoveLast();
}

}  // namespace gearbox
