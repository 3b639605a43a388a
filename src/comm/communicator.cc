#include "comm/communicator.h"

#include <cstring>

#include "comm/group_stats.h"
#include "comm/trace.h"

namespace gearbox::comm {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Product:
      return "product";
  }
  return "?";
}

bool parse_reduce_op(const std::string& name, ReduceOp* op) {
  for (ReduceOp o : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product})
    if (name == reduce_op_name(o)) {
      *op = o;
      return true;
    }
  return false;
}

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::Auto:
      return "auto";
    case Algorithm::Ring:
      return "ring";
    case Algorithm::Bcube:
      return "bcube";
    case Algorithm::HalvingDoubling:
      return "halving_doubling";
  }
  return "?";
}

bool parse_algorithm(const std::string& name, Algorithm* a) {
  for (Algorithm x : {Algorithm::Auto, Algorithm::Ring, Algorithm::Bcube, Algorithm::HalvingDoubling})
    if (name == algorithm_name(x)) {
      *a = x;
      return true;
    }
  return false;
}

Status check_comm_dtype(const Tensor& t, const char* op) {
  DType d = t.dtype();
  if (d == DType::F32 || d == DType::F16 || d == DType::BF16 || d == DType::I32 || d == DType::I64) return Status::OK();
  return make_error(ErrorCode::COMM_INVALID_ARGUMENT, op, ": tensor ", describe(t),
                    " has a dtype collectives do not take (float32, float16, bfloat16, int32, int64)");
}

// ---- reduction functions ---------------------------------------------------------------
namespace {
template <typename T, typename F>
void apply(void* c, const void* a, const void* b, size_t n, F f) {
  T* pc = static_cast<T*>(c);
  const T* pa = static_cast<const T*>(a);
  const T* pb = static_cast<const T*>(b);
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    for (size_t i = 0; i < n; ++i) pc[i] = T(f(float(pa[i]), float(pb[i])));
  } else {
    for (size_t i = 0; i < n; ++i) pc[i] = f(pa[i], pb[i]);
  }
}

template <typename T>
ReduceFn fn_for(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return [](void* c, const void* a, const void* b, size_t n) {
        apply<T>(c, a, b, n, [](auto x, auto y) { return x + y; });
      };
    case ReduceOp::Product:
      return [](void* c, const void* a, const void* b, size_t n) {
        apply<T>(c, a, b, n, [](auto x, auto y) { return x * y; });
      };
    case ReduceOp::Max:
      return [](void* c, const void* a, const void* b, size_t n) {
        apply<T>(c, a, b, n, [](auto x, auto y) { return x > y ? x : y; });
      };
    case ReduceOp::Min:
      return [](void* c, const void* a, const void* b, size_t n) {
        apply<T>(c, a, b, n, [](auto x, auto y) { return x < y ? x : y; });
      };
  }
  return nullptr;
}
}  // namespace

ReduceFn reduce_function(DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::F32:
      return fn_for<float>(op);
    case DType::F16:
      return fn_for<Half>(op);
    case DType::BF16:
      return fn_for<BFloat16>(op);
    case DType::I32:
      return fn_for<int32_t>(op);
    case DType::I64:
      return fn_for<int64_t>(op);
    default:
      return nullptr;
  }
}

void divide_in_place(Tensor& t, int n) {
  int64_t count = t.numel();
  switch (t.dtype()) {
    case DType::F32:
      for (int64_t i = 0; i < count; ++i) t.data<float>()[i] /= float(n);
      break;
    case DType::F16:
      for (int64_t i = 0; i < count; ++i) t.data<Half>()[i] = Half(float(t.data<Half>()[i]) / float(n));
      break;
    case DType::BF16:
      for (int64_t i = 0; i < count; ++i) t.data<BFloat16>()[i] = BFloat16(float(t.data<BFloat16>()[i]) / float(n));
      break;
    case DType::I32:
      for (int64_t i = 0; i < count; ++i) t.data<int32_t>()[i] /= n;
      break;
    case DType::I64:
      for (int64_t i = 0; i < count; ++i) t.data<int64_t>()[i] /= n;
      break;
    default:
      break;
  }
}

// ---- Work --------------------------------------------------------------------------------
Status Work::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  return status_;
}

bool Work::test() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void Work::finish(Status s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = std::move(s);
    done_ = true;
  }
  cv_.notify_all();
}

// ---- Communicator ----------------------------------------------------------------------
Communicator::Communicator(int rank, int size, std::string group, std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), group_(std::move(group)), timeout_(timeout) {}

Communicator::~Communicator() { stop_worker(); }

