// Latency statistics over a command's timed runs (run, bench).
#pragma once

#include <vector>

namespace gearbox::cli {

struct LatencyStats {
  double min = 0, median = 0, mean = 0, p90 = 0, max = 0;
};

// Milliseconds per run -> statistics; p90 is the nearest rank on the sorted samples. All zero
// for no samples.
LatencyStats summarize_latency(std::vector<double> ms);

}  // namespace gearbox::cli
