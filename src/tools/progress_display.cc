// ConsoleProgress: the bar and the plain lines (see progress_display.h).
#include "tools/progress_display.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace gearbox::cli {

namespace {
constexpr int kBarWidth = 28;
constexpr auto kRedrawEvery = std::chrono::milliseconds(100);

// "1.2 GB", "640 MB", "14": counts of bytes read as bytes when the total is large.
std::string amount(uint64_t n, uint64_t total) {
  if (total < (uint64_t(1) << 20)) return std::to_string(n);
  return fmt::format("{:.1f} MB", static_cast<double>(n) / (1 << 20));
}
}  // namespace

ConsoleProgress::ConsoleProgress(std::string task, bool terminal, std::FILE* out)
    : task_(std::move(task)), terminal_(terminal), out_(out) {}

ConsoleProgress::~ConsoleProgress() { finish(); }

bool ConsoleProgress::on_terminal() {
  const char* term = std::getenv("TERM");
  return isatty(STDERR_FILENO) == 1 && !(term && std::strcmp(term, "dumb") == 0);
}

void ConsoleProgress::begin(std::string_view name, uint64_t total) {
  finish();
  phase_ = name;
  total_ = total;
  done_ = 0;
  phase_start_ = Clock::now();
  running_ = true;
  draw(true);
}

void ConsoleProgress::advance(uint64_t done) {
  done_ = done;
  draw(false);
}

void ConsoleProgress::finish() {
  if (!running_) return;
  running_ = false;
  const double s = std::chrono::duration<double>(Clock::now() - phase_start_).count();
  std::string line = fmt::format("{}: {:<14} {:>6.2f} s", task_, phase_, s);
  if (total_ > 0) line += fmt::format("  ({} of {})", amount(done_, total_), amount(total_, total_));
  // On a terminal the finished line replaces the bar ("\r" + clear to end of line).
  std::fputs(fmt::format("{}{}\n", terminal_ ? "\r\033[K" : "", line).c_str(), out_);
  std::fflush(out_);
}

void ConsoleProgress::draw(bool force) {
  if (!terminal_ || !running_) return;
  const auto now = Clock::now();
  if (!force && now - last_draw_ < kRedrawEvery) return;
  last_draw_ = now;
  const double s = std::chrono::duration<double>(now - phase_start_).count();
  std::string line = fmt::format("\r\033[K{}: {:<14} ", task_, phase_);
  if (total_ > 0) {
    const double f = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
    std::string bar(kBarWidth, '.');
    std::fill_n(bar.begin(), static_cast<int>(f * kBarWidth), '#');
    line += fmt::format("[{}] {:>3.0f}%  {} of {}  ", bar, 100 * f, amount(done_, total_), amount(total_, total_));
  }
  line += fmt::format("{:.1f} s", s);
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
}

}  // namespace gearbox::cli
