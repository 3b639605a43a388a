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
#pragma once

#include <cstddef>
#include <memory>

namespace gearbox {

inline constexpr size_t kTensorAlignment = 64;

class BufferSource {
 public:
  virtual ~BufferSource() = default;
  // A buffer of at least `bytes` bytes (already padded to kTensorAlignment, never 0), aligned
  // to kTensorAlignment, zeroed when `zero`. nullptr when no memory is left. The returned
  // pointer's deleter gives the block back to wherever it came from.
  virtual std::shared_ptr<void> acquire(size_t bytes, bool zero) = 0;
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
