#include "comm/mpi_communicator.h"

// The C API only: OpenMPI's deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "comm/store.h"
#include "comm/trace.h"

namespace gearbox::comm {
namespace {

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::F32: return MPI_FLOAT;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    default: return MPI_UINT16_T;  // f16/bf16: bits, reduced by a user op through fp32
  }
}

// MPI user ops for the 16-bit floats (MPI has no such types): one per (dtype, op).
template <DType D, ReduceOp O>
void user_op(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_function(D, O)(inout, in, inout, size_t(*len));
}

MPI_Op mpi_op(DType d, ReduceOp op) {
  if (d != DType::F16 && d != DType::BF16) {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: return MPI_SUM;
      case ReduceOp::Max: return MPI_MAX;
      case ReduceOp::Min: return MPI_MIN;
      case ReduceOp::Product: return MPI_PROD;
    }
  }
  static MPI_Op ops[2][5];
  static bool made = false;
  if (!made) {
    MPI_Op_create(&user_op<DType::F16, ReduceOp::Sum>, 1, &ops[0][0]);
    MPI_Op_create(&user_op<DType::F16, ReduceOp::Sum>, 1, &ops[0][1]);
    MPI_Op_create(&user_op<DType::F16, ReduceOp::Max>, 1, &ops[0][2]);
    MPI_Op_create(&user_op<DType::F16, ReduceOp::Min>, 1, &ops[0][3]);
    MPI_Op_create(&user_op<DType::F16, ReduceOp::Product>, 1, &ops[0][4]);
    MPI_Op_create(&user_op<DType::BF16, ReduceOp::Sum>, 1, &ops[1][0]);
    MPI_Op_create(&user_op<DType::BF16, ReduceOp::Sum>, 1, &ops[1][1]);
    MPI_Op_create(&user_op<DType::BF16, ReduceOp::Max>, 1, &ops[1][2]);
    MPI_Op_create(&user_op<DType::BF16, ReduceOp::Min>, 1, &ops[1][3]);
    MPI_Op_create(&user_op<DType::BF16, ReduceOp::Product>, 1, &ops[1][4]);
    made = true;
  }
  return ops[d == DType::BF16 ? 1 : 0][int(op)];
}

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(int rank, int size, std::chrono::milliseconds timeout) : Communicator(rank, size, "world", timeout) {}
  ~MpiCommunicator() override { stop_worker(); }
  std::string backend() const override { return "mpi"; }
  void start(std::shared_ptr<Tracer> t) { start_worker(std::move(t)); }

 protected:
  // Polls a non-blocking MPI call until done or the timeout.
  Status finish(const char* op, int rc, MPI_Request* req, int n = 1) {
    if (rc != MPI_SUCCESS) return make_error(ErrorCode::COMM_RANK_FAILED, op, ": MPI error ", rc);
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    int spins = 0;
    for (;;) {
      int flag = 0;
      rc = MPI_Testall(n, req, &flag, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) return make_error(ErrorCode::COMM_RANK_FAILED, op, ": MPI error ", rc);
      if (flag) return Status::OK();
      if (std::chrono::steady_clock::now() > deadline)
        return make_error(ErrorCode::COMM_TIMEOUT, op, ": Timed out after ", timeout_.count(), " ms in MPI_Test");
      if (++spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  static void* ptr(const Tensor& t) { return const_cast<void*>(t.raw()); }
  static int count(const Tensor& t) { return int(t.numel()); }

  Status do_allreduce(Tensor& t, ReduceOp op) override {
    MPI_Request r;
    GBX_RETURN_IF_ERROR(finish("allreduce", MPI_Iallreduce(MPI_IN_PLACE, t.mutable_raw(), count(t), mpi_type(t.dtype()),
                                                          mpi_op(t.dtype(), op), MPI_COMM_WORLD, &r), &r));
    if (op == ReduceOp::Avg) divide_in_place(t, size_);
    return Status::OK();
  }
  Status do_allgather(const Tensor& in, Tensor& out) override {
    MPI_Request r;
    return finish("allgather", MPI_Iallgather(ptr(in), count(in), mpi_type(in.dtype()), out.mutable_raw(), count(in),
                                              mpi_type(in.dtype()), MPI_COMM_WORLD, &r), &r);
  }
  Status do_reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override {
    MPI_Request r;
    GBX_RETURN_IF_ERROR(finish("reduce_scatter", MPI_Ireduce_scatter_block(ptr(in), out.mutable_raw(), count(out),
                                                                            mpi_type(in.dtype()), mpi_op(in.dtype(), op),
                                                                            MPI_COMM_WORLD, &r), &r));
    if (op == ReduceOp::Avg) divide_in_place(out, size_);
    return Status::OK();
  }
  Status do_broadcast(Tensor& t, int root) override {
    MPI_Request r;
    return finish("broadcast", MPI_Ibcast(t.mutable_raw(), count(t), mpi_type(t.dtype()), root, MPI_COMM_WORLD, &r), &r);
  }
  Status do_reduce(Tensor& t, int root, ReduceOp op) override {
    MPI_Request r;
    int rc = rank_ == root ? MPI_Ireduce(MPI_IN_PLACE, t.mutable_raw(), count(t), mpi_type(t.dtype()),
                                         mpi_op(t.dtype(), op), root, MPI_COMM_WORLD, &r)
                           : MPI_Ireduce(t.mutable_raw(), nullptr, count(t), mpi_type(t.dtype()),
                                         mpi_op(t.dtype(), op), root, MPI_COMM_WORLD, &r);
    GBX_RETURN_IF_ERROR(finish("reduce", rc, &r));
    if (op == ReduceOp::Avg && rank_ == root) divide_in_place(t, size_);
    return Status::OK();
  }
  Status do_gather(const Tensor& in, Tensor& out, int root) override {
    MPI_Request r;
    return finish("gather", MPI_Igather(ptr(in), count(in), mpi_type(in.dtype()),
                                        rank_ == root ? out.mutable_raw() : nullptr, count(in), mpi_type(in.dtype()),
                                        root, MPI_COMM_WORLD, &r), &r);
  }
  Status do_scatter(const Tensor& in, Tensor& out, int root) override {
    MPI_Request r;
    return finish("scatter", MPI_Iscatter(rank_ == root ? ptr(in) : nullptr, count(out), mpi_type(out.dtype()),
                                          out.mutable_raw(), count(out), mpi_type(out.dtype()), root, MPI_COMM_WORLD, &r), &r);
  }
  Status do_alltoall(const Tensor& in, Tensor& out) override {
    MPI_Request r;
    int chunk = count(in) / size_;
    return finish("alltoall", MPI_Ialltoall(ptr(in), chunk, mpi_type(in.dtype()), out.mutable_raw(), chunk,
                                            mpi_type(in.dtype()), MPI_COMM_WORLD, &r), &r);
  }
  Status do_barrier() override {
    MPI_Request r;
    return finish("barrier", MPI_Ibarrier(MPI_COMM_WORLD, &r), &r);
  }
  Status do_send(const Tensor& t, int dst, uint32_t tag) override {
    MPI_Request r;
    return finish("send", MPI_Isend(ptr(t), count(t), mpi_type(t.dtype()), dst, int(tag & 0x7fff), MPI_COMM_WORLD, &r), &r);
  }
  Status do_recv(Tensor& t, int src, uint32_t tag) override {
    MPI_Request r;
    return finish("recv", MPI_Irecv(t.mutable_raw(), count(t), mpi_type(t.dtype()), src, int(tag & 0x7fff), MPI_COMM_WORLD, &r), &r);
  }
};

}  // namespace

Result<std::unique_ptr<Communicator>> create_mpi_communicator(std::chrono::milliseconds timeout) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      return make_error(ErrorCode::COMM_SETUP_FAILED, "MPI_Init_thread failed (is this process started by mpirun?)");
    if (provided < MPI_THREAD_MULTIPLE)
      return make_error(ErrorCode::COMM_SETUP_FAILED, "this MPI library provides thread level ", provided,
                        "; gearbox needs MPI_THREAD_MULTIPLE (point-to-point calls run beside the collectives)");
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string spec;
  if (const char* s = std::getenv("GEARBOX_STORE")) spec = s;
  if (spec.empty()) {
    const char* job = std::getenv("OMPI_MCA_ess_base_jobid");
    spec = std::string("file:/tmp/gearbox-mpi-") + (job ? job : "job");
  }
  GBX_ASSIGN_OR_RETURN(auto store, open_store(spec));
  auto c = std::make_unique<MpiCommunicator>(rank, size, timeout);
  c->start(std::make_shared<Tracer>(prefixed_store(store, "gbx.mpi.world"), rank, size, "world"));
  return std::unique_ptr<Communicator>(std::move(c));
}

}  // namespace gearbox::comm
