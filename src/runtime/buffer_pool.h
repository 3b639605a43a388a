// BufferPool: recycles tensor buffers between the runs of one prepared plan, and takes the
// blocks it recycles from the session's device memory pool.
//
// The executor installs a plan's pool as the thread's BufferSource for the duration of a run
// (BufferPool::RunScope; see base/buffer_source.h). A buffer whose last tensor dies goes back
// to the pool instead of the device; the next allocation of the same block size takes it back.
// So within a run, a freed intermediate's memory serves a later one; across runs with the same
// shapes, and across the iterations of a Loop body, the working set is allocated once and then
// only reused.
//
// Where blocks come from: once bound (bind()) to a device::MemoryPool, from that pool, so the
// pool's statistics (gearbox smi, the server's gauges) describe the memory models really use and
// a model that does not fit gets the pool's POOL_EXHAUSTED / POOL_FRAGMENTED. A Session binds
// every plan's pool to its device's pool. An unbound BufferPool (a standalone user) takes heap
// blocks.
//
// When the device pool refuses a block, the pool first gives back its own idle blocks, then
// those of every other BufferPool bound to the same device pool (other shape signatures' plans,
// other sessions: idle memory is only a cache), and tries again. If that fails too, inside a
// RunScope the pool's Status is thrown as BufferSourceError for the executor to return;
// elsewhere acquire() returns nullptr.
//
// Matching is by block size class: the device pool's buddy blocks are powers of two, so a
// request reuses an idle block of exactly the size it would get from the device. Idle memory
// is bounded by the peak the pool has had in use, so a caller who keeps many old outputs alive
// and then drops them does not grow the pool without limit. Thread-safe: the tensors of a run
// may be released on any thread, and concurrent runs may share a plan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/buffer_source.h"
#include "base/status.h"

namespace gearbox {

namespace device {
class MemoryPool;
}

struct BufferPoolStats {
  uint64_t fresh = 0;         // blocks taken from the device pool (or the heap, unbound)
  uint64_t reused = 0;        // requests served from an idle block
  uint64_t trimmed = 0;       // idle blocks given back to the device pool to make room
  uint64_t unrouted = 0;      // allocations inside an OpenMP region of a run: heap (see RunScope)
  size_t bytes_in_use = 0;    // held by live tensors (block sizes)
  size_t bytes_idle = 0;      // kept for reuse
  size_t peak_in_use = 0;
};

class BufferPool final : public BufferSource {
 public:
  BufferPool();
  // Gives the idle blocks back; blocks still held by tensors go back when those die.
  ~BufferPool() override;
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // Takes fresh blocks from `pool` from now on. Binding again to the same pool does nothing;
  // INTERNAL when already bound to another one or after heap blocks were handed out. The
  // device pool must outlive this pool and every tensor allocated from it.
  Status bind(device::MemoryPool* pool);
  device::MemoryPool* device_pool() const;

  std::shared_ptr<void> acquire(size_t bytes, bool zero) override;
  BufferPoolStats stats() const;
  // Gives every idle block back to the device pool (or the heap); returns the bytes freed.
  size_t trim();

  // Routes the calling thread's tensor allocations to `pool` for the extent of a run, and marks
  // the thread as one whose caller catches BufferSourceError (the executor does, around every
  // kernel call). It records the OpenMP nesting level it was opened at: an allocation made
  // deeper (on the calling thread inside a kernel's parallel region) goes to the heap, because
  // an exception cannot leave an OpenMP region (the process would terminate) and such buffers
  // are per-thread scratch like those of the worker threads, which are never routed.
  class RunScope {
   public:
    explicit RunScope(BufferPool* pool);
    // The same with the thread's requests going to `source` (an Arena falling back to `pool`).
    RunScope(BufferPool* pool, BufferSource* source);
    ~RunScope();
    RunScope(const RunScope&) = delete;
    RunScope& operator=(const RunScope&) = delete;

   private:
    ScopedBufferSource scope_;
    int previous_level_;
  };

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace gearbox
