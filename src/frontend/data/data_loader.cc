// nn::TensorDataset and nn::DataLoader (include/gearbox/nn_data.hpp), and the two helpers they
// share with nn::DistributedSampler (src/frontend/parallel): seeded_permutation and index_rows.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

#include "frontend/tensor_impl.h"
#include "gearbox/nn_data.hpp"

namespace gbx::nn {

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> all(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::iota(all.begin(), all.end(), int64_t{0});
  if (all.size() < 2) return all;
  std::mt19937_64 gen(seed);
  for (uint64_t i = all.size() - 1; i > 0; --i) {
    // j uniform in [0, i] without modulo bias: redraw the values past the last whole multiple.
    const uint64_t range = i + 1, limit = UINT64_MAX - UINT64_MAX % range;
    uint64_t r;
    do r = gen();
    while (r >= limit);
    std::swap(all[i], all[r % range]);
  }
  return all;
}

Tensor index_rows(const Tensor& x, const std::vector<int64_t>& indices) {
  const gearbox::Tensor& v = value_of(x, "index_rows");
  if (v.rank() < 1)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "index_rows on ", gearbox::describe(v),
                                     ": needs at least one axis"));
  gearbox::Dims dims = v.dims();
  const int64_t rows = dims[0];
  const size_t row_bytes = rows == 0 ? 0 : v.nbytes() / static_cast<size_t>(rows);
  dims[0] = static_cast<int64_t>(indices.size());
  // Uninitialized: every byte is copied below.
  gearbox::Result<gearbox::Tensor> out = gearbox::Tensor::allocate_uninitialized(v.dtype(), dims);
  throw_if_error(out.status());
  char* dst = static_cast<char*>(out.value().mutable_raw());
  const char* src = static_cast<const char*>(v.raw());
  for (size_t k = 0; k < indices.size(); ++k) {
    const int64_t i = indices[k];
    if (i < 0 || i >= rows)
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "index_rows: index ", i,
                                       " out of range for ", gearbox::describe(v)));
    std::memcpy(dst + k * row_bytes, src + static_cast<size_t>(i) * row_bytes, row_bytes);
  }
  return wrap(std::move(out).value());
}

// ---- TensorDataset -----------------------------------------------------------------------

namespace {

// "tensor 1 (y.npy, int64[9])", or "tensor 1 (int64[9])" without file names.
std::string name_of(size_t i, const Tensor& t, const std::vector<std::string>& names) {
  std::ostringstream s;
  s << "tensor " << i << " (";
  if (i < names.size()) s << names[i] << ", ";
  s << (t.defined() ? t.describe() : std::string("undefined")) << ")";
  return s.str();
}

}  // namespace

TensorDataset::TensorDataset(std::vector<Tensor> tensors) : TensorDataset(std::move(tensors), {}) {}

TensorDataset::TensorDataset(std::vector<Tensor> tensors, const std::vector<std::string>& names)
    : tensors_(std::move(tensors)) {
  if (tensors_.empty())
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT,
                                     "TensorDataset: no tensors; pass at least one (e.g. the inputs and the labels)"));
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    if (!t.defined() || t.rank() == 0)
      throw_status(
          gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "TensorDataset: ", name_of(i, t, names),
                              t.defined() ? " is a scalar" : " is undefined",
                              "; every tensor needs a first axis of samples (reshape a single sample to [1, ...])"));
  }
  size_ = tensors_[0].dim(0);
  for (size_t i = 1; i < tensors_.size(); ++i)
    if (tensors_[i].dim(0) != size_)
      throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH,
                                       "TensorDataset: ", name_of(i, tensors_[i], names), " has ", tensors_[i].dim(0),
                                       " samples on axis 0 but ", name_of(0, tensors_[0], names), " has ", size_,
                                       "; every tensor needs one row per sample: trim or re-export them so that "
                                       "their first dimensions agree"));
}

TensorDataset TensorDataset::from_npy(const std::vector<std::string>& paths) {
  std::vector<Tensor> tensors;
  tensors.reserve(paths.size());
  for (const std::string& p : paths) tensors.push_back(load_npy(p));
  return TensorDataset(std::move(tensors), paths);
}

std::vector<Tensor> TensorDataset::gather(const std::vector<int64_t>& indices) const {
  std::vector<Tensor> batch;
  batch.reserve(tensors_.size());
  for (const Tensor& t : tensors_) batch.push_back(index_rows(t, indices));
  return batch;
}

// ---- DataLoader --------------------------------------------------------------------------

namespace {

// One pass over the data set: the epoch's order and, with workers, the threads that assemble
// its batches ahead. Worker w assembles batches w, w + W, ... into its own queue, so batch k is
// always at the front of queue k % W when the consumer asks for it: the order is fixed by k
// alone, never by which thread is faster.
class Pass {
 public:
  Pass(const TensorDataset& data, const DataLoaderOptions& opt, int64_t epoch, int64_t batches)
      : data_(data), opt_(opt), batches_(batches) {
    if (opt.shuffle) {
      order_ = seeded_permutation(data.size(), opt.seed + static_cast<uint64_t>(epoch));
    } else {
      order_.resize(static_cast<size_t>(data.size()));
      std::iota(order_.begin(), order_.end(), int64_t{0});
    }
    const int64_t workers = std::min<int64_t>(opt.workers, batches);
    if (workers <= 0) return;
    workers_ = std::vector<Worker>(static_cast<size_t>(workers));
    try {
      for (int64_t w = 0; w < workers; ++w)
        workers_[static_cast<size_t>(w)].thread = std::thread([this, w] { work(w); });
    } catch (...) {
      stop();  // joins the threads that did start
      throw;
    }
  }
  ~Pass() { stop(); }
  Pass(const Pass&) = delete;
  Pass& operator=(const Pass&) = delete;

