// Arena: planned places for a plan's intermediates in one device-pool range. See arena.h.
#include "runtime/arena.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base/logging.h"
#include "device/memory_pool.h"
#include "runtime/buffer_pool.h"

namespace gearbox {

// What the handed-out places' deleters share with the arena: the block and the live places.
// Kept alive by every live place, so tensors may outlive the arena (and the session).
struct Arena::State {
  std::mutex mu;
  uint8_t* block = nullptr;
  device::MemoryPool* pool = nullptr;  // null: the block is a heap block
  std::vector<Place> live;              // places held by live tensors
  ArenaStats stats;
  // The current run's (one at a time: leased).
  std::atomic<bool> leased{false};
  BufferPool* fallback = nullptr;
  int omp_level = 0;               // the OpenMP level the run's scope was opened at
  size_t node = SIZE_MAX;          // main-graph node running now
  std::vector<bool> served;        // the current node's places already given out
  ~State() {
    if (!block) return;
    if (pool)
      pool->deallocate(block);
    else
      std::free(block);
  }
  bool overlaps_live(const Place& p) const {
    for (const Place& q : live)
      if (q.offset < p.offset + p.bytes && p.offset < q.offset + q.bytes) return true;
    return false;
  }
  void release(size_t offset) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = std::find_if(live.begin(), live.end(), [&](const Place& q) { return q.offset == offset; });
    if (it != live.end()) live.erase(it);
  }
};

std::shared_ptr<Arena> Arena::create(const Graph& g, const std::vector<Dims>& input_dims, device::MemoryPool* pool,
                                     std::string* why) {
  for (const auto& n : g.nodes) {
    bool has_subgraph = false;
    for_each_subgraph(*n, [&](const Graph&) { has_subgraph = true; });
    if (has_subgraph) {
      // Its body's allocations run inside the node and are not planned at this level.
      *why = "node '" + n->name + "' (" + n->op_type + ") holds a subgraph";
      return nullptr;
    }
  }
  MemoryPlanOptions o;
  o.as_executed = true;
  // The signature binds the inputs' symbolic dims.
  for (size_t i = 0; i < g.inputs.size() && i < input_dims.size(); ++i) {
    const Shape& s = g.inputs[i]->type.shape;
    if (!s.ranked || s.dims.size() != input_dims[i].size()) continue;
    for (size_t d = 0; d < s.dims.size(); ++d)
      if (!s.dims[d].known() && !s.dims[d].symbol.empty()) o.dim_values[s.dims[d].symbol] = input_dims[i][d];
  }
  std::shared_ptr<Arena> a(new Arena());
  a->plan_ = plan_memory(g, o);
  if (!a->plan_.made()) {
    *why = a->plan_.not_made;
    return nullptr;
  }
  if (a->plan_.placements.empty() || a->plan_.planned_bytes == 0) {
    *why = "graph '" + g.name + "' has no intermediate to place";
    return nullptr;
  }
  std::unordered_map<const Node*, size_t> index;
  for (size_t i = 0; i < g.nodes.size(); ++i) index[g.nodes[i].get()] = i;
  a->places_.resize(g.nodes.size());
  for (const BufferPlacement& p : a->plan_.placements) {
    // A view's or in-place output's place is its input's: nothing is allocated for it.
    if (p.in_place_of || !p.value->producer) continue;
    a->places_[index.at(p.value->producer)].push_back({p.offset, p.bytes});
  }
  a->state_ = std::make_shared<State>();
  State& st = *a->state_;
  st.pool = pool;
  if (pool) {
    Result<void*> r = pool->allocate_range(a->plan_.planned_bytes);
    if (!r.ok()) {
      *why = "the device pool has no range of the planned " + device::format_bytes(a->plan_.planned_bytes) + ": " +
             r.status().message();
      return nullptr;
    }
    st.block = static_cast<uint8_t*>(r.value());
  } else {
    st.block = static_cast<uint8_t*>(std::aligned_alloc(kTensorAlignment, a->plan_.planned_bytes));
    if (!st.block) {
      *why = "no heap block of " + device::format_bytes(a->plan_.planned_bytes);
      return nullptr;
    }
  }
  st.stats.planned_bytes = a->plan_.planned_bytes;
  for (const auto& node_places : a->places_) st.stats.placed_values += node_places.size();
  GBX_LOG_DEBUG("MEM_ALLOC", "graph '{}': arena of {} for {} values", g.name,
                device::format_bytes(a->plan_.planned_bytes), st.stats.placed_values);
  return a;
}

Arena::~Arena() = default;

Arena::Lease Arena::lease(BufferPool* fallback) {
  State& st = *state_;
  if (st.leased.exchange(true, std::memory_order_acq_rel)) {
    std::lock_guard<std::mutex> lock(st.mu);
    ++st.stats.busy_runs;
    return Lease();
  }
  std::lock_guard<std::mutex> lock(st.mu);
  st.fallback = fallback;
  st.omp_level = omp_get_level();
  st.node = SIZE_MAX;
  ++st.stats.runs;
  return Lease(this);
}

Arena::Lease::~Lease() {
  if (!arena_) return;
  State& st = *arena_->state_;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.node = SIZE_MAX;
    st.fallback = nullptr;
  }
  st.leased.store(false, std::memory_order_release);
}

void Arena::begin_node(size_t index) {
  State& st = *state_;
  std::lock_guard<std::mutex> lock(st.mu);
  st.node = index;
  st.served.assign(index < places_.size() ? places_[index].size() : 0, false);
}

std::shared_ptr<void> Arena::acquire(size_t bytes, bool zero) {
  State& st = *state_;
  BufferPool* fallback = nullptr;
  if (omp_get_level() == st.omp_level) {
    std::unique_lock<std::mutex> lock(st.mu);
    fallback = st.fallback;
    if (st.node < places_.size()) {
      const auto& places = places_[st.node];
      for (size_t k = 0; k < places.size(); ++k) {
        const Place& p = places[k];
        if (st.served[k] || p.bytes != bytes || st.overlaps_live(p)) continue;
        st.served[k] = true;
        st.live.push_back(p);
        ++st.stats.served;
        lock.unlock();
        void* ptr = st.block + p.offset;
        if (zero) std::memset(ptr, 0, bytes);
        return std::shared_ptr<void>(ptr, [state = state_, offset = p.offset](void*) { state->release(offset); });
      }
    }
    ++st.stats.fallback_requests;
  } else {
    std::lock_guard<std::mutex> lock(st.mu);
    fallback = st.fallback;
  }
  if (fallback) return fallback->acquire(bytes, zero);
  return heap_buffer(bytes, zero);
}

ArenaStats Arena::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

}  // namespace gearbox
