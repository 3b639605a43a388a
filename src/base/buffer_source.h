// Where tensor storage comes from.
//
// By default every tensor buffer is a fresh 64-byte-aligned heap block. A runtime component
// can route the allocations made on the current thread to a BufferSource for the extent of a
// scope (ScopedBufferSource): the runtime uses this to hand kernels recycled buffers, so a
// second run with the same shapes, or the next iteration of a Loop body, reuses memory instead
// of allocating it again. Kernels need not know: they keep allocating with Tensor(dtype, dims)
// or Tensor::allocate().
//
// Only the thread that installed the scope is routed; allocations on OpenMP worker threads
// inside a kernel go to the heap as before.
//
// A source that cannot serve a request either returns nullptr (Tensor::allocate() then reports
// OUT_OF_MEMORY, and Tensor(dtype, dims) aborts) or, when it has a more precise error and the
// caller is known to catch it, throws BufferSourceError carrying that Status. Kernels allocate
// with Tensor(dtype, dims), which has no way to return a Status; the exception carries the
// source's error (e.g. the device pool's POOL_EXHAUSTED) past the kernel, unchanged, to the
// executor, which catches it around every kernel call and returns it from Session::run. A
// source may only throw on a thread and at a nesting level where that catch is guaranteed
// (never inside an OpenMP region, where an escaping exception terminates the process): see
// runtime/buffer_pool.h for how the runtime's source decides.
#pragma once

#include <cstddef>
#include <exception>
#include <memory>
#include <string>

#include "base/status.h"

namespace gearbox {

inline constexpr size_t kTensorAlignment = 64;

class BufferSource {
 public:
  virtual ~BufferSource() = default;
  // A buffer of at least `bytes` bytes (already padded to kTensorAlignment, never 0), aligned
  // to kTensorAlignment, zeroed when `zero`. nullptr, or a thrown BufferSourceError, when no
  // memory is left. The returned pointer's deleter gives the block back to wherever it came
  // from.
  virtual std::shared_ptr<void> acquire(size_t bytes, bool zero) = 0;
};

// Thrown by a BufferSource instead of returning nullptr when it has the error to report.
class BufferSourceError : public std::exception {
 public:
  explicit BufferSourceError(Status status) : status_(std::move(status)), what_(status_.to_string()) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  Status status_;
  std::string what_;
};

// The plain heap source (what tensors use when no scope is active).
std::shared_ptr<void> heap_buffer(size_t bytes, bool zero);

// The source of the current thread: the innermost active scope's, or nullptr (the heap).
BufferSource* current_buffer_source();

class ScopedBufferSource {
 public:
  explicit ScopedBufferSource(BufferSource* source);
  ~ScopedBufferSource();
  ScopedBufferSource(const ScopedBufferSource&) = delete;
  ScopedBufferSource& operator=(const ScopedBufferSource&) = delete;

 private:
  BufferSource* previous_;
};

}  // namespace gearbox
