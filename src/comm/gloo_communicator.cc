#include "comm/gloo_communicator.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>

#include <cstring>

#include "comm/trace.h"

namespace gearbox::comm {
namespace {

// Gloo's rendezvous reads and writes the addresses through gloo::rendezvous::Store.
class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(std::shared_ptr<KvStore> kv, std::chrono::milliseconds timeout)
      : kv_(std::move(kv)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    Status s = kv_->set(key, std::string(data.begin(), data.end()));
    if (!s.ok()) throw std::runtime_error(s.to_string());
  }
  std::vector<char> get(const std::string& key) override {
    auto v = kv_->get(key, timeout_);
    if (!v.ok()) throw std::runtime_error(v.status().to_string());
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    Status s = kv_->wait(keys, timeout);
    if (!s.ok()) throw std::runtime_error(s.to_string());
  }

 private:
  std::shared_ptr<KvStore> kv_;
  std::chrono::milliseconds timeout_;
};

// Runs a Gloo call, turning its exceptions into the catalogue's codes: a timeout (Gloo's
// IoException says "Timed out") or a lost peer (any other I/O error: connection closed/reset).
template <typename F>
Status guarded(const char* op, F&& f) {
  try {
    f();
    return Status::OK();
  } catch (const gloo::IoException& e) {
    std::string what = e.what();
    bool timed_out = what.find("imed out") != std::string::npos || what.find("imeout") != std::string::npos;
    return Status(timed_out ? ErrorCode::COMM_TIMEOUT : ErrorCode::COMM_RANK_FAILED, what);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::COMM_RANK_FAILED, op, ": ", e.what());
  }
}

template <typename T>
void set_io(T& opts, const Tensor& in, Tensor& out) {
  opts.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(in.raw())), in.nbytes());
  opts.setOutput(static_cast<uint8_t*>(out.mutable_raw()), out.nbytes());
}

// Gloo's typed halving-doubling algorithm, for the dtypes it has arithmetic for.
template <typename T>
void halving_doubling(const std::shared_ptr<gloo::Context>& ctx, Tensor& t, ReduceOp op) {
  const gloo::ReductionFunction<T>* fn = gloo::ReductionFunction<T>::sum;
  if (op == ReduceOp::Max) fn = gloo::ReductionFunction<T>::max;
  if (op == ReduceOp::Min) fn = gloo::ReductionFunction<T>::min;
  if (op == ReduceOp::Product) fn = gloo::ReductionFunction<T>::product;
  gloo::AllreduceHalvingDoubling<T> algo(ctx, {t.data<T>()}, static_cast<int>(t.numel()), fn);
  algo.run();
}

}  // namespace

GlooCommunicator::GlooCommunicator(const GlooOptions& o)
    : Communicator(o.rank, o.size, o.group, o.timeout), options_(o) {}

GlooCommunicator::~GlooCommunicator() {
  stop_worker();
  // Gloo fails a pending operation on any pair whose peer closed, even one it needs nothing
  // more from: a rank that finished the last collective and exited at once could fail a peer
  // still finishing it. So ranks leave together: each marks itself done in the store and waits
  // (bounded) for the others. A broken communicator (a peer is gone) skips it.
  if (!context_ || broken()) return;
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back("exit." + std::to_string(r));
  if (store_->set(keys[size_t(rank_)], "1").ok())
    (void)store_->wait(keys, std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(60)));
}

Result<std::unique_ptr<GlooCommunicator>> GlooCommunicator::create(std::shared_ptr<KvStore> store,
                                                                   const GlooOptions& o) {
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    return make_error(ErrorCode::COMM_SETUP_FAILED, "rank ", o.rank, " of world size ", o.size,
                      ": the rank must be in 0..size-1 (RANK, WORLD_SIZE)");
  std::unique_ptr<GlooCommunicator> c(new GlooCommunicator(o));
  c->store_ = prefixed_store(store, "gloo." + o.group);
  auto tracer = std::make_shared<Tracer>(prefixed_store(store, "gbx." + o.group), o.rank, o.size, o.group);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = o.bind_address;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
    ctx->setTimeout(o.timeout);
    GlooStoreAdapter adapter(c->store_, o.timeout);
    ctx->connectFullMesh(adapter, device);
    c->context_ = ctx;
  } catch (const std::exception& e) {
    return make_error(ErrorCode::COMM_SETUP_FAILED, "gloo rendezvous of rank ", o.rank, "/", o.size, " in group '",
                      o.group, "' through ", store->describe(), " (listening on ", o.bind_address, "): ", e.what());
  }
  c->start_worker(tracer);
  return c;
}

