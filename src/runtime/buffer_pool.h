// BufferPool: recycles tensor buffers between the runs of one prepared plan.
//
// The executor installs a plan's pool as the thread's BufferSource for the duration of a run
// (see base/buffer_source.h). A buffer whose last tensor dies goes back to the pool instead of
// the heap; the next allocation of a similar size takes it back. So within a run, a freed
// intermediate's memory serves a later one; across runs with the same shapes, and across the
// iterations of a Loop body, the working set is allocated once and then only reused.
//
// Best fit: the smallest idle block at least as large as the request and at most twice it.
// Idle memory is bounded by the peak the pool has had in use, so a caller who keeps many old
// outputs alive and then drops them does not grow the pool without limit. Thread-safe: the
// tensors of a run may be released on any thread, and concurrent runs may share a plan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/buffer_source.h"

namespace gearbox {

struct BufferPoolStats {
  uint64_t fresh = 0;         // blocks taken from the heap
  uint64_t reused = 0;        // requests served from an idle block
  size_t bytes_in_use = 0;    // held by live tensors
  size_t bytes_idle = 0;      // kept for reuse
  size_t peak_in_use = 0;
};

class BufferPool final : public BufferSource {
 public:
  BufferPool();
  // Frees the idle blocks; blocks still held by tensors go to the heap when those die.
  ~BufferPool() override;
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  std::shared_ptr<void> acquire(size_t bytes, bool zero) override;
  BufferPoolStats stats() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace gearbox
