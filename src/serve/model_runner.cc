// ModelRunner: request queue, workers and dynamic batching for one served model.
#include "serve/model_runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/logging.h"

namespace gearbox::serve {
namespace {

bool first_dim_symbolic(const IoInfo& io) {
  return io.type.kind == ValueType::Kind::Tensor && io.type.dtype != DType::String && io.type.shape.ranked &&
         io.type.shape.rank() >= 1 && !io.type.shape.dims[0].known();
}

// Rows [begin, begin + rows) of t along its first dimension, as a new tensor.
Result<Tensor> slice_rows(const Tensor& t, int64_t begin, int64_t rows) {
  Dims dims = t.dims();
  const size_t row_bytes = t.dim(0) ? t.nbytes() / static_cast<size_t>(t.dim(0)) : 0;
  dims[0] = rows;
  GBX_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate_uninitialized(t.dtype(), dims));
  if (row_bytes != 0 && rows > 0)
    std::memcpy(out.mutable_raw(), static_cast<const char*>(t.raw()) + row_bytes * begin, row_bytes * rows);
  return out;
}

}  // namespace

ModelRunner::ModelRunner(std::string name, std::string version, std::unique_ptr<Session> session, RunnerOptions options,
                         ModelMetrics* metrics)
    : name_(std::move(name)),
      version_(std::move(version)),
      session_(std::move(session)),
      options_(options),
      metrics_(metrics) {
  options_.workers = std::max(1, options_.workers);
  const auto& ins = session_->inputs();
  batching_ = options_.max_batch > 1 && !ins.empty() && std::all_of(ins.begin(), ins.end(), first_dim_symbolic);
  if (options_.max_batch > 1 && !batching_)
    GBX_LOG_INFO("SERVE", "model '{}': dynamic batching off (not every input has a symbolic first dimension)", name_);
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ModelRunner::~ModelRunner() { shutdown(); }

void ModelRunner::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_)
    if (w.joinable()) w.join();
}

Status ModelRunner::check(const std::map<std::string, Tensor>& inputs) const {
  return session_->validate(inputs).with_context("model '" + name_ + "': ");
}

std::optional<RunOptions::Clock::time_point> ModelRunner::deadline_for(RunOptions::Clock::time_point arrival,
                                                                       double header_timeout) const {
  double seconds = options_.request_timeout;
  if (header_timeout > 0 && (seconds <= 0 || header_timeout < seconds)) seconds = header_timeout;
  if (seconds <= 0) return std::nullopt;
  return arrival + std::chrono::duration_cast<RunOptions::Clock::duration>(std::chrono::duration<double>(seconds));
}

Result<InferOutcome> ModelRunner::infer(std::map<std::string, Tensor> inputs,
                                        std::optional<RunOptions::Clock::time_point> deadline,
                                        const std::function<bool()>& abandoned) {
  auto job = std::make_unique<Job>();
  job->run_options.deadline = deadline;
  const CancelToken terminate = job->run_options.terminate;  // this request's own flag
  if (batching_.load()) {
    int64_t rows = -1;
    for (const auto& io : session_->inputs()) {
      const Tensor& t = inputs.at(io.name);
      if (rows < 0) rows = t.dim(0);
      if (t.dim(0) != rows || rows < 1 || rows > options_.max_batch) {
        rows = 0;
        break;
      }
      job->signature +=
          std::string(dtype_name(t.dtype())) + to_string(Dims(t.dims().begin() + 1, t.dims().end())) + ";";
    }
    job->rows = std::max<int64_t>(rows, 0);
  }
  job->inputs = std::move(inputs);
  job->enqueued = now_seconds();
  auto done = job->done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_)
      return make_error(ErrorCode::SERVE_SHUTTING_DOWN, "model '", name_,
                        "' is draining its queue and takes no new requests");
    if (queue_.size() >= static_cast<size_t>(std::max(0, options_.max_queue)))
      return make_error(ErrorCode::SERVE_QUEUE_FULL, "model '", name_, "' has ", queue_.size(),
                        " requests waiting for a worker (--max-queue ", options_.max_queue, ")");
    queue_.push_back(std::move(job));
    ++metrics_->queued;
  }
  cv_.notify_all();
  // The run checks only its own flag; it is set here, within a tick, when the runner is
  // cancelled or the client has gone.
  while (done.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready)
    if (!terminate.cancelled() && (cancel_.cancelled() || (abandoned && abandoned()))) terminate.cancel();
  return done.get();
}

void ModelRunner::worker_loop(int worker) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping and drained
    std::vector<JobPtr> batch;
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
    --metrics_->queued;
    if (batching_.load() && batch[0]->rows > 0) collect_batch(lock, &batch);
    lock.unlock();
    run_jobs(batch, worker);
    lock.lock();
  }
}