void Communicator::start_worker(std::shared_ptr<Tracer> tracer) {
  tracer_ = std::move(tracer);
  stats_ = std::make_unique<GroupStats>(group_, backend(), rank_, size_);
  worker_ = std::thread([this] { worker_loop(); });
}

void Communicator::stop_worker() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = true;
    // Point-to-point threads use the engine: let them end before it goes.
    cv_.wait(lock, [this] { return p2p_in_flight_ == 0; });
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

WorkPtr Communicator::failed(Status s) {
  auto w = std::make_shared<Work>();
  w->finish(std::move(s));
  return w;
}

WorkPtr Communicator::enqueue(const char* op, size_t bytes, std::function<Status()> fn) {
  auto w = std::make_shared<Work>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) {
      w->finish(broken_status_);
      return w;
    }
    queue_.push_back(Job{++seq_, op, bytes, std::move(fn), w});
  }
  cv_.notify_all();
  return w;
}

void Communicator::worker_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto ready = [this] { return stopping_ || !queue_.empty(); };
      // Idle with counts not yet published: publish them when due, so a waiting job shows its
      // final counts in `gearbox smi`.
      while (!ready()) {
        if (!stats_->pending()) {
          cv_.wait(lock, ready);
        } else if (!cv_.wait_until(lock, stats_->due(), ready)) {
          lock.unlock();
          stats_->publish();
          lock.lock();
        }
      }
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    Status s;
    if (broken_) {
      s = broken_status_;
    } else {
      if (tracer_) tracer_->enter(job.seq, job.op, job.bytes);
      const auto start = std::chrono::steady_clock::now();
      s = job.fn();
      stats_->record(job.op, job.bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                     s);
      if (tracer_) {
        if (s.ok()) {
          tracer_->leave(job.seq);
        } else if (s.code() == ErrorCode::COMM_TIMEOUT || s.code() == ErrorCode::COMM_RANK_FAILED) {
          s = tracer_->report(job.seq, job.op, job.bytes, s.code() == ErrorCode::COMM_TIMEOUT, s.message(), timeout_);
        }
      }
      if (s.code() == ErrorCode::COMM_TIMEOUT || s.code() == ErrorCode::COMM_RANK_FAILED) {
        std::lock_guard<std::mutex> lock(mu_);
        broken_ = true;
        broken_status_ =
            make_error(s.code(), "the communicator of group '", group_,
                       "' is broken by an earlier failure; exit the job. The first failure: ", s.message());
      }
    }
    job.work->finish(std::move(s));
  }
}

namespace {
Status need_numel(const char* op, const char* what, const Tensor& t, int64_t numel) {
  if (t.numel() == numel) return Status::OK();
  return make_error(ErrorCode::COMM_INVALID_ARGUMENT, op, ": ", what, " ", describe(t), " has ", t.numel(),
                    " elements; the collective needs ", numel);
}
Status need_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() == b.dtype()) return Status::OK();
  return make_error(ErrorCode::COMM_INVALID_ARGUMENT, op, ": input ", describe(a), " and output ", describe(b),
                    " differ in dtype");
}
Status need_rank(const char* op, const char* what, int r, int size) {
  if (r >= 0 && r < size) return Status::OK();
  return make_error(ErrorCode::COMM_INVALID_ARGUMENT, op, ": ", what, " ", r, " is outside the group's ranks 0..",
                    size - 1);
}
Dims stacked(int n, const Dims& d) {
  Dims out{n};
  out.insert(out.end(), d.begin(), d.end());
  return out;
}
}  // namespace

#define GBX_COMM_CHECK(expr)         \
  do {                               \
    Status s_ = (expr);              \
    if (!s_.ok()) return failed(s_); \
  } while (0)

WorkPtr Communicator::allreduce_async(Tensor& t, ReduceOp op) {
  GBX_COMM_CHECK(check_comm_dtype(t, "allreduce"));
  t.mutable_raw();  // a borrowed buffer becomes private here, in the caller's tensor
  Tensor shared = t;
  return enqueue("allreduce", t.nbytes(), [this, shared, op]() mutable { return do_allreduce(shared, op); });
}

WorkPtr Communicator::allgather_async(const Tensor& in, Tensor& out) {
  GBX_COMM_CHECK(check_comm_dtype(in, "allgather"));
  if (!out.defined()) out = Tensor(in.dtype(), stacked(size_, in.dims()));
  GBX_COMM_CHECK(need_same_dtype("allgather", in, out));
  GBX_COMM_CHECK(need_numel("allgather", "output", out, in.numel() * size_));
  out.mutable_raw();
  Tensor i = in, o = out;
  return enqueue("allgather", in.nbytes(), [this, i, o]() mutable { return do_allgather(i, o); });
}

