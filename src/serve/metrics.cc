// Prometheus exposition of the serving metrics.
#include "serve/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/strings.h"
#include "device/device.h"
#include "device/memory_pool.h"

namespace gearbox::serve {
namespace {

// Latency buckets from 0.5 ms to 10 s: a batch-1 MobileNetV2 takes milliseconds, a BERT
// batch seconds.
std::vector<double> latency_buckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

// Utilization is reported over this window (the alert rule looks at 10 minutes of it).
constexpr double kUtilizationWindowSeconds = 60;

std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  return fmt::format("{}", v);
}

void family(std::string* out, const char* name, const char* type, const char* help) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void sample(std::string* out, const std::string& name, const std::string& labels, double v) {
  *out += labels.empty() ? fmt::format("{} {}\n", name, num(v)) : fmt::format("{}{{{}}} {}\n", name, labels, num(v));
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

double now_seconds() { return static_cast<double>(steady_ns()) * 1e-9; }

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1) {}

void Histogram::observe(double v) {
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& labels, std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    std::string le = i < bounds_.size() ? num(bounds_[i]) : "+Inf";
    *out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, le, cumulative);
  }
  *out += fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, labels, num(sum_), name, labels, count_);
}

ModelMetrics::ModelMetrics(std::string model, std::string version, std::string device, int workers)
    : labels(fmt::format("model=\"{}\",version=\"{}\",device=\"{}\"", escape_prometheus_label(model),
                         escape_prometheus_label(version), escape_prometheus_label(device))),
      queue_seconds(latency_buckets()),
      compute_seconds(latency_buckets()),
      request_seconds(latency_buckets()),
      batch_size({1, 2, 4, 8, 16, 32, 64, 128}) {
  for (int i = 0; i < std::max(1, workers); ++i) running_since_ns_.push_back(std::make_unique<std::atomic<int64_t>>(0));
}

void ModelMetrics::run_started(int worker) { running_since_ns_[worker]->store(steady_ns()); }

void ModelMetrics::run_finished(int worker) {
  int64_t since = running_since_ns_[worker]->exchange(0);
  if (since > 0) busy_ns_ += static_cast<uint64_t>(steady_ns() - since);
}

double ModelMetrics::busy_seconds() const {
  int64_t now = steady_ns();
  double s = static_cast<double>(busy_ns_.load()) * 1e-9;
  for (const auto& r : running_since_ns_) {
    int64_t since = r->load();
    if (since > 0) s += static_cast<double>(now - since) * 1e-9;
  }
  return s;
}

void ModelMetrics::sample_utilization() {
  std::lock_guard<std::mutex> lock(window_mu_);
  double now = now_seconds();
  window_.emplace_back(now, busy_seconds());
  while (window_.size() > 2 && now - window_[1].first >= kUtilizationWindowSeconds) window_.pop_front();
}

double ModelMetrics::utilization() const {
  std::lock_guard<std::mutex> lock(window_mu_);
  if (window_.size() < 2) return 0;
  double wall = window_.back().first - window_.front().first;
  if (wall <= 0) return 0;
  double u = (window_.back().second - window_.front().second) / (wall * workers());
  return std::clamp(u, 0.0, 1.0);
}

Metrics::Metrics() : start_(std::chrono::steady_clock::now()), tick_thread_([this] { ticker(); }) {}

Metrics::~Metrics() {
  {
    std::lock_guard<std::mutex> lock(tick_mu_);
    stop_ = true;
  }
  tick_cv_.notify_all();
  tick_thread_.join();
}

void Metrics::ticker() {
  std::unique_lock<std::mutex> lock(tick_mu_);
  while (!stop_) {
    {
      std::lock_guard<std::mutex> models_lock(models_mu_);
      for (auto& m : models_) m->sample_utilization();
    }
    tick_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
  }
}

ModelMetrics& Metrics::add_model(const std::string& model, const std::string& version, const std::string& device,
                                 int workers) {
  std::lock_guard<std::mutex> lock(models_mu_);
  models_.push_back(std::make_unique<ModelMetrics>(model, version, device, workers));
  models_.back()->sample_utilization();
  return *models_.back();
}

