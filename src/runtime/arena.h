// Arena: a prepared plan's intermediates placed at the memory planner's offsets
// (graph/memory_plan.h, as_executed) inside one block of the device memory pool, instead of
// one recycled power-of-two buffer each (runtime/buffer_pool.h).
//
// A Session makes one per prepared plan (runtime/plan_cache.h) when the plan's shape
// signature gives the main graph's intermediates static sizes. During a run it is the thread's
// BufferSource: the executor says which node of the main graph runs (begin_node), and a
// tensor request of exactly the size of one of that node's planned outputs gets the output's
// place in the block. Everything else -- kernels' own scratch, graph outputs (the caller keeps
// them), values without a static size, allocations inside subgraphs or OpenMP regions -- goes
// to the plan's BufferPool as before.
//
// Safety does not depend on the plan matching what kernels do: the arena knows which of its
// places are held by live tensors (each handed-out place returns itself when its last tensor
// dies), and never hands out a place that overlaps a live one; such a request also goes to the
// BufferPool. So a kernel that returns a view of its input, keeps a tensor, or allocates in
// another order than planned costs memory (counted: fallback_requests), never a wrong answer.
// One run uses the arena at a time (lease()); a concurrent run of the same plan uses the
// BufferPool alone.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/buffer_source.h"
#include "base/status.h"
#include "graph/ir.h"
#include "graph/memory_plan.h"

namespace gearbox {

namespace device {
class MemoryPool;
}
class BufferPool;

struct ArenaStats {
  size_t planned_bytes = 0;      // the block (the planner's arena)
  size_t placed_values = 0;      // values with a place
  uint64_t runs = 0;             // runs that used the arena
  uint64_t served = 0;           // requests given their planned place
  uint64_t fallback_requests = 0;  // requests during arena runs that went to the BufferPool
  uint64_t busy_runs = 0;        // runs that found the arena leased by another run
};

class Arena final : public BufferSource {
 public:
  // The arena of `g` (the main graph) for the given input dims (the plan's signature), whose
  // block comes from `pool` (nullptr: the heap). Null with `*why` set when no plan is made
  // (no static size, a graph with subgraphs) or the pool has no block for it (the runs then
  // use the BufferPool alone).
  static std::shared_ptr<Arena> create(const Graph& g, const std::vector<Dims>& input_dims, device::MemoryPool* pool,
                                       std::string* why);
  ~Arena() override;

  // Routes a run's requests through the arena, falling back to `fallback`; released by the
  // lease's destructor. An empty lease when another run holds the arena.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept : arena_(o.arena_) { o.arena_ = nullptr; }
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    explicit operator bool() const { return arena_ != nullptr; }
    Arena* get() const { return arena_; }

   private:
    friend class Arena;
    explicit Lease(Arena* a) : arena_(a) {}
    Arena* arena_ = nullptr;
  };
  Lease lease(BufferPool* fallback);

  // The main graph's node `index` (execution order) starts: its planned outputs may be served.
  void begin_node(size_t index);
  std::shared_ptr<void> acquire(size_t bytes, bool zero) override;

  ArenaStats stats() const;
  const MemoryPlan& plan() const { return plan_; }

 private:
  struct Place {
    size_t offset = 0, bytes = 0;
  };
  struct State;
  Arena() = default;

  MemoryPlan plan_;
  std::vector<std::vector<Place>> places_;  // per main-graph node: its planned outputs
  std::shared_ptr<State> state_;
};

}  // namespace gearbox