WorkPtr Communicator::reduce_scatter_async(const Tensor& in, Tensor& out, ReduceOp op) {
  GBX_COMM_CHECK(check_comm_dtype(in, "reduce_scatter"));
  if (in.numel() % size_ != 0)
    return failed(make_error(ErrorCode::COMM_INVALID_ARGUMENT, "reduce_scatter: input ", describe(in), " has ",
                             in.numel(), " elements, not divisible by the group size ", size_));
  if (!out.defined()) out = Tensor(in.dtype(), {in.numel() / size_});
  GBX_COMM_CHECK(need_same_dtype("reduce_scatter", in, out));
  GBX_COMM_CHECK(need_numel("reduce_scatter", "output", out, in.numel() / size_));
  out.mutable_raw();
  Tensor i = in, o = out;
  return enqueue("reduce_scatter", in.nbytes(), [this, i, o, op]() mutable { return do_reduce_scatter(i, o, op); });
}

WorkPtr Communicator::broadcast_async(Tensor& t, int root) {
  GBX_COMM_CHECK(check_comm_dtype(t, "broadcast"));
  GBX_COMM_CHECK(need_rank("broadcast", "root", root, size_));
  t.mutable_raw();
  Tensor shared = t;
  return enqueue("broadcast", t.nbytes(), [this, shared, root]() mutable { return do_broadcast(shared, root); });
}

WorkPtr Communicator::reduce_async(Tensor& t, int root, ReduceOp op) {
  GBX_COMM_CHECK(check_comm_dtype(t, "reduce"));
  GBX_COMM_CHECK(need_rank("reduce", "root", root, size_));
  t.mutable_raw();
  Tensor shared = t;
  return enqueue("reduce", t.nbytes(), [this, shared, root, op]() mutable { return do_reduce(shared, root, op); });
}

WorkPtr Communicator::gather_async(const Tensor& in, Tensor& out, int root) {
  GBX_COMM_CHECK(check_comm_dtype(in, "gather"));
  GBX_COMM_CHECK(need_rank("gather", "root", root, size_));
  if (rank_ == root) {
    if (!out.defined()) out = Tensor(in.dtype(), stacked(size_, in.dims()));
    GBX_COMM_CHECK(need_same_dtype("gather", in, out));
    GBX_COMM_CHECK(need_numel("gather", "output", out, in.numel() * size_));
    out.mutable_raw();
  }
  Tensor i = in, o = out;
  return enqueue("gather", in.nbytes(), [this, i, o, root]() mutable { return do_gather(i, o, root); });
}

WorkPtr Communicator::scatter_async(const Tensor& in, Tensor& out, int root) {
  GBX_COMM_CHECK(need_rank("scatter", "root", root, size_));
  if (rank_ == root) {
    GBX_COMM_CHECK(check_comm_dtype(in, "scatter"));
    if (in.numel() % size_ != 0)
      return failed(make_error(ErrorCode::COMM_INVALID_ARGUMENT, "scatter: input ", describe(in), " has ", in.numel(),
                               " elements, not divisible by the group size ", size_));
    if (!out.defined()) out = Tensor(in.dtype(), {in.numel() / size_});
    GBX_COMM_CHECK(need_numel("scatter", "output", out, in.numel() / size_));
  }
  if (!out.defined())
    return failed(make_error(ErrorCode::COMM_INVALID_ARGUMENT,
                             "scatter: a non-root rank must pass an output tensor of the chunk's dtype and size"));
  GBX_COMM_CHECK(check_comm_dtype(out, "scatter"));
  if (rank_ == root) GBX_COMM_CHECK(need_same_dtype("scatter", in, out));
  out.mutable_raw();
  Tensor i = in, o = out;
  return enqueue("scatter", out.nbytes(), [this, i, o, root]() mutable { return do_scatter(i, o, root); });
}

WorkPtr Communicator::alltoall_async(const Tensor& in, Tensor& out) {
  GBX_COMM_CHECK(check_comm_dtype(in, "alltoall"));
  if (in.numel() % size_ != 0)
    return failed(make_error(ErrorCode::COMM_INVALID_ARGUMENT, "alltoall: input ", describe(in), " has ", in.numel(),
                             " elements, not divisible by the group size ", size_));
  if (!out.defined()) out = Tensor(in.dtype(), in.dims());
  GBX_COMM_CHECK(need_same_dtype("alltoall", in, out));
  GBX_COMM_CHECK(need_numel("alltoall", "output", out, in.numel()));
  out.mutable_raw();
  Tensor i = in, o = out;
  return enqueue("alltoall", in.nbytes(), [this, i, o]() mutable { return do_alltoall(i, o); });
}

