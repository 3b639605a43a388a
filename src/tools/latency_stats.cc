#include "tools/latency_stats.h"

#include <algorithm>
#include <numeric>

namespace gearbox::cli {

LatencyStats summarize_latency(std::vector<double> ms) {
  LatencyStats s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  s.min = ms.front();
  s.max = ms.back();
  s.median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  s.mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(n);
  s.p90 = ms[std::min(n - 1, static_cast<size_t>(0.9 * static_cast<double>(n - 1) + 0.5))];
  return s;
}

}  // namespace gearbox::cli
