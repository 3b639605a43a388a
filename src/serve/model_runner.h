// ModelRunner: one served model. Requests are queued and run by a fixed set of worker threads;
// with dynamic batching, a worker merges queued requests whose inputs differ only in the first
// (symbolic) dimension into one model run of up to max_batch rows, and splits the outputs back.
// Queue time, compute time and batch sizes go to the model's metrics. Every run is given the
// request's deadline and the runner's cancel flag (base/run_options.h), so a request past its
// deadline or a shutdown past its grace period frees the worker within milliseconds.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/run_options.h"
#include "runtime/session.h"
#include "serve/metrics.h"

namespace gearbox::serve {

struct RunnerOptions {
  int workers = 1;               // model runs in flight at once
  int max_batch = 1;             // rows per merged run; 1 disables dynamic batching
  int64_t batch_timeout_us = 0;  // how long the first request of a batch waits for more
  // Seconds a request may take from its arrival (queue time included) before its run stops
  // with RUN_DEADLINE_EXCEEDED (504); 0: no limit. A request's Gearbox-Timeout header may
  // shorten it, never lengthen it.
  double request_timeout = 0;
  // Requests waiting for a worker at most; one more is refused at once with SERVE_QUEUE_FULL
  // (503 with Retry-After) rather than waiting behind them.
  int max_queue = 64;
};

struct InferOutcome {
  std::vector<Tensor> outputs;  // in the model's output order
  double queue_seconds = 0;
  double compute_seconds = 0;
  int64_t batch_rows = 0;  // rows of the model run that served the request
};

class ModelRunner {
 public:
  ModelRunner(std::string name, std::string version, std::unique_ptr<Session> session, RunnerOptions options,
              ModelMetrics* metrics);
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const Session& session() const { return *session_; }
  ModelMetrics& metrics() const { return *metrics_; }
  // True when the model's inputs all have a symbolic first dimension and max_batch > 1, until
  // a merged run shows that an output is not batched along dim 0 (then off for good).
  bool batching() const { return batching_.load(); }

  // Session::validate (names, dtypes, fixed dims, missing inputs) with the model's name, done
  // before a request is queued so that a bad request never joins a batch.
  Status check(const std::map<std::string, Tensor>& inputs) const;
  // Queues the request and blocks until it has run. SERVE_SHUTTING_DOWN after shutdown(),
  // SERVE_QUEUE_FULL when max_queue requests are already waiting.
  // `deadline`: when its run must have finished (RUN_DEADLINE_EXCEEDED after it; a request
  // still queued then fails without running); none: no limit.
  // `abandoned`: polled while the request waits or runs; once it returns true (the client hung
  // up) the request's run is cancelled (RUN_CANCELLED), so it frees its worker within
  // milliseconds. A request merged into a batch runs to the batch's end.
  Result<InferOutcome> infer(std::map<std::string, Tensor> inputs,
                             std::optional<RunOptions::Clock::time_point> deadline = std::nullopt,
                             const std::function<bool()>& abandoned = {});
  // The deadline of a request that arrived at `arrival`, given its Gearbox-Timeout (0: none):
  // the earlier of the model's request_timeout and the header's.
  std::optional<RunOptions::Clock::time_point> deadline_for(RunOptions::Clock::time_point arrival,
                                                            double header_timeout) const;
  // Stops the runs in flight and those queued with RUN_CANCELLED (the end of a shutdown's
  // grace period); safe from any thread, for good.
  void cancel_runs() { cancel_.cancel(); }
  // Runs what is queued, then stops the workers.
  void shutdown();

 private:
  struct Job {
    std::map<std::string, Tensor> inputs;
    int64_t rows = 0;       // first-dim size shared by every input; 0: not batchable
    std::string signature;  // dtypes and trailing dims: jobs merge only with equal ones
    double enqueued = 0;
    RunOptions run_options;  // the request's deadline and its own cancel flag (see infer())
    std::promise<Result<InferOutcome>> done;
  };
  using JobPtr = std::unique_ptr<Job>;

  void worker_loop(int worker);
  void collect_batch(std::unique_lock<std::mutex>& lock, std::vector<JobPtr>* batch);
  void run_jobs(std::vector<JobPtr>& batch, int worker);
  Result<std::vector<Tensor>> run_timed(const std::map<std::string, Tensor>& inputs, const RunOptions& run_options,
                                        int worker, double* seconds);
  void run_one(Job& job, int worker, double start);
  bool run_merged(std::vector<JobPtr>& batch, int worker, double start);

  std::string name_, version_;
  std::unique_ptr<Session> session_;
  RunnerOptions options_;
  ModelMetrics* metrics_;
  std::atomic<bool> batching_{false};
  CancelToken cancel_;  // cancel_runs(): merged runs check it, waiting requests pass it on to their own

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<JobPtr> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace gearbox::serve
