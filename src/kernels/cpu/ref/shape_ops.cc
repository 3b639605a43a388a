// Shape (with start/end from opset 15), Size, ConstantOfShape, Constant (value
// and the value_* attributes from opset 12), Range and EyeLike (reference): ops
// that produce tensors from shapes or attributes rather than from element data.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/ref/shape_util.h"

namespace gearbox::ref {
namespace {

Status shape(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  const int64_t rank = int64_t(x.rank());
  int64_t start = 0, end = rank;
  if (ctx.opset() >= 15) {
    start = ctx.attr_int("start", 0);
    end = ctx.attr_int("end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, 0, rank);
  }
  const int64_t n = std::max<int64_t>(end - start, 0);
  Tensor y(DType::I64, {n});
  for (int64_t i = 0; i < n; ++i) y.data<int64_t>()[i] = x.dim(size_t(start + i));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status size(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  ctx.set_output(0, Tensor::scalar<int64_t>(ctx.input(0).numel()));
  return Status::OK();
}

// Fills every element of y with element 0 of v (same dtype), doubling the
// copied prefix.
void fill_from(const Tensor& v, Tensor& y) {
  const int64_t n = y.numel();
  if (n == 0) return;
  ElemCopier(v, y).one(0, 0);
  const ElemCopier self(y, y);
  for (int64_t done = 1; done < n;) {
    const int64_t step = std::min(done, n - done);
    self.run(0, done, step);
    done += step;
  }
}

Status constant_of_shape(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_ASSIGN_OR_RETURN(auto shape, read_ints(ctx, ctx.input(0)));
  Dims dims(shape.begin(), shape.end());
  GBX_RETURN_IF_ERROR(checked_numel(ctx, dims).status());
  Tensor value = Tensor::scalar<float>(0.0f);
  if (const Attribute* a = ctx.attr("value")) {
    if (a->type != AttrType::Tensor || a->t.numel() != 1)
      return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "value must be a one-element tensor");
    value = a->t;
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, value.dtype(), dims));
  fill_from(value, y);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status constant(KernelContext& ctx) {
  const Attribute* a = nullptr;
  Tensor y;
  if ((a = ctx.attr("value")) && a->type == AttrType::Tensor) {
    y = a->t;
  } else if (ctx.has_attr("sparse_value")) {
    return ctx.error(ErrorCode::OP_UNSUPPORTED, "Constant with sparse_value is not supported");
  } else if (ctx.opset() >= 12 && (a = ctx.attr("value_float"))) {
    y = Tensor::scalar<float>(a->f);
  } else if (ctx.opset() >= 12 && (a = ctx.attr("value_floats"))) {
    y = Tensor::from_vector<float>(a->floats, {int64_t(a->floats.size())});
  } else if (ctx.opset() >= 12 && (a = ctx.attr("value_int"))) {
    y = Tensor::scalar<int64_t>(a->i);
  } else if (ctx.opset() >= 12 && (a = ctx.attr("value_ints"))) {
    y = Tensor::from_vector<int64_t>(a->ints, {int64_t(a->ints.size())});
  } else if (ctx.opset() >= 12 && (a = ctx.attr("value_string"))) {
    y = Tensor(DType::String, {});
    y.strings()[0] = a->s;
  } else if (ctx.opset() >= 12 && (a = ctx.attr("value_strings"))) {
    y = Tensor::from_vector<std::string>(a->strings, {int64_t(a->strings.size())});
  } else {
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID,
                     "Constant needs one of value, value_float(s), value_int(s), "
                     "value_string(s)");
  }
  if (!y.defined()) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "Constant value is empty");
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status range(KernelContext& ctx) {
  for (size_t i = 0; i < 3; ++i) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
    if (ctx.input(i).numel() != 1 || ctx.input(i).dtype() != ctx.input(0).dtype())
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "Range input ", i, " must be a scalar of the start's dtype, got ",
                       describe(ctx.input(i)));
  }
  const DType dt = ctx.input(0).dtype();
  Status st;
  Tensor y;
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T start = ctx.input(0).data<T>()[0], limit = ctx.input(1).data<T>()[0], delta = ctx.input(2).data<T>()[0];
    if (delta == T(0)) {
      st = ctx.error(ErrorCode::INVALID_ARGUMENT, "Range delta is 0");
      return;
    }
    int64_t n = 0;
    if constexpr (std::is_floating_point_v<T>) {
      const double c = std::ceil((double(limit) - double(start)) / double(delta));
      if (!(c < 9.2e18)) {  // also catches NaN
        st = ctx.error(ErrorCode::INVALID_ARGUMENT, "Range ", start, "..", limit, " step ", delta, " is too long");
        return;
      }
      n = c > 0 ? int64_t(c) : 0;
    } else {
      // Exact integer ceil((limit - start) / delta), in 128 bits to avoid
      // overflow.
      const __int128 d = __int128(limit) - __int128(start), s = delta;
      __int128 c = 0;
      if ((d > 0 && s > 0) || (d < 0 && s < 0)) c = (d + s + (s > 0 ? -1 : 1)) / s;
      if (c > (__int128(1) << 62)) {
        st = ctx.error(ErrorCode::INVALID_ARGUMENT, "Range ", int64_t(start), "..", int64_t(limit), " step ",
                       int64_t(delta), " is too long");
        return;
      }
      n = int64_t(c);
    }
    auto r = alloc_output(ctx, dt, {n});
    if (!r.ok()) {
      st = r.status();
      return;
    }
    y = std::move(r).value();
    T* o = y.data<T>();
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  };
  switch (dt) {
    case DType::F32:
      run(TypeTag<float>{});
      break;
    case DType::F64:
      run(TypeTag<double>{});
      break;
    case DType::I16:
      run(TypeTag<int16_t>{});
      break;
    case DType::I32:
      run(TypeTag<int32_t>{});
      break;
    case DType::I64:
      run(TypeTag<int64_t>{});
      break;
    default:
      return ctx.unsupported_dtype(dt);
  }
  GBX_RETURN_IF_ERROR(st);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status eye_like(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) return ctx.error(ErrorCode::SHAPE_MISMATCH, "EyeLike needs a 2-d input, got ", describe(x));
  DType dt = x.dtype();
  if (ctx.has_attr("dtype")) {
    const int64_t v = ctx.attr_int("dtype", 0);
    if (!dtype_is_known(int32_t(v)))
      return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "dtype ", v, " is not a known element type");
    dt = DType(v);
  }
  const int64_t k = ctx.attr_int("k", 0);
  GBX_ASSIGN_OR_RETURN(Tensor y, alloc_output(ctx, dt, x.dims()));
  const int64_t rows = x.dim(0), cols = x.dim(1);
  const bool ok = visit_numeric(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = y.data<T>();
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t j = i + k;
      if (j >= 0 && j < cols) o[i * cols + j] = static_cast<T>(1);
    }
  });
  if (!ok) return ctx.unsupported_dtype(dt);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Shape", 1, 18, kEngineRef, {}, shape});
GBX_REGISTER_KERNEL({"", "Size", 1, 18, kEngineRef, {}, size});
GBX_REGISTER_KERNEL({"", "ConstantOfShape", 9, 18, kEngineRef, {}, constant_of_shape});
GBX_REGISTER_KERNEL({"", "Constant", 1, 18, kEngineRef, {}, constant});
GBX_REGISTER_KERNEL({"", "Range", 11, 18, kEngineRef, {}, range});
GBX_REGISTER_KERNEL({"", "EyeLike", 9, 18, kEngineRef, {}, eye_like});

}  // namespace
}  // namespace gearbox::ref
