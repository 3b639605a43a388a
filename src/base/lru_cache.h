// A string-keyed LRU map of shared values, guarded by one mutex: what the engines keep per
// process (cpu.dnnl's primitives and reordered weights, cpu.simd's packed GEMM weights).
// Values are shared_ptr so that a reader keeps an entry alive after it is evicted.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace gearbox {

template <typename V>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity) {}

  // The value under key (now the most recently used), or nullptr.
  std::shared_ptr<V> get(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }
  // Inserts or replaces; evicts the least recently used entries beyond the capacity.
  void put(const std::string& key, std::shared_ptr<V> v) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      it->second->second = std::move(v);
      order_.splice(order_.begin(), order_, it->second);
      return;
    }
    order_.emplace_front(key, std::move(v));
    map_[key] = order_.begin();
    while (order_.size() > capacity_) {
      map_.erase(order_.back().first);
      order_.pop_back();
    }
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.size();
  }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<V>>;
  size_t capacity_;
  std::mutex mu_;
  std::list<Entry> order_;
  std::unordered_map<std::string, typename std::list<Entry>::iterator> map_;
};

}  // namespace gearbox
