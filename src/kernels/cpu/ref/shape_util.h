// Helpers private to the tensor-manipulation kernels (reshape, transpose,
// slice, gather, pad, ...): dtype-agnostic element copies, the strided-copy
// engine they share, and readers for values that moved from attributes to
// inputs between opsets.
//
// Copy-type ops never look at element values, so they move bytes (dtype_size)
// and copy std::string elements for string tensors; one code path then serves
// every dtype.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "base/tensor.h"
#include "kernels/cpu/ref/ref_util.h"
#include "kernels/kernel.h"

namespace gearbox::ref {

// Copies element runs between two tensors of the same dtype, by element offset.
class ElemCopier {
 public:
  ElemCopier(const Tensor &src, Tensor &dst) : es_(dtype_size(src.dtype())), is_string_(src.dtype() == DType::String) {
    if (is_string_) {
      ss_ = &src.strings();
      ds_ = &dst.strings();
    } else {
      src_ = static_cast<const uint8_t *>(src.raw());
      dst_ = static_cast<uint8_t *>(dst.mutable_raw());
    }
  }
  // Copies n consecutive elements src[so..so+n) to dst[dof..dof+n).
  void run(int64_t so, int64_t dof, int64_t n) const {
    if (n <= 0) return;
    if (is_string_) {
      for (int64_t i = 0; i < n; ++i) (*ds_)[size_t(dof + i)] = (*ss_)[size_t(so + i)];
    } else {
      std::memcpy(dst_ + size_t(dof) * es_, src_ + size_t(so) * es_, size_t(n) * es_);
    }
  }
  // Copies one element.
  void one(int64_t so, int64_t dof) const {
    if (is_string_) {
      (*ds_)[size_t(dof)] = (*ss_)[size_t(so)];
      return;
    }
    switch (es_) {
      case 1:
        dst_[dof] = src_[so];
        break;
      case 2:
        std::memcpy(dst_ + dof * 2, src_ + so * 2, 2);
        break;
      case 4:
        std::memcpy(dst_ + dof * 4, src_ + so * 4, 4);
        break;
      case 8:
        std::memcpy(dst_ + dof * 8, src_ + so * 8, 8);
        break;
      default:
        std::memcpy(dst_ + size_t(dof) * es_, src_ + size_t(so) * es_, es_);
    }
  }
  size_t elem_size() const { return es_; }
  bool is_string() const { return is_string_; }

 private:
  size_t es_;
  bool is_string_;
  const uint8_t *src_ = nullptr;
  uint8_t *dst_ = nullptr;
  const std::vector<std::string> *ss_ = nullptr;
  std::vector<std::string> *ds_ = nullptr;
};

// Writes dst (contiguous, row-major over out_dims) from src elements at
// src_base + sum(idx[d] * src_strides[d]). Strides may be 0 (broadcast) or
// negative (reversed slices). Dims are coalesced first and runs with unit inner
// stride are memcpy'd, which is what makes Transpose/Slice/Expand/Tile fast on
// real models.
void strided_copy(const Tensor &src, int64_t src_base, const Dims &out_dims, const std::vector<int64_t> &src_strides,
                  Tensor &dst);

// Integer + and * that wrap modulo 2^bits like the hardware (and numpy) instead of being
// undefined behaviour on overflow; plain arithmetic for floating types.
template <typename T>
inline T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(uint64_t(a) + uint64_t(b));
  else
    return a + b;
}
template <typename T>
inline T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(uint64_t(a) * uint64_t(b));
  else
    return a * b;
}

// Allocates an output tensor with checked size (dims may come from model
// inputs).
Result<Tensor> alloc_output(const KernelContext &ctx, DType dtype, const Dims &dims);

// Reads an optional integer-list input (opset >= some version) or falls back to
// an ints attribute; nullopt when neither is given.
Result<std::optional<std::vector<int64_t>>> ints_from_input_or_attr(const KernelContext &ctx, size_t input,
                                                                    bool use_input, std::string_view attr);

// Product of dims with overflow check; INVALID_ARGUMENT on negative dims or
// overflow.
Result<int64_t> checked_numel(const KernelContext &ctx, const Dims &dims);

// Normalizes a list of axes against rank; INVALID_ARGUMENT on out-of-range or
// repeated axes.
Result<std::vector<int64_t>> normalize_axes(const KernelContext &ctx, const std::vector<int64_t> &axes, int64_t rank);

// Reads one integer scalar (or 1-element tensor) input.
Result<int64_t> read_int_scalar(const KernelContext &ctx, size_t input, std::string_view what);

}  // namespace gearbox::ref
