// Communicator: the collectives a distributed job calls, on gearbox Tensors, over an existing
// engine (Gloo by default, OpenMPI second; gloo_communicator.h, mpi_communicator.h).
//
// Every rank of a group must call the same collectives in the same order with matching sizes
// (the rule every collective library has). Each call is numbered (its sequence number, `seq`);
// the Tracer (trace.h) publishes what each rank is doing to the rendezvous store, so when a
// collective times out or a peer dies, every waiting rank prints which collective (seq, op,
// group) and which ranks never joined or never finished it, and the call returns COMM_TIMEOUT or
// COMM_RANK_FAILED. After such an error the communicator is broken: the job must exit.
//
// Calls run in order on one worker thread per communicator; the *_async forms return a Work at
// once (wait()/test()), the plain forms wait. Tensors are shared buffers (base/tensor.h): an
// async call writes its result into the caller's tensor's buffer, which must stay alive and
// untouched until wait() returns.
//
// dtypes: f32, f16, bf16, i32, i64. f16/bf16 reductions run elementwise in fp32 and round to the
// 16-bit type once per reduction step (Gloo has no bf16 type: the reduction function converts;
// a ring over N ranks rounds N-1 times). Avg is Sum divided by the group size afterwards
// (integer division, truncating, for i32/i64).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"

namespace gearbox::comm {

enum class ReduceOp { Sum, Avg, Max, Min, Product };
const char* reduce_op_name(ReduceOp op);
// "sum", "avg", "max", "min", "product"; false when unknown.
bool parse_reduce_op(const std::string& name, ReduceOp* op);

// Which Gloo allreduce algorithm (others ignore it). Auto picks by message size
// (gloo_communicator.cc says where the switch is and why).
enum class Algorithm { Auto, Ring, Bcube, HalvingDoubling };
const char* algorithm_name(Algorithm a);
bool parse_algorithm(const std::string& name, Algorithm* a);

// DTypes a collective accepts; COMM_INVALID_ARGUMENT otherwise.
Status check_comm_dtype(const Tensor& t, const char* op);

// The handle of an asynchronous collective.
class Work {
 public:
  // Blocks until the collective finished; its Status (the same every time it is asked).
  Status wait();
  // True when finished (wait() then returns at once).
  bool test();

 private:
  friend class Communicator;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
  void finish(Status s);
};
using WorkPtr = std::shared_ptr<Work>;

class Tracer;
class GroupStats;

class Communicator {
 public:
  virtual ~Communicator();
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& group() const { return group_; }
  virtual std::string backend() const = 0;
  std::chrono::milliseconds timeout() const { return timeout_; }

  // In place: every rank ends with op over all ranks' t.
  WorkPtr allreduce_async(Tensor& t, ReduceOp op = ReduceOp::Sum);
  // out = concatenation of every rank's in, rank order (out: size*in.numel() elements; if
  // undefined it is allocated with dims {size, in.dims...}).
  WorkPtr allgather_async(const Tensor& in, Tensor& out);
  // in holds size equal chunks; out = op over ranks of chunk `rank` (allocated if undefined).
  WorkPtr reduce_scatter_async(const Tensor& in, Tensor& out, ReduceOp op = ReduceOp::Sum);
  // t on every rank = t on root.
  WorkPtr broadcast_async(Tensor& t, int root);
  // In place on root (other ranks' t is left as the engine leaves it: scratch).
  WorkPtr reduce_async(Tensor& t, int root, ReduceOp op = ReduceOp::Sum);
  // out on root = concatenation of every rank's in (out may be undefined on other ranks).
  WorkPtr gather_async(const Tensor& in, Tensor& out, int root);
  // in on root holds size chunks; out on rank r = chunk r.
  WorkPtr scatter_async(const Tensor& in, Tensor& out, int root);
  // in holds size chunks; out chunk j = rank j's chunk `rank`.
  WorkPtr alltoall_async(const Tensor& in, Tensor& out);
  WorkPtr barrier_async();
  // Point to point; tag tells apart messages between the same two ranks.
  WorkPtr send_async(const Tensor& t, int dst, uint32_t tag = 0);
  WorkPtr recv_async(Tensor& t, int src, uint32_t tag = 0);