void Metrics::record_http_response(int status) {
  std::lock_guard<std::mutex> lock(http_mu_);
  ++http_responses_[status];
}

std::string Metrics::render() const {
  std::string out;
  std::lock_guard<std::mutex> lock(models_mu_);
  auto per_model = [&](const char* name, const char* type, const char* help, auto&& value) {
    family(&out, name, type, help);
    for (const auto& m : models_) sample(&out, name, m->labels, value(*m));
  };
  family(&out, "gearbox_inference_requests_total", "counter",
         "Inference requests answered, by outcome (success: outputs returned; failure: an error response)");
  for (const auto& m : models_) {
    sample(&out, "gearbox_inference_requests_total", m->labels + ",outcome=\"success\"",
           static_cast<double>(m->success.load()));
    sample(&out, "gearbox_inference_requests_total", m->labels + ",outcome=\"failure\"",
           static_cast<double>(m->failure.load()));
  }
  per_model("gearbox_inference_samples_total", "counter",
            "Samples inferred (rows along the batch dimension; 1 per request for unbatched models); rate() gives "
            "inferences per second",
            [](const ModelMetrics& m) { return static_cast<double>(m.samples.load()); });
  per_model("gearbox_inference_batches_total", "counter", "Model runs (one per merged batch)",
            [](const ModelMetrics& m) { return static_cast<double>(m.batches.load()); });
  per_model("gearbox_inference_in_flight_requests", "gauge", "Inference requests received and not yet answered",
            [](const ModelMetrics& m) { return static_cast<double>(m.in_flight.load()); });
  per_model("gearbox_inference_queued_requests", "gauge",
            "Inference requests waiting for a worker (at most --max-queue; more are answered 503 SERVE_QUEUE_FULL)",
            [](const ModelMetrics& m) { return static_cast<double>(m.queued.load()); });
  auto histogram = [&](const char* name, const char* help, const Histogram ModelMetrics::*h) {
    family(&out, name, "histogram", help);
    for (const auto& m : models_) ((*m).*h).render(name, m->labels, &out);
  };
  histogram("gearbox_inference_queue_duration_seconds",
            "Time a request waited for a worker (and for its batch to fill) before its model run started",
            &ModelMetrics::queue_seconds);
  histogram("gearbox_inference_compute_duration_seconds", "Duration of the model run that served a request",
            &ModelMetrics::compute_seconds);
  histogram("gearbox_inference_request_duration_seconds",
            "Whole request time in the server: parsing, queue, compute and encoding", &ModelMetrics::request_seconds);
  histogram("gearbox_inference_batch_size", "Samples per model run (dynamic batching merges requests)",
            &ModelMetrics::batch_size);
  per_model("gearbox_compute_busy_seconds_total", "counter", "Time the model's workers spent running the model",
            [](const ModelMetrics& m) { return m.busy_seconds(); });
  per_model("gearbox_compute_workers", "gauge", "Workers that run the model concurrently",
            [](const ModelMetrics& m) { return static_cast<double>(m.workers()); });
  per_model("gearbox_compute_utilization_ratio", "gauge",
            "Fraction of the workers' time spent running the model over the last 60 s (0..1)",
            [](const ModelMetrics& m) { return m.utilization(); });

  family(&out, "gearbox_http_responses_total", "counter", "HTTP responses of the inference port by status code");
  {
    std::lock_guard<std::mutex> http_lock(http_mu_);
    for (const auto& [status, n] : http_responses_)
      sample(&out, "gearbox_http_responses_total", fmt::format("code=\"{}\"", status), static_cast<double>(n));
  }
  // The device memory pools: sessions allocate their tensors from their device's pool
  // (runtime/buffer_pool.h; the server's sessions use the CPU device's), so these describe the
  // models' memory: live intermediates and outputs plus the blocks prepared plans keep cached.
  struct PoolSample {
    std::string labels;
    device::PoolStats stats;
  };
  std::vector<PoolSample> pools;
  for (device::Device* d : device::devices())
    if (auto pool = d->pool(); pool.ok())
      pools.push_back({fmt::format("device=\"{}\"", escape_prometheus_label(d->name())), (*pool)->stats()});
  auto per_pool = [&](const char* name, const char* type, const char* help, auto&& value) {
    family(&out, name, type, help);
    for (const auto& p : pools) sample(&out, name, p.labels, static_cast<double>(value(p.stats)));
  };
  per_pool("gearbox_device_memory_pool_capacity_bytes", "gauge", "Capacity of the device memory pool",
           [](const device::PoolStats& s) { return s.capacity; });
  per_pool("gearbox_device_memory_pool_used_bytes", "gauge",
           "Bytes of the device memory pool in allocated blocks (tensors of runs, outputs held, plans' cached buffers)",
           [](const device::PoolStats& s) { return s.used; });
  per_pool("gearbox_device_memory_pool_free_bytes", "gauge", "Bytes of the device memory pool not allocated",
           [](const device::PoolStats& s) { return s.free; });
  per_pool("gearbox_device_memory_pool_largest_free_block_bytes", "gauge",
           "The largest block one allocation can get from the device memory pool now",
           [](const device::PoolStats& s) { return s.largest_free; });
  per_pool("gearbox_device_memory_thread_scratch_bytes", "gauge",
           "Bytes of kernels' per-thread scratch buffers (packing panels, work space), process-wide and held outside "
           "the pool: a model needs the pool's used bytes plus these",
           [](const device::PoolStats& s) { return s.thread_scratch; });
  per_pool("gearbox_device_memory_pool_used_span_bytes", "gauge",
           "From the start of the device memory pool to the end of its highest live block (what fragmentation is "
           "measured over)",
           [](const device::PoolStats& s) { return s.used_span; });
  per_pool(
      "gearbox_device_memory_pool_fragmentation_ratio", "gauge",
      "1 - largest free block / free bytes, both counted inside the pool's used span (start of the pool to the end "
      "of its highest live block); 0 when nothing is live or the span has no hole. An almost empty pool reads ~0",
      [](const device::PoolStats& s) { return s.fragmentation; });
  per_pool("gearbox_device_memory_pool_peak_used_bytes", "gauge",
           "The most bytes the device memory pool has had in use",
           [](const device::PoolStats& s) { return s.peak_used; });
  per_pool("gearbox_device_memory_pool_allocation_failures_total", "counter",
           "Allocations the device memory pool refused (POOL_EXHAUSTED, POOL_FRAGMENTED)",
           [](const device::PoolStats& s) { return s.failed_count; });
  family(&out, "gearbox_process_resident_memory_bytes", "gauge", "Resident set size of the server process");
  if (size_t rss = device::process_resident_bytes())
    sample(&out, "gearbox_process_resident_memory_bytes", "", static_cast<double>(rss));
  family(&out, "gearbox_system_memory_total_bytes", "gauge", "Physical memory of the machine (MemTotal)");
  family(&out, "gearbox_system_memory_available_bytes", "gauge",
         "Memory available for new allocations without swapping (MemAvailable)");
  if (device::SystemMemory mem = device::system_memory(); mem.total != 0) {
    sample(&out, "gearbox_system_memory_total_bytes", "", static_cast<double>(mem.total));
    sample(&out, "gearbox_system_memory_available_bytes", "", static_cast<double>(mem.available));
  }
  family(&out, "gearbox_cpu_temperature_celsius", "gauge",
         "CPU temperature per sensor (hwmon or thermal zone); no samples where the machine exposes none");
  for (const auto& t : device::temperatures())
    sample(&out, "gearbox_cpu_temperature_celsius", fmt::format("sensor=\"{}\"", escape_prometheus_label(t.sensor)),
           t.celsius);
  family(&out, "gearbox_uptime_seconds", "gauge", "Seconds since the server started");
  sample(&out, "gearbox_uptime_seconds", "",
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  return out;
}

}  // namespace gearbox::serve