// Adds compatible queued jobs to the batch until it holds max_batch rows or the first job has
// waited batch_timeout_us. Called with the lock held; waits release it.
void ModelRunner::collect_batch(std::unique_lock<std::mutex>& lock, std::vector<JobPtr>* batch) {
  const std::string& signature = (*batch)[0]->signature;
  int64_t rows = (*batch)[0]->rows;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(options_.batch_timeout_us) -
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(now_seconds() - (*batch)[0]->enqueued));
  for (;;) {
    for (auto it = queue_.begin(); it != queue_.end() && rows < options_.max_batch;) {
      Job& j = **it;
      if (j.rows > 0 && j.signature == signature && rows + j.rows <= options_.max_batch) {
        rows += j.rows;
        batch->push_back(std::move(*it));
        it = queue_.erase(it);
        --metrics_->queued;
      } else {
        ++it;
      }
    }
    if (rows >= options_.max_batch || stopping_ || std::chrono::steady_clock::now() >= deadline) return;
    cv_.wait_until(lock, deadline);
  }
}

Result<std::vector<Tensor>> ModelRunner::run_timed(const std::map<std::string, Tensor>& inputs,
                                                   const RunOptions& run_options, int worker, double* seconds) {
  metrics_->run_started(worker);
  double t0 = now_seconds();
  auto r = session_->run(inputs, run_options);
  *seconds = now_seconds() - t0;
  metrics_->run_finished(worker);
  metrics_->batches++;
  return r;
}

void ModelRunner::run_one(Job& job, int worker, double start) {
  double compute = 0;
  auto r = run_timed(job.inputs, job.run_options, worker, &compute);
  int64_t rows = job.rows > 0 ? job.rows : 1;
  metrics_->batch_size.observe(static_cast<double>(rows));
  if (!r.ok()) {
    job.done.set_value(r.status());
    return;
  }
  metrics_->samples += static_cast<uint64_t>(rows);
  InferOutcome out{std::move(r).value(), start - job.enqueued, compute, rows};
  job.done.set_value(std::move(out));
}

// One run over the concatenated inputs; false (nothing answered) when the run fails or an
// output's first dimension is not the batch, so the caller runs the jobs one by one and
// each request gets its own result or error. An unbatched output is a property of the model,
// not of the batch: batching is switched off for good then, so no later batch computes twice.
bool ModelRunner::run_merged(std::vector<JobPtr>& batch, int worker, double start) {
  int64_t rows = 0;
  for (const auto& j : batch) rows += j->rows;
  std::map<std::string, Tensor> merged;
  for (const auto& io : session_->inputs()) {
    const Tensor& first = batch[0]->inputs.at(io.name);
    Dims dims = first.dims();
    dims[0] = rows;
    auto t = Tensor::allocate_uninitialized(first.dtype(), dims);
    if (!t.ok()) return false;
    char* dst = static_cast<char*>(t->mutable_raw());
    for (const auto& j : batch) {
      const Tensor& part = j->inputs.at(io.name);
      if (part.nbytes()) std::memcpy(dst, part.raw(), part.nbytes());
      dst += part.nbytes();
    }
    merged.emplace(io.name, std::move(t).value());
  }
  // The merged run may take as long as the most patient request allows (none: no limit);
  // a request whose own deadline it then misses still gets its rows.
  RunOptions merged_options;
  merged_options.terminate = cancel_;
  for (const auto& j : batch) {
    if (!j->run_options.deadline) {
      merged_options.deadline.reset();
      break;
    }
    if (!merged_options.deadline || *j->run_options.deadline > *merged_options.deadline)
      merged_options.deadline = j->run_options.deadline;
  }
  double compute = 0;
  auto r = run_timed(merged, merged_options, worker, &compute);
  if (!r.ok()) {
    GBX_LOG_DEBUG("SERVE", "model '{}': merged run of {} rows failed ({}); running the requests one by one", name_,
                  rows, r.status().to_string());
    return false;
  }
  for (const Tensor& o : *r)
    if (o.rank() < 1 || o.dim(0) != rows) {
      if (batching_.exchange(false))
        GBX_LOG_INFO("SERVE",
                     "model '{}': dynamic batching off (output {} of a {}-row merged run is not batched "
                     "along dim 0); requests run one by one from now on",
                     name_, describe(o), rows);
      return false;
    }
  std::vector<std::vector<Tensor>> split(batch.size());
  int64_t begin = 0;
  for (size_t k = 0; k < batch.size(); ++k) {
    for (const Tensor& o : *r) {
      auto part = slice_rows(o, begin, batch[k]->rows);
      if (!part.ok()) return false;
      split[k].push_back(std::move(part).value());
    }
    begin += batch[k]->rows;
  }
  metrics_->batch_size.observe(static_cast<double>(rows));
  metrics_->samples += static_cast<uint64_t>(rows);
  for (size_t k = 0; k < batch.size(); ++k)
    batch[k]->done.set_value(InferOutcome{std::move(split[k]), start - batch[k]->enqueued, compute, rows});
  return true;
}

void ModelRunner::run_jobs(std::vector<JobPtr>& batch, int worker) {
  double start = now_seconds();
  if (batch.size() > 1 && run_merged(batch, worker, start)) return;
  for (auto& j : batch) run_one(*j, worker, now_seconds());
}

}  // namespace gearbox::serve
