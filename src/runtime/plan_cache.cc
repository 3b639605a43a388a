// PlanCache: LRU of prepared plans by shape signature. See plan_cache.h.
#include "runtime/plan_cache.h"

namespace gearbox {

std::shared_ptr<PreparedPlan> PlanCache::acquire(const std::string& signature, bool* prepared) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(signature);
  if (it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);  // now the most recent
    ++reused_;
    *prepared = false;
    return lru_.front();
  }
  ++prepared_;
  *prepared = true;
  auto plan = std::make_shared<PreparedPlan>(signature, num_nodes_);
  if (capacity_ == 0) return plan;
  if (lru_.size() == capacity_) {
    index_.erase(lru_.back()->signature);
    lru_.pop_back();  // a run still using it keeps it alive until it ends
    ++evicted_;
  }
  lru_.push_front(plan);
  index_[signature] = lru_.begin();
  return plan;
}

PlanCacheStats PlanCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  PlanCacheStats s;
  s.capacity = capacity_;
  s.size = lru_.size();
  s.prepared = prepared_;
  s.reused = reused_;
  s.evicted = evicted_;
  for (const auto& plan : lru_) {
    BufferPoolStats b = plan->buffers.stats();
    s.fresh_buffers += b.fresh;
    s.reused_buffers += b.reused;
    if (!plan->arena_ready.load(std::memory_order_acquire)) continue;
    if (plan->arena) {
      ArenaStats a = plan->arena->stats();
      ++s.arenas;
      s.arena_bytes += a.planned_bytes;
      s.arena_served += a.served;
      s.arena_fallbacks += a.fallback_requests;
    } else if (s.arena_not_made.empty()) {
      s.arena_not_made = plan->arena_why;
    }
  }
  return s;
}

}  // namespace gearbox
