// How the CLI shows a Progress (base/progress.h) on stderr, so stdout stays for results and
// --json: on a terminal, a bar for the running phase that is redrawn in place (about ten times a
// second at most) and one line per finished phase; elsewhere (a pipe, a log file, CI) only the
// plain lines, one per finished phase with its time:
//   compile: read            0.41 s
//   compile: passes          1.92 s  (14 of 14)
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "base/progress.h"

namespace gearbox::cli {

class ConsoleProgress final : public Progress {
 public:
  // `task` prefixes every line ("compile"); `terminal`: draw the bar (see on_terminal()).
  ConsoleProgress(std::string task, bool terminal, std::FILE* out = stderr);
  // Ends the last phase.
  ~ConsoleProgress() override;
  ConsoleProgress(const ConsoleProgress&) = delete;
  ConsoleProgress& operator=(const ConsoleProgress&) = delete;

  void begin(std::string_view name, uint64_t total = 0) override;
  void advance(uint64_t done) override;
  // Ends the running phase (the next begin() starts another).
  void finish();

  // True when stderr is a terminal that can redraw a line (not TERM=dumb).
  static bool on_terminal();

 private:
  using Clock = std::chrono::steady_clock;
  void draw(bool force);

  std::string task_, phase_;
  bool terminal_;
  std::FILE* out_;
  uint64_t total_ = 0, done_ = 0;
  Clock::time_point phase_start_, last_draw_;
  bool running_ = false;
};

}  // namespace gearbox::cli
