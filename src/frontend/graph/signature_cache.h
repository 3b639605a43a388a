// What graph mode's runners (GraphFunction, GraphTrainStep) share: the signature a call is
// traced for, the Session made from a traced model, and a small LRU of one traced entry per
// signature.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gearbox/nn_graph.hpp"
#include "graph/ir.h"
#include "runtime/session.h"

namespace gbx::nn {

// The inputs' dtypes and shapes, a module's train/eval flag and the autocast level and dtype:
// each traces differently (the graph has static shapes, dropout and batch statistics, casts).
std::string input_signature(const std::vector<Tensor>& inputs, const Module* module);

// A Session for a traced model, with the options' engines, threads and disabled passes.
std::shared_ptr<const gearbox::Session> make_session(gearbox::Model model, const GraphOptions& options);

// One Entry per signature, the most recently used first; thread-safe.
template <class Entry>
class SignatureCache {
 public:
  // The entry for `signature`; on a miss `make()` traces it, under the lock, so a second
  // caller with the same new signature waits for this trace instead of tracing again.
  Entry get(const std::string& signature, size_t capacity, const std::function<Entry()>& make) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.begin();
    while (it != entries_.end() && it->first != signature) ++it;
    if (it != entries_.end()) {
      entries_.splice(entries_.begin(), entries_, it);
    } else {
      entries_.emplace_front(signature, make());
      ++misses_;
      while (entries_.size() > std::max<size_t>(capacity, 1)) entries_.pop_back();
    }
    return entries_.front().second;
  }
  size_t misses() const {
    std::lock_guard<std::mutex> lock(mu_);
    return misses_;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size();
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.clear();
  }

 private:
  mutable std::mutex mu_;
  std::list<std::pair<std::string, Entry>> entries_;
  size_t misses_ = 0;
};

}  // namespace gbx::nn
