// PlanCache: what a Session prepares once per input shape signature, kept in a bounded LRU.
//
// A model with symbolic dims runs at many shapes. What is specific to a shape signature
// (the dtypes and dims of every input) is prepared on the first run with it and reused by
// every later run with the same signature:
//   * the kernel chosen for each node (dtype dispatch and the kernels' supports() predicates
//     resolved once, for every node of every subgraph; per input dims for a node whose choice
//     depends on them);
//   * the buffers of the run: a BufferPool sized by the first run and then only reused, so a
//     repeated call allocates nothing new;
//   * when the signature gives the intermediates static sizes, an Arena (runtime/arena.h):
//     those intermediates at the memory planner's offsets in one block, the BufferPool serving
//     the rest.
// The cache holds at most `capacity` signatures (SessionOptions::plan_cache_size,
// GEARBOX_PLAN_CACHE_SIZE); the least recently used one is evicted (its idle buffers freed).
// Capacity 0 disables caching: every run prepares a plan of its own and drops it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/kernel.h"
#include "runtime/arena.h"
#include "runtime/buffer_pool.h"

namespace gearbox {

// The kernels chosen for one node whose choice depends on its run-time input shapes (a
// supports() predicate that read dims the static types did not know): shapes inside one plan
// can still differ (a Loop body, a shape computed from data), so the choice is kept per input
// dims, for a bounded number of them.
class ShapeChoices {
 public:
  static constexpr size_t kMax = 16;
  const KernelDef* find(const std::vector<Dims>& dims) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [d, def] : seen_)
      if (d == dims) return def;
    return nullptr;
  }
  void add(std::vector<Dims> dims, const KernelDef* def) {
    std::lock_guard<std::mutex> lock(mu_);
    if (seen_.size() < kMax) seen_.emplace_back(std::move(dims), def);
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<std::vector<Dims>, const KernelDef*>> seen_;
};

struct PreparedPlan {
  PreparedPlan(std::string sig, size_t num_nodes)
      : signature(std::move(sig)),
        kernels(num_nodes),
        node_caches(std::make_unique<NodeCache[]>(num_nodes)),
        shape_choices(std::make_unique<ShapeChoices[]>(num_nodes)) {}
  const std::string signature;
  BufferPool buffers;
  // Made by the first run (Session::run_values); null when no plan could be made (arena_why).
  std::once_flag arena_once;
  std::shared_ptr<Arena> arena;
  std::string arena_why;
  std::atomic<bool> arena_ready{false};  // arena and arena_why are set (readable by stats())
  // The kernel picked for node i (Executor's node index across all graphs); null until the
  // first run that reaches the node resolves it.
  std::vector<std::atomic<const KernelDef*>> kernels;
  // What node i's kernel keeps between runs (kernels/kernel.h NodeCache), freed with the plan.
  std::unique_ptr<NodeCache[]> node_caches;
  // Node i's choices per input dims, for the nodes whose choice depends on them (above);
  // `kernels` stays null for those.
  std::unique_ptr<ShapeChoices[]> shape_choices;
  std::atomic<uint64_t> runs{0};
};

struct PlanCacheStats {
  size_t capacity = 0;
  size_t size = 0;           // signatures cached now
  uint64_t prepared = 0;     // runs that had to prepare a plan (misses)
  uint64_t reused = 0;       // runs that found their plan (hits)
  uint64_t evicted = 0;
  uint64_t fresh_buffers = 0;   // over the cached plans: heap allocations ...
  uint64_t reused_buffers = 0;  // ... and allocations served by recycling
  // Arenas of the cached plans (runtime/arena.h): how many, their planned bytes, requests
  // given their planned place and requests that went to the buffer pool during arena runs.
  size_t arenas = 0;
  size_t arena_bytes = 0;
  uint64_t arena_served = 0;
  uint64_t arena_fallbacks = 0;
  std::string arena_not_made;  // why the most recent plan without an arena has none
};

class PlanCache {
 public:
  PlanCache(size_t capacity, size_t num_nodes) : capacity_(capacity), num_nodes_(num_nodes) {}

  // The plan for `signature`, prepared (and the LRU entry evicted if full) when absent;
  // `*prepared` says which happened.
  std::shared_ptr<PreparedPlan> acquire(const std::string& signature, bool* prepared);
  PlanCacheStats stats() const;

 private:
  using Lru = std::list<std::shared_ptr<PreparedPlan>>;  // most recent first
  const size_t capacity_;
  const size_t num_nodes_;
  mutable std::mutex mu_;
  Lru lru_;
  std::unordered_map<std::string, Lru::iterator> index_;
  uint64_t prepared_ = 0, reused_ = 0, evicted_ = 0;
};

}  // namespace gearbox
