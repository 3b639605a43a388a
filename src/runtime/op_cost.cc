// FLOP and byte counts per node execution. See op_cost.h for the conventions.
#include "runtime/op_cost.h"

#include <algorithm>
#include <array>

namespace gearbox {
namespace {

uint64_t value_bytes(const RuntimeValue& v) {
  if (v.is_tensor()) return v.tensor().nbytes();
  uint64_t n = 0;
  if (v.is_sequence())
    for (const Tensor& t : v.sequence().tensors) n += t.nbytes();
  return n;
}

// Product of dims [from, rank).
double tail_product(const Tensor& t, size_t from) {
  double p = 1;
  for (size_t i = from; i < t.rank(); ++i) p *= static_cast<double>(t.dim(i));
  return p;
}

}  // namespace

OpKind op_kind(std::string_view op) {
  if (size_t dot = op.rfind('.'); dot != std::string_view::npos) op = op.substr(dot + 1);  // drop the domain
  // NhwcConv and Nchw16cConv (the layout passes' channels-last and blocked FusedConv) keep
  // OIHW weights, and the output's element count does not depend on its layout, so they count
  // like Conv.
  if (op == "Conv" || op == "ConvInteger" || op == "FusedConv" || op == "NhwcConv" || op == "Nchw16cConv" ||
      op == "QLinearConv")
    return OpKind::Conv;
  if (op == "ConvTranspose") return OpKind::ConvTranspose;
  if (op == "MatMul" || op == "MatMulInteger" || op == "FusedMatMul" || op == "QLinearMatMul") return OpKind::MatMul;
  if (op == "Gemm" || op == "FusedGemm") return OpKind::Gemm;
  static constexpr std::array<std::string_view, 34> kDataMovement = {
      "Reshape",  "Flatten",       "Squeeze",         "Unsqueeze", "Transpose",       "Concat",       "Split",
      "Slice",    "Gather",        "GatherElements",  "GatherND",  "Identity",        "Shape",        "Size",
      "Cast",     "CastLike",      "Expand",          "Tile",      "Pad",             "Constant",     "ConstantOfShape",
      "Range",    "DepthToSpace",  "SpaceToDepth",    "ScatterND", "ScatterElements", "NonZero",      "OneHot",
      "Where",    "SplitToSequence", "ConcatFromSequence", "SequenceAt", "SequenceConstruct", "Compress"};
  if (std::find(kDataMovement.begin(), kDataMovement.end(), op) != kDataMovement.end()) return OpKind::DataMovement;
  return OpKind::Other;
}

OpCost op_cost(const KernelContext& ctx, const std::vector<RuntimeValue>& outs) {
  OpCost c;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) c.bytes_read += value_bytes(ctx.input_value(i));
  for (const RuntimeValue& v : outs) c.bytes_written += value_bytes(v);
  if (outs.empty() || !outs[0].is_tensor()) return c;
  const double out_elems = static_cast<double>(outs[0].tensor().numel());
  const std::string_view op = ctx.op().op_type;
  auto tensor_in = [&](size_t i) -> const Tensor* {
    return ctx.has_input(i) && ctx.input_value(i).is_tensor() ? &ctx.input(i) : nullptr;
  };
  switch (op_kind(op)) {
    case OpKind::Conv: {
      const Tensor* w = tensor_in(op == "QLinearConv" ? 3 : 1);
      if (w && w->rank() >= 2) c.flops = 2.0 * out_elems * tail_product(*w, 1);
      break;
    }
    case OpKind::ConvTranspose: {
      const Tensor* x = tensor_in(0);
      const Tensor* w = tensor_in(1);
      if (x && w && w->rank() >= 2) c.flops = 2.0 * static_cast<double>(x->numel()) * tail_product(*w, 1);
      break;
    }
    case OpKind::MatMul: {
      const Tensor* a = tensor_in(0);
      if (a && a->rank() >= 1) c.flops = 2.0 * out_elems * static_cast<double>(a->dim(a->rank() - 1));
      break;
    }
    case OpKind::Gemm: {
      const Tensor* a = tensor_in(0);
      const bool trans_a = ctx.attr_int("transA", 0) != 0;
      if (a && a->rank() == 2) c.flops = 2.0 * out_elems * static_cast<double>(trans_a ? a->dim(0) : a->dim(1));
      break;
    }
    case OpKind::DataMovement:
      break;
    case OpKind::Other:
      c.flops = out_elems;
      break;
  }
  return c;
}

}  // namespace gearbox
