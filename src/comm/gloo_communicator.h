// The Gloo backend (Debian's libgloo-dev, the engine under PyTorch's Gloo process group): TCP
// transport, full mesh of pairs set up through the rendezvous store (store.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/store.h"

namespace gloo {
class Context;
}

namespace gearbox::comm {

struct GlooOptions {
  int rank = 0;
  int size = 1;
  std::string group = "world";
  std::chrono::milliseconds timeout{300000};
  Algorithm algorithm = Algorithm::Auto;
  // The address this rank listens on; its peers must reach it (127.0.0.1 on one machine).
  std::string bind_address = "127.0.0.1";
};

class GlooCommunicator : public Communicator {
 public:
  // Connects every rank to every other through `store` (every rank calls it with the same
  // store, size and group). COMM_SETUP_FAILED when the ranks do not meet within the timeout.
  static Result<std::unique_ptr<GlooCommunicator>> create(std::shared_ptr<KvStore> store, const GlooOptions& options);
  // A group by name from world ranks (rank_table.h groups): its own full mesh in its own store
  // namespace. Every member calls it; a rank outside `ranks` gets a null communicator.
  static Result<std::unique_ptr<GlooCommunicator>> create_group(std::shared_ptr<KvStore> store,
                                                                const GlooOptions& world, const std::string& name,
                                                                const std::vector<int>& ranks);
  ~GlooCommunicator() override;
  std::string backend() const override { return "gloo"; }
  // The allreduce algorithm Auto picks for a message of `bytes` of dtype.
  Algorithm pick_algorithm(size_t bytes, DType dtype) const;
  void set_algorithm(Algorithm a) { options_.algorithm = a; }

 protected:
  Status do_allreduce(Tensor& t, ReduceOp op) override;
  Status do_allgather(const Tensor& in, Tensor& out) override;
  Status do_reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override;
  Status do_broadcast(Tensor& t, int root) override;
  Status do_reduce(Tensor& t, int root, ReduceOp op) override;
  Status do_gather(const Tensor& in, Tensor& out, int root) override;
  Status do_scatter(const Tensor& in, Tensor& out, int root) override;
  Status do_alltoall(const Tensor& in, Tensor& out) override;
  Status do_barrier() override;
  Status do_send(const Tensor& t, int dst, uint32_t tag) override;
  Status do_recv(Tensor& t, int src, uint32_t tag) override;

 private:
  GlooCommunicator(const GlooOptions& o);
  GlooOptions options_;
  std::shared_ptr<KvStore> store_;
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 0;  // per collective; the ops run one at a time on the worker thread
};

}  // namespace gearbox::comm
