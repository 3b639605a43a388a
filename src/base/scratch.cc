// The process-wide count of kernel scratch bytes (base/scratch.h).
#include "base/scratch.h"

#include <atomic>

namespace gearbox {
namespace {
std::atomic<size_t> g_bytes{0};
std::atomic<size_t> g_peak{0};
}  // namespace

namespace scratch_detail {
void account(std::ptrdiff_t delta_bytes) {
  const size_t now = g_bytes.fetch_add(static_cast<size_t>(delta_bytes), std::memory_order_relaxed) +
                     static_cast<size_t>(delta_bytes);
  size_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}
}  // namespace scratch_detail

size_t thread_scratch_bytes() { return g_bytes.load(std::memory_order_relaxed); }
size_t thread_scratch_peak_bytes() { return g_peak.load(std::memory_order_relaxed); }

}  // namespace gearbox