Result<std::unique_ptr<GlooCommunicator>> GlooCommunicator::create_group(std::shared_ptr<KvStore> store,
                                                                         const GlooOptions& world,
                                                                         const std::string& name,
                                                                         const std::vector<int>& ranks) {
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] != world.rank) continue;
    GlooOptions o = world;
    o.rank = int(i);
    o.size = int(ranks.size());
    o.group = name;
    return create(std::move(store), o);
  }
  return std::unique_ptr<GlooCommunicator>();
}

Algorithm GlooCommunicator::pick_algorithm(size_t bytes, DType dtype) const {
  if (options_.algorithm != Algorithm::Auto) {
    // Gloo's halving-doubling is typed: it has no arithmetic for the 16-bit float types.
    if (options_.algorithm == Algorithm::HalvingDoubling && (dtype == DType::F16 || dtype == DType::BF16))
      return Algorithm::Ring;
    return options_.algorithm;
  }
  // Small messages are latency-bound: bcube takes log(n) steps where the ring takes 2(n-1).
  // Large ones are bandwidth-bound: the ring moves the fewest bytes and pipelines segments.
  // Not halving-doubling, although it is latency-bound too: it is Gloo's old-style algorithm
  // (its own slots and buffers), and a ring allreduce after one stalled for ~15 s on 4 ranks
  // (GlooAlgorithms.SmallThenLargeAllreduceIsNotStalled). bcube is the same API as the ring.
  // bench/allreduce, 4 ranks, two alternating rounds on a loaded 2-core machine: at 4 KB bcube
  // 4.2-5.5 ms, halving-doubling 7.9-8.7, ring 9.9-12.0; at 64 KB 4.7-5.0 / 5.6-6.7 / 12-14;
  // at 256 KB 4.3-4.5 / 4.8-6.5 / 9.7-12.6. The switch stays at 256 KB.
  if (bytes <= (256u << 10) && size_ > 2) return Algorithm::Bcube;
  return Algorithm::Ring;
}

Status GlooCommunicator::do_allreduce(Tensor& t, ReduceOp op) {
  if (size_ > 1 && t.numel() > 0) {
    Algorithm a = pick_algorithm(t.nbytes(), t.dtype());
    Status s = guarded("allreduce", [&] {
      if (a == Algorithm::HalvingDoubling) {
        if (t.dtype() == DType::F32) return halving_doubling<float>(context_, t, op);
        if (t.dtype() == DType::I32) return halving_doubling<int32_t>(context_, t, op);
        if (t.dtype() == DType::I64) return halving_doubling<int64_t>(context_, t, op);
      }
      gloo::AllreduceOptions opts(context_);
      opts.setAlgorithm(a == Algorithm::Bcube ? gloo::AllreduceOptions::Algorithm::BCUBE
                                              : gloo::AllreduceOptions::Algorithm::RING);
      size_t elem = dtype_size(t.dtype());
      // The element size is what the reduction sees: pass the buffer as elements of that size.
      if (elem == 2) opts.setOutput(static_cast<uint16_t*>(t.mutable_raw()), size_t(t.numel()));
      if (elem == 4) opts.setOutput(static_cast<uint32_t*>(t.mutable_raw()), size_t(t.numel()));
      if (elem == 8) opts.setOutput(static_cast<uint64_t*>(t.mutable_raw()), size_t(t.numel()));
      ReduceFn fn = reduce_function(t.dtype(), op);
      opts.setReduceFunction(fn);
      opts.setTag(++tag_);
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
    });
    GBX_RETURN_IF_ERROR(s);
  }
  if (op == ReduceOp::Avg) divide_in_place(t, size_);
  return Status::OK();
}

Status GlooCommunicator::do_allgather(const Tensor& in, Tensor& out) {
  return guarded("allgather", [&] {
    gloo::AllgatherOptions opts(context_);
    set_io(opts, in, out);
    opts.setTag(++tag_);
    opts.setTimeout(timeout_);
    gloo::allgather(opts);
  });
}

Status GlooCommunicator::do_reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) {
  // Gloo 0.5 has no untyped reduce-scatter (its ReduceScatterHalvingDoubling is sum-only and
  // typed): allreduce a copy and keep this rank's chunk (twice the bytes of a true
  // reduce-scatter; docs/distributed.md).
  Tensor full = in.clone();
  GBX_RETURN_IF_ERROR(do_allreduce(full, op));
  std::memcpy(out.mutable_raw(), static_cast<const char*>(full.raw()) + size_t(rank_) * out.nbytes(), out.nbytes());
  return Status::OK();
}

