// BufferPool: best-fit recycling of tensor buffers. See buffer_pool.h.
#include "runtime/buffer_pool.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

// Idle blocks are poisoned under AddressSanitizer, so a kernel that keeps using a buffer after
// its tensor died is still caught even though the memory was not returned to malloc.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define GBX_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define GBX_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define GBX_POISON(p, n) ((void)(p), (void)(n))
#define GBX_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace gearbox {

struct BufferPool::State {
  std::mutex mu;
  std::multimap<size_t, void*> idle;  // block size -> block
  BufferPoolStats stats;
  bool closed = false;

  void release(void* block, size_t size) {
    {
      std::lock_guard<std::mutex> lock(mu);
      stats.bytes_in_use -= size;
      if (!closed && stats.bytes_idle + size <= stats.peak_in_use) {
        GBX_POISON(block, size);
        idle.emplace(size, block);
        stats.bytes_idle += size;
        return;
      }
    }
    std::free(block);
  }
};

BufferPool::BufferPool() : state_(std::make_shared<State>()) {}

BufferPool::~BufferPool() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->closed = true;
  for (auto& [size, block] : state_->idle) {
    GBX_UNPOISON(block, size);
    std::free(block);
  }
  state_->idle.clear();
  state_->stats.bytes_idle = 0;
}

std::shared_ptr<void> BufferPool::acquire(size_t bytes, bool zero) {
  void* block = nullptr;
  size_t size = bytes;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto it = state_->idle.lower_bound(bytes);
    if (it != state_->idle.end() && it->first / 2 <= bytes) {
      size = it->first;
      block = it->second;
      GBX_UNPOISON(block, size);
      state_->idle.erase(it);
      state_->stats.bytes_idle -= size;
    }
  }
  const bool reused = block != nullptr;
  if (!reused) {
    block = std::aligned_alloc(kTensorAlignment, bytes);
    if (!block) return nullptr;
  }
  if (zero) std::memset(block, 0, bytes);
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    ++(reused ? state_->stats.reused : state_->stats.fresh);
    state_->stats.bytes_in_use += size;
    if (state_->stats.bytes_in_use > state_->stats.peak_in_use) state_->stats.peak_in_use = state_->stats.bytes_in_use;
  }
  // The deleter keeps the state alive, so tensors may outlive the pool (and the session).
  return std::shared_ptr<void>(block, [state = state_, size](void* p) { state->release(p, size); });
}

BufferPoolStats BufferPool::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

}  // namespace gearbox
