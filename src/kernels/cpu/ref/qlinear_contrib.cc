// ONNX Runtime's quantized contrib ops that keep their node (com.microsoft, opset 1), reference:
// QLinearConcat, QLinearAveragePool and QLinearSoftmax. Each dequantizes its inputs
// (x - zero_point) * scale, runs the float reference kernel of the op it quantizes (Concat-13,
// AveragePool-19, Softmax-13 or -11) and quantizes the result with the output's scale and zero
// point (round half to even, saturated): the arithmetic ONNX Runtime's kernels approximate with
// lookup tables, so the two may differ by one quantization step. (The quantized element-wise ops
// are rewritten at import instead: graph/contrib_ops.cc.)
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

bool is_quantized(DType t) { return t == DType::U8 || t == DType::I8; }

// One scalar of a scale (float) or zero-point (the data's 8-bit type; absent: 0) input.
Result<double> scalar_input(KernelContext& ctx, size_t i, const char* what, DType zero_point_of = DType::Undefined) {
  if (!ctx.has_input(i)) {
    if (zero_point_of != DType::Undefined) return 0.0;
    return ctx.error(ErrorCode::INVALID_ARGUMENT, what, " (input ", i, ") is required");
  }
  GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& t = ctx.input(i);
  const bool ok =
      t.numel() == 1 && (zero_point_of == DType::Undefined ? t.dtype() == DType::F32 : t.dtype() == zero_point_of);
  if (!ok)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, what, " (input ", i, ") must be one ",
                     zero_point_of == DType::Undefined ? "float32" : dtype_name(zero_point_of),
                     " value (per-tensor), got ", describe(t));
  const double v = read_doubles(t)[0];
  if (zero_point_of == DType::Undefined && !(v > 0 && std::isfinite(v)))
    return ctx.error(ErrorCode::INVALID_ARGUMENT, what, " (input ", i, ") is ", v, "; a scale must be positive");
  return v;
}

// x dequantized to float32 with the scale and zero point in inputs s and z.
Result<Tensor> dequantized(KernelContext& ctx, size_t x, size_t s, size_t z) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(x));
  const Tensor& q = ctx.input(x);
  if (!is_quantized(q.dtype())) return ctx.unsupported_dtype(q.dtype());
  GBX_ASSIGN_OR_RETURN(double scale, scalar_input(ctx, s, "scale"));
  GBX_ASSIGN_OR_RETURN(double zero, scalar_input(ctx, z, "zero point", q.dtype()));
  std::vector<double> v = read_doubles(q);
  for (double& e : v) e = (e - zero) * scale;
  GBX_ASSIGN_OR_RETURN(Tensor f, Tensor::allocate(DType::F32, q.dims()));
  store_doubles(f, v);
  return f;
}

// Runs the float reference kernel `op` on `inputs` and quantizes its output into `dt` with the
// scale and zero point in inputs s and z.
Status run_quantized(KernelContext& ctx, std::string_view op, int opset, const AttributeMap& attrs,
                     const std::vector<Tensor>& inputs, size_t s, size_t z, DType dt) {
  GBX_ASSIGN_OR_RETURN(double scale, scalar_input(ctx, s, "output scale"));
  GBX_ASSIGN_OR_RETURN(double zero, scalar_input(ctx, z, "output zero point", dt));
  std::vector<RuntimeValue> values;
  for (const Tensor& t : inputs) values.emplace_back(t);
  std::vector<const RuntimeValue*> ptrs;
  for (const RuntimeValue& v : values) ptrs.push_back(&v);
  const KernelDef* def = KernelRegistry::global().find("", op, opset, kEngineRef, DType::F32);
  if (!def) return ctx.error(ErrorCode::INTERNAL, "no reference ", op, " kernel");
  std::vector<RuntimeValue> outs(1);
  KernelContext inner(OpInfo{ctx.op().name, op, "", opset, &attrs}, ptrs, &outs, {true});
  inner.set_engines(ctx.engines());
  GBX_RETURN_IF_ERROR(def->fn(inner));
  const Tensor& y = outs[0].tensor();
  std::vector<double> v = read_doubles(y);
  const double lo = dt == DType::U8 ? 0 : -128, hi = dt == DType::U8 ? 255 : 127;
  for (double& e : v) e = std::clamp(std::nearbyint(e / scale) + zero, lo, hi);
  GBX_ASSIGN_OR_RETURN(Tensor q, Tensor::allocate(dt, y.dims()));
  store_doubles(q, v);
  ctx.set_output(0, std::move(q));
  return Status::OK();
}

