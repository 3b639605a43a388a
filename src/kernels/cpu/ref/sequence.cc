// Sequence and optional operators (reference): SequenceEmpty, SequenceConstruct,
// SequenceInsert, SequenceAt, SequenceErase, SequenceLength, SplitToSequence,
// ConcatFromSequence (opset 11+), Optional, OptionalHasElement, OptionalGetElement (15+).
//
// Sequences are RuntimeValue/TensorSequence values; an empty optional is a "none" value.
// Sequence elements share buffers with their sources (tensors are never written in place).
#include <cstring>

#include "kernels/cpu/ref/ref_util.h"
#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

Result<const TensorSequence*> seq_input(const KernelContext& ctx, size_t i) {
  if (!ctx.has_input(i) || !ctx.input_value(i).is_sequence())
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "input ", i, " must be a sequence");
  return &ctx.input_value(i).sequence();
}

// Reads an optional scalar position input; `def` when absent. Checks [lo, hi] and wraps
// negatives by n.
Result<int64_t> position(const KernelContext& ctx, size_t i, int64_t n, int64_t def, int64_t lo, int64_t hi) {
  if (!ctx.has_input(i)) return def;
  GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& t = ctx.input(i);
  if (!is_integer(t.dtype()) || t.numel() != 1)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "position must be an integer scalar, got ", describe(t));
  int64_t p = static_cast<int64_t>(t.at_double(0));
  if (p < lo || p > hi)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "position ", p, " is out of range [", lo, ", ", hi,
                     "] for a sequence of length ", n);
  return p < 0 ? p + n : p;
}

Status sequence_empty(KernelContext& ctx) {
  TensorSequence s;
  int64_t dt = ctx.attr_int("dtype", static_cast<int64_t>(DType::F32));
  if (!dtype_is_known(static_cast<int32_t>(dt)))
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "dtype ", dt, " is not a known element type");
  s.elem_dtype = static_cast<DType>(dt);
  ctx.set_output_value(0, RuntimeValue(std::move(s)));
  return Status::OK();
}

Status sequence_construct(KernelContext& ctx) {
  TensorSequence s;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
    const Tensor& t = ctx.input(i);
    if (i > 0 && t.dtype() != s.elem_dtype)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "input ", i, " is ", describe(t), " but input 0 is ",
                       dtype_name(s.elem_dtype));
    s.elem_dtype = t.dtype();
    s.tensors.push_back(t);
  }
  ctx.set_output_value(0, RuntimeValue(std::move(s)));
  return Status::OK();
}

