// Small helpers shared by the "misc" reference kernels (losses, resize, quantization,
// signal ops...): these kernels compute in double for simplicity and write the result back
// in the op's float dtype.
#pragma once

#include <cstdint>
#include <vector>

#include "base/tensor.h"
#include "kernels/kernel.h"

namespace gearbox::ref {

inline bool is_float_dtype(DType t) { return is_float(t); }

// Allocates a tensor of a float dtype (F32/F64/F16/BF16) and fills it from doubles.
// Sizes come from model data, so allocation is checked.
inline Result<Tensor> make_float_tensor(DType dtype, Dims dims, const std::vector<double>& v) {
  GBX_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(dtype, std::move(dims)));
  const int64_t n = t.numel();
  bool ok = visit_numeric(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = t.data<T>();
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(static_cast<compute_t<T>>(v[static_cast<size_t>(i)]));
  });
  if (!ok) return make_error(ErrorCode::DTYPE_UNSUPPORTED, "cannot store dtype ", dtype_name(dtype));
  return t;
}

// Writes doubles into an already allocated numeric tensor.
inline void store_doubles(Tensor& t, const std::vector<double>& v) {
  const int64_t n = t.numel();
  visit_numeric(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = t.data<T>();
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(static_cast<compute_t<T>>(v[static_cast<size_t>(i)]));
  });
}

inline std::vector<DType> float_dtypes() { return {DType::F32, DType::F64, DType::F16, DType::BF16}; }

}  // namespace gearbox::ref
