// Serving metrics in the Prometheus text exposition format (version 0.0.4): per-model request
// counters, queue/compute/request latency histograms, batch sizes, in-flight requests and
// compute utilization, plus process and system vital signs read from /proc and /sys.
//
// Writers (request threads, workers) only touch atomics or a histogram's own mutex; render()
// takes a consistent-enough snapshot for a scrape.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gearbox::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  // Appends NAME_bucket/_sum/_count lines; `labels` is `model="m",version="1"` (no braces).
  void render(const std::string& name, const std::string& labels, std::string* out) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// One served model's metrics.
struct ModelMetrics {
  ModelMetrics(std::string model, std::string version, std::string device, int workers);

  std::string labels;  // model="...",version="...",device="..."
  std::atomic<uint64_t> success{0}, failure{0}, samples{0}, batches{0};
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> queued{0};  // waiting in the model's queue for a worker
  Histogram queue_seconds, compute_seconds, request_seconds, batch_size;

  // Compute busy time of the workers: finished runs add to busy_ns; running ones are counted
  // from their start, so a long run shows up while it runs.
  void run_started(int worker);
  void run_finished(int worker);
  double busy_seconds() const;  // total since start, running runs included
  int workers() const { return static_cast<int>(running_since_ns_.size()); }

  // Utilization over the last window (sampled by Metrics' ticker): busy time / (wall * workers).
  void sample_utilization();
  double utilization() const;

 private:
  std::atomic<uint64_t> busy_ns_{0};
  std::vector<std::unique_ptr<std::atomic<int64_t>>> running_since_ns_;  // 0 when idle
  mutable std::mutex window_mu_;
  std::deque<std::pair<double, double>> window_;  // (wall seconds, busy seconds)
};

class Metrics {
 public:
  Metrics();
  ~Metrics();
  ModelMetrics& add_model(const std::string& model, const std::string& version, const std::string& device, int workers);
  void record_http_response(int status);
  // The whole exposition, every family with HELP and TYPE (families whose source the
  // machine lacks, e.g. CPU temperature sensors, have no samples).
  std::string render() const;

 private:
  void ticker();

  mutable std::mutex models_mu_;
  std::vector<std::unique_ptr<ModelMetrics>> models_;
  mutable std::mutex http_mu_;
  std::map<int, uint64_t> http_responses_;
  std::chrono::steady_clock::time_point start_;
  std::mutex tick_mu_;
  std::condition_variable tick_cv_;
  bool stop_ = false;
  std::thread tick_thread_;
};

// Monotonic seconds, the clock every duration here is measured on.
double now_seconds();

}  // namespace gearbox::serve
