// MemoryPool: a thread-safe buddy allocator over one reserved region of device memory, with
// the statistics that explain an out-of-memory: used, free, largest free block,
// fragmentation (see PoolStats::fragmentation), an allocation-size histogram and the peak.
//
// On the CPU the region is one anonymous mapping reserved up front (MAP_NORESERVE), so the
// capacity costs address space only; pages are committed by the kernel on first touch.
// Blocks are powers of two from min_block bytes up; a capacity that is not a power of two
// is split into the largest aligned power-of-two "roots" (3G = 2G + 1G), and a block never
// merges across roots.
//
//   GBX_ASSIGN_OR_RETURN(void* p, pool.allocate(bytes));
//   ...
//   pool.deallocate(p);
//
// A failed allocation is POOL_EXHAUSTED (less free memory in total than requested) or
// POOL_FRAGMENTED (enough in total, but no single free block is large enough); both
// messages carry the requested size, total free, largest free block and fragmentation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace gearbox::device {

struct PoolStats {
  static constexpr int kMaxOrders = 48;  // block sizes min_block << 0 .. << 47
  size_t capacity = 0;
  size_t min_block = 0;
  size_t used = 0;            // bytes in allocated blocks (after rounding to block sizes)
  size_t requested = 0;       // bytes the live allocations asked for
  size_t free = 0;            // capacity - used
  size_t largest_free = 0;    // the largest block an allocation can get now
  // The end of the highest live block: the part of the region allocations have spread over
  // (blocks are taken lowest address first, so everything above it is free and unsplit).
  size_t used_span = 0;
  // 1 - (largest free block inside the used span) / (free bytes inside the used span); 0 when
  // nothing is live or the span has no free byte. It says how much of the free memory among
  // the live blocks is in pieces smaller than the largest hole: an almost empty pool reads ~0
  // (the untouched memory above the span does not count as free fragments), a pool whose live
  // blocks leave many small holes reads near 1.
  double fragmentation = 0;
  size_t peak_used = 0;
  // Kernels' per-thread grow-only scratch buffers (base/scratch.h): process-wide, held outside
  // the pool (OpenMP workers fill them), so what a model needs is the pool's used + this.
  size_t thread_scratch = 0;
  size_t thread_scratch_peak = 0;
  uint64_t alloc_count = 0;   // successful allocations since creation
  uint64_t free_count = 0;
  uint64_t failed_count = 0;
  size_t live_allocations = 0;
  // histogram[k]: successful allocations since creation whose block was min_block << k.
  std::array<uint64_t, kMaxOrders> histogram{};
  // free_blocks[k]: blocks of min_block << k on the free lists now.
  std::array<uint64_t, kMaxOrders> free_blocks{};
};

class MemoryPool {
 public:
  // capacity is rounded down to a multiple of min_block (a power of two, >= 64).
  // Reserving the region can fail: POOL_RESERVE_FAILED.
  static Result<std::unique_ptr<MemoryPool>> create(size_t capacity, size_t min_block = 256);
  ~MemoryPool();
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  // align: a power of two up to kMaxAlign; blocks are aligned to their own size, so a
  // larger alignment only rounds the block size up.
  static constexpr size_t kMaxAlign = size_t{2} << 20;
  Result<void*> allocate(size_t bytes, size_t align = 64);
  // The same without the error: nullptr when nothing fits, and the failure is not counted
  // (failed_count) or logged. For callers that can make room and retry (the runtime's
  // BufferPool gives back its idle blocks first), then call allocate() for the diagnostic.
  void* try_allocate(size_t bytes, size_t align = 64);
  // One contiguous range of `bytes` (rounded up to min_block), not rounded to a power of two:
  // it starts at the highest free block from which a run of adjacent free blocks holds it (the
  // smaller roots and later blocks, leaving large blocks whole for power-of-two allocations),
  // taken as the aligned buddy blocks that tile it (blocks of different sizes, possibly of consecutive roots). For an
  // arena (runtime/arena.h), which places many tensors inside one range. Freed as one with
  // deallocate()/release() of the returned pointer. POOL_EXHAUSTED / POOL_FRAGMENTED as
  // allocate(); aligned to min_block.
  Result<void*> allocate_range(size_t bytes);
  // A block owned by shared_ptrs: the last owner returns it to the pool (for Tensor buffers,
  // which share their storage). The pool must outlive every such pointer; default_pool()
  // lives for the whole process.
  Result<std::shared_ptr<void>> allocate_shared(size_t bytes, size_t align = 64);
  // Returns the block to the pool and merges it with its free buddies. A pointer that this
  // pool did not hand out is logged and ignored; use release() to get the error.
  void deallocate(void* p);
  Status release(void* p);  // POOL_INVALID_FREE for a foreign or double-freed pointer

  PoolStats stats() const;
  bool owns(const void* p) const;
  size_t capacity() const { return capacity_; }
  size_t min_block() const { return min_block_; }
  const void* base() const { return base_; }  // the region's first byte
  // The block size an allocation of (bytes, align) takes: the smallest min_block << k that
  // holds it.
  size_t block_size_for(size_t bytes, size_t align = 64) const;

 private:
  MemoryPool() = default;
  int order_for(size_t bytes, size_t align) const;   // -1 when larger than any block
  int root_order_at(size_t offset) const;            // the order of the root holding offset
  size_t largest_free_locked() const;
  size_t used_span_locked() const;
  size_t live_allocations_locked() const;
  double fragmentation_locked() const;  // PoolStats::fragmentation
  int free_order_locked(int order) const;             // smallest order >= order with a free block; -1
  void* take_locked(int k, int order, size_t bytes);  // splits a free block of order k down to order
  Status failure_locked(size_t bytes, size_t align, int order) const;

  mutable std::mutex mu_;
  uint8_t* base_ = nullptr;  // aligned start of the region
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  size_t capacity_ = 0;
  size_t poisoned_end_ = 0;  // end offset of the blocks ever poisoned (see ~MemoryPool)
  size_t min_block_ = 0;
  int min_shift_ = 0;
  std::vector<std::pair<size_t, int>> roots_;  // (offset, order), largest first
  std::vector<std::set<size_t>> free_;        // free block offsets per order
  struct Live {
    int order;
    size_t requested;
  };
  std::unordered_map<size_t, Live> live_;  // offset -> allocation
  // allocate_range: range start -> the other blocks of the range (the first is in live_ too).
  std::unordered_map<size_t, std::vector<size_t>> ranges_;
  Status release_block_locked(size_t offset);
  PoolStats stats_;
};

// "4G", "512M", "64K", "1048576", "1.5G" -> bytes; DEVICE_MEMORY_INVALID otherwise.
Result<size_t> parse_memory_size(const std::string& text);
// "1.50 GiB", "512 KiB", "100 B".
std::string format_bytes(size_t bytes);
// The process-wide pool of the CPU device: capacity from GEARBOX_DEVICE_MEMORY, otherwise
// min(system RAM / 2, 8 GiB). Created on first use. A bad GEARBOX_DEVICE_MEMORY is an error.
Result<MemoryPool*> default_pool();
// The default capacity rule, for smi/doctor: GEARBOX_DEVICE_MEMORY or min(RAM/2, 8 GiB).
Result<size_t> default_pool_capacity();
// Total and available system memory from /proc/meminfo (0 when unreadable).
struct SystemMemory {
  size_t total = 0;
  size_t available = 0;
};
SystemMemory system_memory();
// Resident set size of this process from /proc/self/statm (0 when unreadable).
size_t process_resident_bytes();

}  // namespace gearbox::device