Status GlooCommunicator::do_broadcast(Tensor& t, int root) {
  if (size_ == 1) return Status::OK();
  return guarded("broadcast", [&] {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(t.mutable_raw()), t.nbytes());
    opts.setRoot(root);
    opts.setTag(++tag_);
    opts.setTimeout(timeout_);
    gloo::broadcast(opts);
  });
}

Status GlooCommunicator::do_reduce(Tensor& t, int root, ReduceOp op) {
  if (size_ > 1) {
    GBX_RETURN_IF_ERROR(guarded("reduce", [&] {
      gloo::ReduceOptions opts(context_);
      size_t elem = dtype_size(t.dtype());
      if (elem == 2) opts.setOutput(static_cast<uint16_t*>(t.mutable_raw()), size_t(t.numel()));
      if (elem == 4) opts.setOutput(static_cast<uint32_t*>(t.mutable_raw()), size_t(t.numel()));
      if (elem == 8) opts.setOutput(static_cast<uint64_t*>(t.mutable_raw()), size_t(t.numel()));
      opts.setRoot(root);
      opts.setReduceFunction(reduce_function(t.dtype(), op));
      opts.setTag(++tag_);
      opts.setTimeout(timeout_);
      gloo::reduce(opts);
    }));
  }
  if (op == ReduceOp::Avg && rank_ == root) divide_in_place(t, size_);
  return Status::OK();
}

Status GlooCommunicator::do_gather(const Tensor& in, Tensor& out, int root) {
  return guarded("gather", [&] {
    gloo::GatherOptions opts(context_);
    opts.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(in.raw())), in.nbytes());
    if (rank_ == root) opts.setOutput(static_cast<uint8_t*>(out.mutable_raw()), out.nbytes());
    opts.setRoot(root);
    opts.setTag(++tag_);
    opts.setTimeout(timeout_);
    gloo::gather(opts);
  });
}

Status GlooCommunicator::do_scatter(const Tensor& in, Tensor& out, int root) {
  return guarded("scatter", [&] {
    gloo::ScatterOptions opts(context_);
    std::vector<uint8_t*> chunks;
    if (rank_ == root) {
      for (int r = 0; r < size_; ++r)
        chunks.push_back(const_cast<uint8_t*>(static_cast<const uint8_t*>(in.raw())) + size_t(r) * out.nbytes());
      opts.setInputs(chunks, out.nbytes());
    }
    opts.setOutput(static_cast<uint8_t*>(out.mutable_raw()), out.nbytes());
    opts.setRoot(root);
    opts.setTag(++tag_);
    opts.setTimeout(timeout_);
    gloo::scatter(opts);
  });
}

Status GlooCommunicator::do_alltoall(const Tensor& in, Tensor& out) {
  return guarded("alltoall", [&] {
    gloo::AlltoallOptions opts(context_);
    set_io(opts, in, out);
    opts.setTag(++tag_);
    opts.setTimeout(timeout_);
    gloo::alltoall(opts);
  });
}

Status GlooCommunicator::do_barrier() {
  return guarded("barrier", [&] {
    gloo::BarrierOptions opts(context_);
    opts.setTag(++tag_);
    opts.setTimeout(timeout_);
    gloo::barrier(opts);
  });
}

// Point-to-point slots live above the collectives' tags so the two never meet.
static uint64_t p2p_slot(uint32_t tag) { return (uint64_t(1) << 40) | tag; }

Status GlooCommunicator::do_send(const Tensor& t, int dst, uint32_t tag) {
  return guarded("send", [&] {
    auto buf = context_->createUnboundBuffer(const_cast<void*>(t.raw()), t.nbytes());
    buf->send(dst, p2p_slot(tag));
    if (!buf->waitSend(timeout_)) throw gloo::IoException("Timed out waiting for send to complete");
  });
}

Status GlooCommunicator::do_recv(Tensor& t, int src, uint32_t tag) {
  return guarded("recv", [&] {
    auto buf = context_->createUnboundBuffer(t.mutable_raw(), t.nbytes());
    buf->recv(src, p2p_slot(tag));
    if (!buf->waitRecv(timeout_)) throw gloo::IoException("Timed out waiting for recv to complete");
  });
}

}  // namespace gearbox::comm