WorkPtr Communicator::barrier_async() {
  return enqueue("barrier", 0, [this] { return do_barrier(); });
}

WorkPtr Communicator::send_async(const Tensor& t, int dst, uint32_t tag) {
  GBX_COMM_CHECK(check_comm_dtype(t, "send"));
  GBX_COMM_CHECK(need_rank("send", "destination", dst, size_));
  Tensor shared = t;
  return point_to_point([this, shared, dst, tag] { return do_send(shared, dst, tag); });
}

WorkPtr Communicator::recv_async(Tensor& t, int src, uint32_t tag) {
  GBX_COMM_CHECK(check_comm_dtype(t, "recv"));
  GBX_COMM_CHECK(need_rank("recv", "source", src, size_));
  t.mutable_raw();
  Tensor shared = t;
  return point_to_point([this, shared, src, tag]() mutable { return do_recv(shared, src, tag); });
}

// Point-to-point calls do not take part in the collective order (a rank's send and the
// matching recv are issued in different orders on the two sides: a ring's send-then-recv would
// deadlock on one queue), so each runs on a thread of its own; both engines allow that (Gloo's
// pairs serve concurrent slots; MPI is initialized with MPI_THREAD_MULTIPLE).
WorkPtr Communicator::point_to_point(std::function<Status()> fn) {
  auto w = std::make_shared<Work>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) {
      w->finish(broken_status_);
      return w;
    }
    ++p2p_in_flight_;
  }
  std::thread([this, w, fn] {
    Status s = fn();
    {
      std::lock_guard<std::mutex> lock(mu_);
      --p2p_in_flight_;
    }
    cv_.notify_all();
    w->finish(s);
  }).detach();
  return w;
}

WorkPtr Communicator::allreduce_bucketed_async(std::vector<Tensor> tensors, ReduceOp op, size_t bucket_bytes) {
  // Pack consecutive tensors of one dtype into flat buckets; one allreduce per bucket.
  struct Bucket {
    Tensor flat;
    std::vector<size_t> members;
    WorkPtr work;
  };
  auto buckets = std::make_shared<std::vector<Bucket>>();
  for (size_t i = 0; i < tensors.size(); ++i) {
    GBX_COMM_CHECK(check_comm_dtype(tensors[i], "allreduce_bucketed"));
    tensors[i].mutable_raw();
    bool fits = !buckets->empty() && buckets->back().flat.dtype() == tensors[i].dtype();
    if (fits) {
      size_t bytes = 0;
      for (size_t m : buckets->back().members) bytes += tensors[m].nbytes();
      fits = bytes + tensors[i].nbytes() <= bucket_bytes;
    }
    if (!fits) buckets->push_back(Bucket{Tensor(tensors[i].dtype(), {0}), {}, nullptr});
    buckets->back().members.push_back(i);
  }
  for (Bucket& b : *buckets) {
    int64_t n = 0;
    for (size_t m : b.members) n += tensors[m].numel();
    b.flat = Tensor(b.flat.dtype(), {n});
    char* dst = static_cast<char*>(b.flat.mutable_raw());
    for (size_t m : b.members) {
      std::memcpy(dst, tensors[m].raw(), tensors[m].nbytes());
      dst += tensors[m].nbytes();
    }
    b.work = allreduce_async(b.flat, op);
  }
  // The returned Work waits for every bucket and copies the results back; it runs on its own
  // thread so that test() turns true without a wait() call.
  auto all = std::make_shared<Work>();
  std::thread([all, buckets, tensors]() mutable {
    Status first;
    for (Bucket& b : *buckets) {
      Status s = b.work->wait();
      if (!s.ok() && first.ok()) first = s;
      if (!s.ok()) continue;
      const char* src = static_cast<const char*>(b.flat.raw());
      for (size_t m : b.members) {
        std::memcpy(tensors[m].mutable_raw(), src, tensors[m].nbytes());
        src += tensors[m].nbytes();
      }
    }
    all->finish(first);
  }).detach();
  return all;
}

Status Communicator::broadcast_all(std::vector<Tensor>& tensors, int root) {
  std::vector<WorkPtr> works;
  for (Tensor& t : tensors) works.push_back(broadcast_async(t, root));
  Status first;
  for (auto& w : works) {
    Status s = w->wait();
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

}  // namespace gearbox::comm
