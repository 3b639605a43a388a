// The frontend's random generator (see random.h). Not thread-safe, like torch's default
// generator used from several threads without a lock: seed and draw from one thread.
#include "frontend/random.h"

#include "gearbox/nn.hpp"

namespace gbx::nn {

std::mt19937_64& generator() {
  static std::mt19937_64 gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { generator().seed(seed); }

}  // namespace gbx::nn