Status sequence_insert(KernelContext& ctx) {
  GBX_ASSIGN_OR_RETURN(const TensorSequence* in, seq_input(ctx, 0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& t = ctx.input(1);
  if (in->elem_dtype != DType::Undefined && t.dtype() != in->elem_dtype && !in->tensors.empty())
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "tensor ", describe(t), " does not match the sequence's dtype ",
                     dtype_name(in->elem_dtype));
  const int64_t n = static_cast<int64_t>(in->tensors.size());
  GBX_ASSIGN_OR_RETURN(int64_t p, position(ctx, 2, n, n, -n, n));
  TensorSequence s = *in;
  s.elem_dtype = t.dtype();
  s.tensors.insert(s.tensors.begin() + p, t);
  ctx.set_output_value(0, RuntimeValue(std::move(s)));
  return Status::OK();
}

Status sequence_at(KernelContext& ctx) {
  GBX_ASSIGN_OR_RETURN(const TensorSequence* in, seq_input(ctx, 0));
  const int64_t n = static_cast<int64_t>(in->tensors.size());
  if (!ctx.has_input(1)) return ctx.error(ErrorCode::INVALID_ARGUMENT, "position is required");
  GBX_ASSIGN_OR_RETURN(int64_t p, position(ctx, 1, n, 0, -n, n - 1));
  ctx.set_output(0, in->tensors[static_cast<size_t>(p)]);
  return Status::OK();
}

Status sequence_erase(KernelContext& ctx) {
  GBX_ASSIGN_OR_RETURN(const TensorSequence* in, seq_input(ctx, 0));
  const int64_t n = static_cast<int64_t>(in->tensors.size());
  if (n == 0) return ctx.error(ErrorCode::INVALID_ARGUMENT, "cannot erase from an empty sequence");
  GBX_ASSIGN_OR_RETURN(int64_t p, position(ctx, 1, n, n - 1, -n, n - 1));
  TensorSequence s = *in;
  s.tensors.erase(s.tensors.begin() + p);
  ctx.set_output_value(0, RuntimeValue(std::move(s)));
  return Status::OK();
}

Status sequence_length(KernelContext& ctx) {
  GBX_ASSIGN_OR_RETURN(const TensorSequence* in, seq_input(ctx, 0));
  ctx.set_output(0, Tensor::scalar<int64_t>(static_cast<int64_t>(in->tensors.size())));
  return Status::OK();
}

Status split_to_sequence(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.error(ErrorCode::SHAPE_MISMATCH, "input must have rank >= 1, got ", describe(x));
  GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.attr_int("axis", 0), rank));
  const int64_t len = x.dim(static_cast<size_t>(axis));
  std::vector<int64_t> lens;
  bool squeeze = false;
  if (!ctx.has_input(1)) {
    lens.assign(static_cast<size_t>(len), 1);
    squeeze = ctx.attr_int("keepdims", 1) == 0;
  } else {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
    const Tensor& sp = ctx.input(1);
    GBX_ASSIGN_OR_RETURN(std::vector<int64_t> v, read_ints(ctx, sp));
    if (sp.rank() == 0) {
      if (v[0] <= 0) return ctx.error(ErrorCode::INVALID_ARGUMENT, "split size ", v[0], " must be positive");
      for (int64_t s = 0; s < len; s += v[0]) lens.push_back(std::min(v[0], len - s));
    } else {
      int64_t sum = 0;
      for (int64_t l : v) {
        if (l < 0) return ctx.error(ErrorCode::INVALID_ARGUMENT, "split length ", l, " is negative");
        sum += l;
      }
      if (sum != len)
        return ctx.error(ErrorCode::SHAPE_MISMATCH, "split lengths sum to ", sum, " but axis ", axis, " of ",
                         describe(x), " has ", len);
      lens = v;
    }
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) outer *= x.dim(static_cast<size_t>(d));
    if (d > axis) inner *= x.dim(static_cast<size_t>(d));
  }
  TensorSequence s;
  s.elem_dtype = x.dtype();
  int64_t start = 0;
  for (int64_t l : lens) {
    Dims d = x.dims();
    d[static_cast<size_t>(axis)] = l;
    GBX_ASSIGN_OR_RETURN(Tensor part, Tensor::allocate(x.dtype(), d));
    const ElemCopier copy(x, part);
    for (int64_t o = 0; o < outer; ++o) copy.run((o * len + start) * inner, o * l * inner, l * inner);
    if (squeeze) {
      d.erase(d.begin() + axis);
      part = part.reshaped(d);
    }
    s.tensors.push_back(std::move(part));
    start += l;
  }
  ctx.set_output_value(0, RuntimeValue(std::move(s)));
  return Status::OK();
}

