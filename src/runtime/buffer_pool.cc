// BufferPool: best-fit recycling of tensor buffers drawn from a device pool. See buffer_pool.h.
#include "runtime/buffer_pool.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "base/logging.h"
#include "device/memory_pool.h"

// Idle blocks are poisoned under AddressSanitizer, so a kernel that keeps using a buffer after
// its tensor died is still caught even though the memory was not returned to the device pool
// (which poisons the blocks it gets back itself).
#include "base/asan_poison.h"

namespace gearbox {
namespace {
// The OpenMP nesting level the calling thread's innermost RunScope was opened at; -1 outside
// any (a plain ScopedBufferSource, or no routing): then acquire() never throws.
thread_local int t_run_level = -1;
}  // namespace

struct BufferPool::State {
  std::mutex mu;
  std::multimap<size_t, void*> idle;  // block size -> block
  BufferPoolStats stats;
  bool closed = false;
  bool handed_out = false;  // a block was ever allocated (bind() must come first)
  std::atomic<device::MemoryPool*> device{nullptr};

  // Every pool bound to a device pool, so one that runs out can empty the others' idle lists.
  // Leaked on purpose: tensors (and so pools' states) may die during static destruction.
  static std::mutex& registry_mu() {
    static auto* mu = new std::mutex;
    return *mu;
  }
  static std::vector<std::weak_ptr<State>>& registry() {
    static auto* r = new std::vector<std::weak_ptr<State>>;
    return *r;
  }

  void give_back(void* block, size_t size) {
    GBX_UNPOISON(block, size);
    if (device::MemoryPool* dev = device.load(std::memory_order_acquire))
      dev->deallocate(block);
    else
      std::free(block);
  }

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
    give_back(block, size);
  }

  size_t trim() {
    std::multimap<size_t, void*> blocks;
    {
      std::lock_guard<std::mutex> lock(mu);
      blocks.swap(idle);
      stats.bytes_idle = 0;
      stats.trimmed += blocks.size();
    }
    size_t freed = 0;
    for (auto& [size, block] : blocks) {
      give_back(block, size);
      freed += size;
    }
    return freed;
  }

  // Empties the idle lists of the other pools drawing from `dev`.
  static size_t trim_others(const State* self, device::MemoryPool* dev) {
    std::vector<std::shared_ptr<State>> others;
    {
      std::lock_guard<std::mutex> lock(registry_mu());
      for (const auto& w : registry())
        if (auto s = w.lock(); s && s.get() != self && s->device.load(std::memory_order_acquire) == dev)
          others.push_back(std::move(s));
    }
    size_t freed = 0;
    for (auto& s : others) freed += s->trim();
    return freed;
  }
};

BufferPool::BufferPool() : state_(std::make_shared<State>()) {}

BufferPool::~BufferPool() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->closed = true;
  }
  state_->trim();
}

Status BufferPool::bind(device::MemoryPool* pool) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    device::MemoryPool* current = state_->device.load(std::memory_order_relaxed);
    if (current == pool) return Status::OK();
    if (current != nullptr || state_->handed_out)
      return make_error(ErrorCode::INTERNAL, "a buffer pool cannot change its device pool once it has handed out blocks");
    state_->device.store(pool, std::memory_order_release);
  }
  std::lock_guard<std::mutex> lock(State::registry_mu());
  auto& reg = State::registry();
  std::erase_if(reg, [](const std::weak_ptr<State>& w) { return w.expired(); });
  reg.push_back(state_);
  return Status::OK();
}

device::MemoryPool* BufferPool::device_pool() const { return state_->device.load(std::memory_order_acquire); }

std::shared_ptr<void> BufferPool::acquire(size_t bytes, bool zero) {
  if (t_run_level >= 0 && omp_get_level() > t_run_level) {
    // Inside a kernel's OpenMP region: see RunScope.
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      ++state_->stats.unrouted;
    }
    return heap_buffer(bytes, zero);
  }
  void* block = nullptr;
  size_t size = bytes;
  device::MemoryPool* dev = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->handed_out = true;
    dev = state_->device.load(std::memory_order_relaxed);
    // Compare block sizes: a device block of the size this request would get, or at most
    // twice it (a heap block: at most twice the bytes).
    const size_t want = dev ? std::max(dev->block_size_for(bytes, kTensorAlignment), bytes) : bytes;
    auto it = state_->idle.lower_bound(want);
    if (it != state_->idle.end() && it->first / 2 <= want) {
      size = it->first;
      block = it->second;
      GBX_UNPOISON(block, size);
      state_->idle.erase(it);
      state_->stats.bytes_idle -= size;
    }
  }
  const bool reused = block != nullptr;
  if (!reused && dev) {
    // Idle blocks are only a cache: give them back to make room before failing.
    block = dev->try_allocate(bytes, kTensorAlignment);
    if (!block && state_->trim() > 0) block = dev->try_allocate(bytes, kTensorAlignment);
    if (!block && State::trim_others(state_.get(), dev) > 0) block = dev->try_allocate(bytes, kTensorAlignment);
    if (!block) {
      Result<void*> r = dev->allocate(bytes, kTensorAlignment);  // the pool's error, counted once
      if (!r.ok()) {
        if (t_run_level >= 0) throw BufferSourceError(r.status());
        GBX_LOG_WARN("MEM_ALLOC", "{}", r.status().to_string());
        return nullptr;
      }
      block = r.value();  // freed by another thread in the meantime
    }
    size = dev->block_size_for(bytes, kTensorAlignment);
  } else if (!reused) {
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

size_t BufferPool::trim() { return state_->trim(); }

BufferPool::RunScope::RunScope(BufferPool* pool) : scope_(pool), previous_level_(t_run_level) {
  t_run_level = omp_get_level();
}

BufferPool::RunScope::RunScope(BufferPool* pool, BufferSource* source)
    : scope_(source ? source : pool), previous_level_(t_run_level) {
  t_run_level = omp_get_level();
}

BufferPool::RunScope::~RunScope() { t_run_level = previous_level_; }

}  // namespace gearbox