// QLinearConcat(Y_scale, Y_zero_point, (X, X_scale, X_zero_point)...; axis).
Status qlinear_concat(KernelContext& ctx) {
  if (ctx.num_inputs() < 5 || (ctx.num_inputs() - 2) % 3 != 0)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "expected Y_scale, Y_zero_point and a (X, scale, zero point) ",
                     "triple per input, got ", ctx.num_inputs(), " inputs");
  if (!ctx.has_attr("axis")) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "axis is required");
  GBX_RETURN_IF_ERROR(ctx.require_tensor(2));
  const DType dt = ctx.input(2).dtype();
  std::vector<Tensor> floats;
  for (size_t i = 2; i < ctx.num_inputs(); i += 3) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
    if (ctx.input(i).dtype() != dt)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "input ", i, " ", describe(ctx.input(i)), " is not ",
                       dtype_name(dt), " like the first");
    GBX_ASSIGN_OR_RETURN(Tensor f, dequantized(ctx, i, i + 1, i + 2));
    floats.push_back(std::move(f));
  }
  const AttributeMap attrs{{"axis", attr_int(ctx.attr_int("axis", 0))}};
  return run_quantized(ctx, "Concat", 13, attrs, floats, 0, 1, dt);
}

// QLinearAveragePool(X, x_scale, x_zero_point, y_scale, y_zero_point; AveragePool's attributes,
// channels_last). Padding counts as the real value 0 with count_include_pad.
Status qlinear_average_pool(KernelContext& ctx) {
  if (ctx.attr_int("channels_last", 0) != 0)
    return ctx.error(ErrorCode::OP_UNSUPPORTED, "channels_last = 1 is not supported (NCHW input only)");
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const DType dt = ctx.input(0).dtype();
  GBX_ASSIGN_OR_RETURN(Tensor x, dequantized(ctx, 0, 1, 2));
  AttributeMap attrs = *ctx.op().attrs;
  attrs.erase("channels_last");
  return run_quantized(ctx, "AveragePool", 19, attrs, {x}, 3, 4, dt);
}

// QLinearSoftmax(X, X_scale, x_zero_point, y_scale, y_zero_point; axis, opset): `opset` says
// which ONNX Softmax's semantics apply (before 13: the input coerced to 2-D at axis).
Status qlinear_softmax(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const DType dt = ctx.input(0).dtype();
  GBX_ASSIGN_OR_RETURN(Tensor x, dequantized(ctx, 0, 1, 2));
  const int64_t opset = ctx.attr_int("opset", 13);
  if (opset < 1 || opset > kNewestOnnxOpset)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "opset ", opset, " is not an ONNX opset gearbox knows (1-",
                     kNewestOnnxOpset, ")");
  const AttributeMap attrs{{"axis", attr_int(ctx.attr_int("axis", opset >= 13 ? -1 : 1))}};
  return run_quantized(ctx, "Softmax", opset >= 13 ? 13 : 11, attrs, {x}, 3, 4, dt);
}

constexpr const char* kMicrosoft = "com.microsoft";
GBX_REGISTER_KERNEL({kMicrosoft, "QLinearConcat", 1, 1, kEngineRef, {}, qlinear_concat});
GBX_REGISTER_KERNEL({kMicrosoft, "QLinearAveragePool", 1, 1, kEngineRef, {DType::U8, DType::I8}, qlinear_average_pool});
GBX_REGISTER_KERNEL({kMicrosoft, "QLinearSoftmax", 1, 1, kEngineRef, {DType::U8, DType::I8}, qlinear_softmax});

}  // namespace
}  // namespace gearbox::ref