  // Batch `cursor_`, or nullopt after the last.
  std::optional<std::vector<Tensor>> next() {
    if (cursor_ >= batches_) return std::nullopt;
    const int64_t k = cursor_++;
    if (workers_.empty()) return assemble(k);
    Worker& w = workers_[static_cast<size_t>(k % static_cast<int64_t>(workers_.size()))];
    Slot slot;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [&] { return !w.queue.empty(); });
      slot = std::move(w.queue.front());
      w.queue.pop_front();
    }
    w.space.notify_one();
    if (slot.error) std::rethrow_exception(slot.error);
    return std::move(slot.batch);
  }

 private:
  struct Slot {
    std::vector<Tensor> batch;
    std::exception_ptr error;
  };
  struct Worker {
    std::deque<Slot> queue;  // at most opt_.prefetch
    std::condition_variable space;
    std::thread thread;
  };

  std::vector<Tensor> assemble(int64_t k) const {
    const int64_t begin = k * opt_.batch_size, end = std::min(begin + opt_.batch_size, data_.size());
    return data_.gather(std::vector<int64_t>(order_.begin() + begin, order_.begin() + end));
  }

  void work(int64_t w) {
    Worker& me = workers_[static_cast<size_t>(w)];
    const int64_t stride = static_cast<int64_t>(workers_.size());
    for (int64_t k = w; k < batches_; k += stride) {
      {
        // Wait for room first, so that no more than `prefetch` assembled batches wait per worker.
        std::unique_lock<std::mutex> lock(mu_);
        me.space.wait(lock, [&] { return stop_ || me.queue.size() < static_cast<size_t>(opt_.prefetch); });
        if (stop_) return;
      }
      Slot slot;
      try {
        slot.batch = assemble(k);
      } catch (...) {
        slot.error = std::current_exception();  // handed to the consumer at batch k
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        me.queue.push_back(std::move(slot));
      }
      ready_.notify_one();
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    for (Worker& w : workers_) w.space.notify_all();
    for (Worker& w : workers_)
      if (w.thread.joinable()) w.thread.join();
  }

  const TensorDataset& data_;
  const DataLoaderOptions& opt_;
  const int64_t batches_;
  std::vector<int64_t> order_;
  int64_t cursor_ = 0;
  std::vector<Worker> workers_;
  std::mutex mu_;
  std::condition_variable ready_;  // a worker queued a batch
  bool stop_ = false;
};

}  // namespace

struct DataLoader::Impl {
  Impl(TensorDataset d, const DataLoaderOptions& o) : data(std::move(d)), opt(o) {}
  TensorDataset data;
  DataLoaderOptions opt;
  int64_t batches = 0;
  int64_t next_epoch = 0;  // the epoch the next pass draws
  int64_t pass_epoch = 0;  // the epoch of `pass`
  std::unique_ptr<Pass> pass;

  void start_pass() {
    pass.reset();  // stops and joins the previous pass's workers first
    pass_epoch = next_epoch;
    pass = std::make_unique<Pass>(data, opt, pass_epoch, batches);
    next_epoch = pass_epoch + 1;
  }
};

DataLoader::DataLoader(TensorDataset dataset, DataLoaderOptions options)
    : impl_(std::make_unique<Impl>(std::move(dataset), options)) {
  const DataLoaderOptions& o = impl_->opt;
  if (o.batch_size < 1 || o.workers < 0 || o.prefetch < 1)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "DataLoader: batch_size ", o.batch_size,
                                     ", workers ", o.workers, ", prefetch ", o.prefetch,
                                     " (need batch_size >= 1, workers >= 0, prefetch >= 1)"));
  const int64_t n = impl_->data.size();
  impl_->batches = o.drop_remainder ? n / o.batch_size : (n + o.batch_size - 1) / o.batch_size;
}

DataLoader::~DataLoader() = default;
DataLoader::DataLoader(DataLoader&&) noexcept = default;
DataLoader& DataLoader::operator=(DataLoader&&) noexcept = default;

const TensorDataset& DataLoader::dataset() const { return impl_->data; }
const DataLoaderOptions& DataLoader::options() const { return impl_->opt; }
int64_t DataLoader::batches_per_epoch() const { return impl_->batches; }

void DataLoader::set_epoch(int64_t epoch) {
  if (epoch < 0)
    throw_status(
        gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "DataLoader::set_epoch(", epoch, "): need >= 0"));
  impl_->pass.reset();
  impl_->next_epoch = epoch;
}

int64_t DataLoader::epoch() const { return impl_->pass ? impl_->pass_epoch : impl_->next_epoch; }

std::optional<std::vector<Tensor>> DataLoader::next() {
  if (!impl_->pass) impl_->start_pass();
  std::optional<std::vector<Tensor>> batch = impl_->pass->next();
  if (!batch) impl_->pass.reset();  // the pass is over; the next call starts the next epoch
  return batch;
}

DataLoader::Iterator DataLoader::begin() {
  impl_->start_pass();
  return Iterator(this);
}

DataLoader::Iterator::Iterator(DataLoader* loader) : loader_(loader), batch_(loader->next()) {}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  batch_ = loader_->next();
  return *this;
}

}  // namespace gbx::nn
