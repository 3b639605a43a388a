// RunOptions::check (the errors a stopped run returns) and the calling thread's run options.
#include "base/run_options.h"

namespace gearbox {

namespace {
thread_local const RunOptions* t_run_options = nullptr;
}  // namespace

const RunOptions* current_run_options() { return t_run_options; }

RunOptionsScope::RunOptionsScope(const RunOptions* options) : previous_(t_run_options) { t_run_options = options; }

RunOptionsScope::~RunOptionsScope() { t_run_options = previous_; }

Status RunOptions::check() const {
  if (terminate.cancelled())
    return make_error(ErrorCode::RUN_CANCELLED, "the run was cancelled: its terminate flag was set");
  if (deadline) {
    const Clock::time_point now = Clock::now();
    if (now >= *deadline) {
      const double late_ms = std::chrono::duration<double, std::milli>(now - *deadline).count();
      return make_error(ErrorCode::RUN_DEADLINE_EXCEEDED, "the run did not finish before its deadline (stopped ",
                        static_cast<int64_t>(late_ms + 0.5), " ms after it)");
    }
  }
  return Status::OK();
}

}  // namespace gearbox
