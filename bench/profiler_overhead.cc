// Profiler overhead: one Session, runs alternating without and with a Profiler attached, the
// same inputs; prints both medians and their ratio (with / without). Alternating in one
// process keeps machine noise out of the ratio as far as possible.
//
//   build/bench/gearbox_profiler_overhead MODEL.onnx [ROUNDS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "runtime/profiler.h"
#include "runtime/session.h"
#include "tools/model_inputs.h"

using namespace gearbox;

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.onnx [ROUNDS]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 10;
  auto session = Session::load(argv[1]);
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().to_string().c_str());
    return 1;
  }
  auto feeds = cli::load_inputs(**session, {}, /*random=*/true);
  if (!feeds.ok()) {
    std::fprintf(stderr, "%s\n", feeds.status().to_string().c_str());
    return 1;
  }
  auto time_run = [&](Profiler* p) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = (*session)->run(*feeds, p);
    auto t1 = std::chrono::steady_clock::now();
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().to_string().c_str());
      std::exit(1);
    }
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  };
  time_run(nullptr);  // warm-up: prepares the plan
  std::vector<double> off, on;
  Profiler profiler;
  for (int i = 0; i < rounds; ++i) {
    off.push_back(time_run(nullptr));
    on.push_back(time_run(&profiler));
  }
  const double m_off = median(off), m_on = median(on);
  std::printf("model %s, %d rounds alternating\n", argv[1], rounds);
  std::printf("median without profiler %.3f ms, with profiler %.3f ms, ratio %.4f (%zu op records)\n", m_off, m_on,
              m_on / m_off, profiler.ops().size());
  return 0;
}
