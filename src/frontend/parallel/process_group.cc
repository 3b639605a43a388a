// nn::ProcessGroup: the framework layer's handle on a job's ranks (the comm layer's world
// communicator, joined from the launcher's environment or handed in).
#include <cstring>

#include "comm/communicator.h"
#include "comm/environment.h"
#include "comm/gloo_communicator.h"
#include "frontend/tensor_impl.h"
#include "gearbox/nn_distributed.hpp"

namespace gbx::nn {

std::shared_ptr<ProcessGroup> ProcessGroup::from_environment() {
  auto joined = gearbox::comm::join_job();
  if (!joined.ok()) throw_status(joined.status());
  std::shared_ptr<gearbox::comm::Job> job = std::move(joined).value();
  auto pg = std::make_shared<ProcessGroup>(*job->world);
  pg->job_ = job;
  return pg;
}

ProcessGroup::ProcessGroup(gearbox::comm::Communicator& comm) : comm_(&comm) {}

int ProcessGroup::rank() const { return comm_->rank(); }
int ProcessGroup::size() const { return comm_->size(); }

namespace {

double reduce_scalar(gearbox::comm::Communicator& comm, double v, gearbox::comm::ReduceOp op) {
  // The comm layer has no float64 and float32 would round a loss to 7 digits: every rank's double
  // travels as its int64 bit pattern (allgather, exact) and each rank sums them in rank order, so
  // all ranks get the same double.
  int64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  gearbox::Tensor mine = gearbox::Tensor::from_vector<int64_t>({bits}), all;
  throw_if_error(comm.allgather(mine, all));
  double s = 0;
  for (int r = 0; r < comm.size(); ++r) {
    double x = 0;
    std::memcpy(&x, all.data<int64_t>() + r, sizeof x);
    s += x;
  }
  return op == gearbox::comm::ReduceOp::Avg ? s / comm.size() : s;
}

}  // namespace

double ProcessGroup::average(double v) const { return reduce_scalar(*comm_, v, gearbox::comm::ReduceOp::Avg); }
double ProcessGroup::sum(double v) const { return reduce_scalar(*comm_, v, gearbox::comm::ReduceOp::Sum); }
void ProcessGroup::barrier() const { throw_if_error(comm_->barrier()); }

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>& ranks) {
  auto job = std::static_pointer_cast<gearbox::comm::Job>(job_);
  if (!job || job->world.get() != comm_ || job->env.backend != "gloo")
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT,
                                     "new_group needs the world group of ProcessGroup::from_environment() on the gloo "
                                     "backend (a group's communicator meets through the job's store)"));
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] < 0 || ranks[i] >= size() || (i > 0 && ranks[i] <= ranks[i - 1]))
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT,
                                       "new_group's ranks must be ascending world ranks below ", size()));
  // Every rank makes the same groups in the same order, so the count names the group alike on all.
  auto made = gearbox::comm::GlooCommunicator::create_group(job->store, gearbox::comm::gloo_options(job->env),
                                                            "group" + std::to_string(groups_made_++), ranks);
  if (!made.ok()) throw_status(made.status());
  if (!*made) return nullptr;
  std::shared_ptr<gearbox::comm::GlooCommunicator> comm = std::move(*made);
  auto pg = std::make_shared<ProcessGroup>(*comm);
  pg->owned_ = comm;
  pg->job_ = job_;  // the store and the world outlive the group
  return pg;
}

}  // namespace gbx::nn
