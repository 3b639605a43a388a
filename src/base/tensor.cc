// Tensor storage.
#include "base/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "base/buffer_source.h"

namespace gearbox {
namespace {
std::shared_ptr<void> aligned_buffer(size_t bytes, bool zero) {
  size_t padded = (bytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  if (padded == 0) padded = kTensorAlignment;
  if (BufferSource* source = current_buffer_source()) return source->acquire(padded, zero);
  return heap_buffer(padded, zero);
}
}  // namespace

Result<Tensor> Tensor::allocate(DType dtype, Dims dims) { return allocate_impl(dtype, std::move(dims), true); }

Result<Tensor> Tensor::allocate_uninitialized(DType dtype, Dims dims) {
  return allocate_impl(dtype, std::move(dims), false);
}

Result<Tensor> Tensor::allocate_impl(DType dtype, Dims dims, bool zero) {
  int64_t n = gearbox::numel(dims);
  if (n < 0) return make_error(ErrorCode::INVALID_ARGUMENT, "tensor dims ", to_string(dims), " are negative or overflow");
  size_t es = dtype == DType::String ? sizeof(std::string) : dtype_size(dtype);
  if (es == 0 && dtype != DType::String)
    return make_error(ErrorCode::DTYPE_UNSUPPORTED, "cannot allocate a tensor of dtype ", dtype_name(dtype));
  // Refuse absurd sizes up front rather than asking the allocator for them (hostile models).
  constexpr int64_t kMaxBytes = int64_t(1) << 40;
  // (The message gives elements and element size: their product can overflow int64.)
  if (n > kMaxBytes / int64_t(es ? es : 1))
    return make_error(ErrorCode::OUT_OF_MEMORY, "tensor ", dtype_name(dtype), to_string(dims), " needs ", n,
                      " elements of ", es, " bytes, over the ", kMaxBytes, "-byte limit of one tensor");
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.numel_ = n;
  if (dtype == DType::String) {
    t.strings_ = std::make_shared<std::vector<std::string>>(static_cast<size_t>(n));
    return t;
  }
  auto buf = aligned_buffer(static_cast<size_t>(n) * es, zero);
  if (!buf)
    return make_error(ErrorCode::OUT_OF_MEMORY, "could not allocate ", static_cast<size_t>(n) * es,
                      " bytes for a ", dtype_name(dtype), to_string(t.dims_), " tensor");
  t.data_ = buf.get();
  t.owner_ = std::move(buf);
  return t;
}

Tensor::Tensor(DType dtype, Dims dims) {
  auto r = allocate(dtype, std::move(dims));
  if (!r.ok()) std::abort();  // internal sizes only; untrusted sizes go through allocate()
  *this = std::move(r).value();
}

Tensor Tensor::borrow(DType dtype, Dims dims, std::shared_ptr<const void> owner, const void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.numel_ = gearbox::numel(t.dims_);
  t.owner_ = std::move(owner);
  t.data_ = data;
  t.borrowed_ = true;
  return t;
}

void* Tensor::mutable_raw() {
  // Borrowed memory (mmap'ed weights) is read-only: make a private copy on first write.
  if (borrowed_) *this = clone();
  return const_cast<void*>(data_);
}

Tensor Tensor::reshaped(Dims dims) const {
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

Tensor Tensor::clone() const {
  if (!defined()) return Tensor();
  Tensor t(dtype_, dims_);
  if (dtype_ == DType::String)
    *t.strings_ = *strings_;
  else if (nbytes())
    std::memcpy(const_cast<void*>(t.data_), data_, nbytes());
  return t;
}

double Tensor::at_double(int64_t i) const {
  double out = 0;
  visit_numeric(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    out = static_cast<double>(static_cast<compute_t<T>>(data<T>()[i]));
  });
  return out;
}

std::string describe(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + to_string(t.dims());
}

}  // namespace gearbox
