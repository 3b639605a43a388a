// Buffer versions: one process-wide map from a modified buffer's address to its version.
#include "base/buffer_version.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace gearbox {
namespace {
// Leaked on purpose: kernels may look versions up during static destruction.
std::mutex& mu() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_map<const void*, uint64_t>& versions() {
  static auto* v = new std::unordered_map<const void*, uint64_t>;
  return *v;
}
// False until the first mark_modified(): a process that never updates a weight in place pays
// no lock on the caches' look-ups.
std::atomic<bool> g_any{false};
}  // namespace

uint64_t buffer_version(const Tensor& t) {
  if (!g_any.load(std::memory_order_acquire) || !t.raw()) return 0;
  std::lock_guard<std::mutex> lock(mu());
  auto it = versions().find(t.raw());
  return it == versions().end() ? 0 : it->second;
}

void mark_modified(const Tensor& t) {
  if (!t.raw()) return;
  std::lock_guard<std::mutex> lock(mu());
  ++versions()[t.raw()];
  g_any.store(true, std::memory_order_release);
}

}  // namespace gearbox