  Status allreduce(Tensor& t, ReduceOp op = ReduceOp::Sum) { return allreduce_async(t, op)->wait(); }
  Status allgather(const Tensor& in, Tensor& out) { return allgather_async(in, out)->wait(); }
  Status reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op = ReduceOp::Sum) {
    return reduce_scatter_async(in, out, op)->wait();
  }
  Status broadcast(Tensor& t, int root) { return broadcast_async(t, root)->wait(); }
  Status reduce(Tensor& t, int root, ReduceOp op = ReduceOp::Sum) { return reduce_async(t, root, op)->wait(); }
  Status gather(const Tensor& in, Tensor& out, int root) { return gather_async(in, out, root)->wait(); }
  Status scatter(const Tensor& in, Tensor& out, int root) { return scatter_async(in, out, root)->wait(); }
  Status alltoall(const Tensor& in, Tensor& out) { return alltoall_async(in, out)->wait(); }
  Status barrier() { return barrier_async()->wait(); }
  Status send(const Tensor& t, int dst, uint32_t tag = 0) { return send_async(t, dst, tag)->wait(); }
  Status recv(Tensor& t, int src, uint32_t tag = 0) { return recv_async(t, src, tag)->wait(); }

  // For data-parallel training: allreduce a list of tensors packed into buckets of at most
  // bucket_bytes (per dtype), one async allreduce per bucket, results copied back on wait().
  WorkPtr allreduce_bucketed_async(std::vector<Tensor> tensors, ReduceOp op, size_t bucket_bytes);
  // Broadcast a list of tensors from root (e.g. parameters at start).
  Status broadcast_all(std::vector<Tensor>& tensors, int root);

  // Collectives issued so far (the last one's seq).
  uint64_t seq() const { return seq_; }

 protected:
  Communicator(int rank, int size, std::string group, std::chrono::milliseconds timeout);
  // Starts the worker thread; a backend calls it at the end of its setup.
  void start_worker(std::shared_ptr<Tracer> tracer);
  // Stops the worker (after the queued calls ran); a backend's destructor calls it first.
  void stop_worker();
  // True after a timeout or a lost peer.
  bool broken() {
    std::lock_guard<std::mutex> lock(mu_);
    return broken_;
  }

  // The engine's implementations, run on the worker thread. Arguments are checked before.
  virtual Status do_allreduce(Tensor& t, ReduceOp op) = 0;
  virtual Status do_allgather(const Tensor& in, Tensor& out) = 0;
  virtual Status do_reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) = 0;
  virtual Status do_broadcast(Tensor& t, int root) = 0;
  virtual Status do_reduce(Tensor& t, int root, ReduceOp op) = 0;
  virtual Status do_gather(const Tensor& in, Tensor& out, int root) = 0;
  virtual Status do_scatter(const Tensor& in, Tensor& out, int root) = 0;
  virtual Status do_alltoall(const Tensor& in, Tensor& out) = 0;
  virtual Status do_barrier() = 0;
  virtual Status do_send(const Tensor& t, int dst, uint32_t tag) = 0;
  virtual Status do_recv(Tensor& t, int src, uint32_t tag) = 0;

  int rank_;
  int size_;
  std::string group_;
  std::chrono::milliseconds timeout_;

 private:
  // Numbers the call, checks nothing more, queues fn; the Tracer wraps it with enter/leave and
  // turns an engine failure into the desync report.
  WorkPtr enqueue(const char* op, size_t bytes, std::function<Status()> fn);
  WorkPtr failed(Status s);
  WorkPtr point_to_point(std::function<Status()> fn);
  void worker_loop();

  struct Job {
    uint64_t seq;
    const char* op;
    size_t bytes;
    std::function<Status()> fn;
    WorkPtr work;
  };
  std::shared_ptr<Tracer> tracer_;
  std::unique_ptr<GroupStats> stats_;  // the counters `gearbox smi` shows (group_stats.h); worker thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  int p2p_in_flight_ = 0;
  bool broken_ = false;  // set after a timeout or a lost peer: later calls fail at once
  Status broken_status_;
  std::thread worker_;
  uint64_t seq_ = 0;
};

// Applies op elementwise: c[i] = op(a[i], b[i]) (f16/bf16 through fp32); the engines' reduction
// function and the tests' single-process reference.
using ReduceFn = void (*)(void* c, const void* a, const void* b, size_t n);
ReduceFn reduce_function(DType dtype, ReduceOp op);
// Divides every element by n (Avg's second half).
void divide_in_place(Tensor& t, int n);

}  // namespace gearbox::comm
