// Kernel scratch: per-thread, grow-only buffers that kernels keep between calls (GEMM packing
// panels, attention work space), so that a call neither allocates them again nor faults their
// pages in again.
//
// They live outside the device memory pool: OpenMP worker threads fill them inside parallel
// regions, where a pool failure could not be reported. Their bytes are counted here instead,
// process-wide, and the device pool's statistics carry the count (device::PoolStats::
// thread_scratch, shown by gearbox smi, profile and the server's gauges), so the memory a model
// needs is the pool's plus this.
//
//   thread_local ThreadScratch<float> buf;   // one per thread and call site
//   float* p = buf.get(n);                   // >= n floats, 64-byte aligned, contents unspecified
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>

namespace gearbox {

// Bytes held by every live ThreadScratch now, and the most ever held at once.
size_t thread_scratch_bytes();
size_t thread_scratch_peak_bytes();

namespace scratch_detail {
void account(std::ptrdiff_t delta_bytes);
}

template <typename T>
class ThreadScratch {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  ThreadScratch() = default;
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;
  ~ThreadScratch() { scratch_detail::account(-static_cast<std::ptrdiff_t>(bytes_)); }

  // At least n elements; grows (contents lost; zeroed when `zero_on_growth`) when n is larger
  // than any earlier request. nullptr when the heap refuses.
  T* get(size_t n, bool zero_on_growth = false) {
    if (n > capacity_) {
      const size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
      buf_.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
      if (buf_ && zero_on_growth) std::memset(static_cast<void*>(buf_.get()), 0, bytes);
      scratch_detail::account(static_cast<std::ptrdiff_t>((buf_ ? bytes : 0)) - static_cast<std::ptrdiff_t>(bytes_));
      bytes_ = buf_ ? bytes : 0;
      capacity_ = buf_ ? n : 0;
    }
    return buf_.get();
  }
  size_t capacity() const { return capacity_; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> buf_;
  size_t capacity_ = 0;  // elements
  size_t bytes_ = 0;     // accounted
};

}  // namespace gearbox