Status concat_from_sequence(KernelContext& ctx) {
  GBX_ASSIGN_OR_RETURN(const TensorSequence* in, seq_input(ctx, 0));
  if (in->tensors.empty()) return ctx.error(ErrorCode::INVALID_ARGUMENT, "cannot concatenate an empty sequence");
  const bool new_axis = ctx.attr_int("new_axis", 0) != 0;
  const Tensor& f = in->tensors.front();
  const int64_t rank = static_cast<int64_t>(f.rank()) + (new_axis ? 1 : 0);
  if (rank == 0) return ctx.error(ErrorCode::SHAPE_MISMATCH, "cannot concatenate scalars without new_axis");
  if (!ctx.has_attr("axis")) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "attribute axis is required");
  GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.attr_int("axis", 0), rank));
  // View every element with the concat axis present (size 1 when stacking).
  std::vector<Tensor> parts;
  int64_t total = 0;
  for (const Tensor& t : in->tensors) {
    Dims d = t.dims();
    if (new_axis) d.insert(d.begin() + axis, 1);
    Dims ref = f.dims();
    if (new_axis) ref.insert(ref.begin() + axis, 1);
    if (d.size() != ref.size())
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "sequence elements ", describe(f), " and ", describe(t),
                       " have different ranks");
    for (size_t k = 0; k < d.size(); ++k)
      if (static_cast<int64_t>(k) != axis && d[k] != ref[k])
        return ctx.error(ErrorCode::SHAPE_MISMATCH, "sequence elements ", describe(f), " and ", describe(t),
                         " differ outside axis ", axis);
    if (t.dtype() != f.dtype())
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "sequence elements have dtypes ", dtype_name(f.dtype()), " and ",
                       dtype_name(t.dtype()));
    total += d[static_cast<size_t>(axis)];
    parts.push_back(t.reshaped(d));
  }
  Dims out = parts.front().dims();
  out[static_cast<size_t>(axis)] = total;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) outer *= out[static_cast<size_t>(d)];
    if (d > axis) inner *= out[static_cast<size_t>(d)];
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(f.dtype(), out));
  int64_t off = 0;
  for (const Tensor& p : parts) {
    const int64_t l = p.dim(static_cast<size_t>(axis));
    const ElemCopier copy(p, y);
    for (int64_t o = 0; o < outer; ++o) copy.run(o * l * inner, (o * total + off) * inner, l * inner);
    off += l;
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// Optional(input?): wraps the input, or makes an empty optional.
Status optional_op(KernelContext& ctx) {
  ctx.set_output_value(0, ctx.has_input(0) ? ctx.input_value(0) : RuntimeValue());
  return Status::OK();
}

Status optional_has_element(KernelContext& ctx) {
  ctx.set_output(0, Tensor::scalar<bool>(ctx.has_input(0)));
  return Status::OK();
}

Status optional_get_element(KernelContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error(ErrorCode::INVALID_ARGUMENT, "the optional input is empty");
  ctx.set_output_value(0, ctx.input_value(0));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "SequenceEmpty", 11, 18, kEngineRef, {}, sequence_empty});
GBX_REGISTER_KERNEL({"", "SequenceConstruct", 11, 18, kEngineRef, {}, sequence_construct});
GBX_REGISTER_KERNEL({"", "SequenceInsert", 11, 18, kEngineRef, {}, sequence_insert});
GBX_REGISTER_KERNEL({"", "SequenceAt", 11, 18, kEngineRef, {}, sequence_at});
GBX_REGISTER_KERNEL({"", "SequenceErase", 11, 18, kEngineRef, {}, sequence_erase});
GBX_REGISTER_KERNEL({"", "SequenceLength", 11, 18, kEngineRef, {}, sequence_length});
GBX_REGISTER_KERNEL({"", "SplitToSequence", 11, 18, kEngineRef, {}, split_to_sequence});
GBX_REGISTER_KERNEL({"", "ConcatFromSequence", 11, 18, kEngineRef, {}, concat_from_sequence});
GBX_REGISTER_KERNEL({"", "Optional", 15, 18, kEngineRef, {}, optional_op});
GBX_REGISTER_KERNEL({"", "OptionalHasElement", 15, 18, kEngineRef, {}, optional_has_element});
GBX_REGISTER_KERNEL({"", "OptionalGetElement", 15, 18, kEngineRef, {}, optional_get_element});

}  // namespace
}  // namespace gearbox::ref
