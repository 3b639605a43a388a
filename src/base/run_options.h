// RunOptions: what one run of a model is given besides its inputs -- a deadline and a
// terminate flag -- and the check the executor, the control-flow kernels and long kernels
// make to stop a run early (RUN_DEADLINE_EXCEEDED, RUN_CANCELLED).
//
//   RunOptions opts;
//   opts.deadline = RunOptions::after(0.3);            // 300 ms from now (steady clock)
//   std::thread watchdog([t = opts.terminate] { ...; t.cancel(); });  // from any thread
//   auto out = session->run(feeds, opts);              // RUN_CANCELLED once cancel() ran
//
// It lives in base because both layers that check it need it: the runtime (between nodes) and
// the kernels (Loop/Scan iterations, long kernels' outer loops). Kernels reach the options of
// the run they are part of through check_run_stop(): the executor installs them on the calling
// thread for the extent of the run (RunOptionsScope), the way kernels/kernel_options.h routes
// session options -- a kernel runs on the executor's thread outside its OpenMP regions. A
// check is one atomic load and one steady_clock read, so it is cheap enough between nodes and
// per outer iteration, but never inside an OpenMP region (a return cannot leave one).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>

#include "base/status.h"

namespace gearbox {

// A terminate flag shared by copies: set it from any thread and every run given a copy stops
// at its next check. Like ORT's RunOptions.terminate, it stays set until reset().
class CancelToken {
 public:
  CancelToken() : flag_(std::make_shared<std::atomic<bool>>(false)) {}
  void cancel() const { flag_->store(true, std::memory_order_release); }
  void reset() const { flag_->store(false, std::memory_order_release); }
  bool cancelled() const { return flag_->load(std::memory_order_acquire); }

 private:
  std::shared_ptr<std::atomic<bool>> flag_;
};

struct RunOptions {
  using Clock = std::chrono::steady_clock;
  // The run stops with RUN_DEADLINE_EXCEEDED at the first check after this time; none: no limit.
  std::optional<Clock::time_point> deadline;
  // The run stops with RUN_CANCELLED at the first check after it is set.
  CancelToken terminate;

  // `seconds` from now on the steady clock (what --timeout and the C API's timeout give).
  static Clock::time_point after(double seconds) {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  // OK while the run may go on; RUN_CANCELLED or RUN_DEADLINE_EXCEEDED once it must stop (the
  // flag wins when both hold: it was an explicit request).
  Status check() const;
  // The same as a bool, for a loop that returns its own error.
  bool stop_requested() const { return terminate.cancelled() || (deadline && Clock::now() >= *deadline); }
};

// The options of the run on the calling thread; null outside a run (a kernel test calling a
// kernel directly), where nothing stops.
const RunOptions* current_run_options();

// OK, or the stop error of the run on the calling thread: what Loop/Scan call per iteration
// and long kernels per outer iteration (the executor prefixes the node to the message).
inline Status check_run_stop() {
  const RunOptions* o = current_run_options();
  return o ? o->check() : Status::OK();
}

// Installs `options` (may be null) on the calling thread until destroyed; scopes nest (a
// subgraph's kernels see the same options). `options` must outlive the scope.
class RunOptionsScope {
 public:
  explicit RunOptionsScope(const RunOptions* options);
  ~RunOptionsScope();
  RunOptionsScope(const RunOptionsScope&) = delete;
  RunOptionsScope& operator=(const RunOptionsScope&) = delete;

 private:
  const RunOptions* previous_;
};

}  // namespace gearbox
