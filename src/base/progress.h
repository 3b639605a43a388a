// Progress: how a long operation tells whoever waits for it what it is doing. The layer doing
// the work reports phases and units of work (gearbox compile: read, check, infer shapes, import,
// passes, plan, partition, pack weights, write); the tools layer decides how that looks (a bar on a
// terminal, plain lines otherwise: tools/progress_display.h). Options carry a Progress* that is
// null by default, so nobody pays when nobody listens.
#pragma once

#include <cstdint>
#include <string_view>

namespace gearbox {

class Progress {
 public:
  virtual ~Progress() = default;
  // Phase `name` begins, with `total` units of work (0: not counted); the previous phase ends.
  virtual void begin(std::string_view name, uint64_t total = 0) = 0;
  // `done` of the current phase's units are finished.
  virtual void advance(uint64_t done) = 0;
};

// The calls for a Progress* that may be null.
inline void progress_begin(Progress* p, std::string_view name, uint64_t total = 0) {
  if (p) p->begin(name, total);
}
inline void progress_advance(Progress* p, uint64_t done) {
  if (p) p->advance(done);
}

}  // namespace gearbox
