// Profiler records. See profiler.h.
#include "runtime/profiler.h"

#include <algorithm>
#include <thread>

namespace gearbox {

uint32_t Profiler::thread_id() {
  std::lock_guard<std::mutex> lock(mu_);
  auto me = std::this_thread::get_id();
  auto it = std::find(threads_.begin(), threads_.end(), me);
  if (it != threads_.end()) return static_cast<uint32_t>(it - threads_.begin());
  threads_.push_back(me);
  return static_cast<uint32_t>(threads_.size() - 1);
}

int Profiler::begin_run() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_run_++;
}

void Profiler::end_run(int run, int64_t begin_ns) {
  uint32_t tid = thread_id();
  int64_t end = now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  runs_.push_back({run, tid, begin_ns, end});
}

void Profiler::add(OpRecord r) {
  std::lock_guard<std::mutex> lock(mu_);
  ops_.push_back(std::move(r));
}

std::vector<OpRecord> Profiler::ops() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ops_;
}

std::vector<RunRecord> Profiler::runs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runs_;
}

}  // namespace gearbox
