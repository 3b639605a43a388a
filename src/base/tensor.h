// Tensor: a dtype, concrete dims and a shared, 64-byte-aligned, row-major buffer.
//
// Copies are shallow (they share the buffer), which makes Reshape/Identity free. The rule
// that keeps this safe: a kernel never writes into its inputs; it allocates its outputs
// (Tensor(dtype, dims)) or forwards an input unchanged. Use clone() for a private copy.
// String tensors keep their elements in a std::vector<std::string> instead of the buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/shape.h"
#include "base/status.h"

namespace gearbox {

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false
  // Allocates zero-initialized storage. Aborts only if dims overflow; use allocate() for
  // sizes that come from untrusted input.
  Tensor(DType dtype, Dims dims);
  // Checked allocation for sizes from models or files: OUT_OF_MEMORY / INVALID_ARGUMENT.
  static Result<Tensor> allocate(DType dtype, Dims dims);
  // Like allocate() but leaves the bytes uninitialized: for buffers the caller overwrites
  // at once (file loads), where zeroing would touch every page twice.
  static Result<Tensor> allocate_uninitialized(DType dtype, Dims dims);
  // A tensor over memory owned by `owner` (e.g. an mmap'ed file); data must stay valid while
  // owner lives.
  static Tensor borrow(DType dtype, Dims dims, std::shared_ptr<const void> owner, const void* data);
  // A 0-d tensor holding one value.
  template <typename T>
  static Tensor scalar(T v) {
    Tensor t(dtype_of<T>(), {});
    *t.data<T>() = v;
    return t;
  }
  // A 1-d tensor holding the given values.
  template <typename T>
  static Tensor from_vector(const std::vector<T>& v, Dims dims = {}) {
    if (dims.empty()) dims = {static_cast<int64_t>(v.size())};
    Tensor t(dtype_of<T>(), dims);
    if constexpr (std::is_same_v<T, std::string>) {
      *t.strings_ = v;
    } else if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i];
    } else {
      for (size_t i = 0; i < v.size(); ++i) t.data<T>()[i] = v[i];
    }
    return t;
  }

  bool defined() const { return dtype_ != DType::Undefined; }
  DType dtype() const { return dtype_; }
  const Dims& dims() const { return dims_; }
  size_t rank() const { return dims_.size(); }
  int64_t dim(size_t i) const { return dims_[i]; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }

  template <typename T>
  T* data() {
    return static_cast<T*>(mutable_raw());
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(data_);
  }
  const void* raw() const { return data_; }
  void* mutable_raw();
  std::vector<std::string>& strings() { return *strings_; }
  const std::vector<std::string>& strings() const { return *strings_; }

  // Same buffer, new dims (numel must match).
  Tensor reshaped(Dims dims) const;
  // Deep copy.
  Tensor clone() const;
  // True when this tensor is the only holder of its own (not borrowed) buffer: no other
  // tensor (a reshaped view, a copy kept elsewhere) would see a write to it.
  bool owns_buffer_alone() const { return owner_ && !borrowed_ && owner_.use_count() == 1; }
  // Element i as double (numeric dtypes), for tests and diagnostics.
  double at_double(int64_t i) const;

 private:
  static Result<Tensor> allocate_impl(DType dtype, Dims dims, bool zero);

  DType dtype_ = DType::Undefined;
  Dims dims_;
  int64_t numel_ = 0;
  std::shared_ptr<const void> owner_;
  const void* data_ = nullptr;
  bool borrowed_ = false;
  std::shared_ptr<std::vector<std::string>> strings_;
};

// "float32[1,3,224,224]"
std::string describe(const Tensor& t);

}  // namespace gearbox
