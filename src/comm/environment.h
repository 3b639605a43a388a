// A rank's job description from its environment, as `gearbox launch`, torchrun-style launchers
// and mpirun set it, and the communicator built from it.
//
//   rank / size     GEARBOX_RANK / GEARBOX_WORLD_SIZE, else RANK / WORLD_SIZE, else
//                   OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE (mpirun), else PMI_RANK / PMI_SIZE
//   store           GEARBOX_STORE (file:DIR or tcp://HOST:PORT); else MASTER_ADDR:MASTER_PORT,
//                   where rank 0 serves the store (torch.distributed's convention)
//   backend         GEARBOX_COMM_BACKEND: gloo (default) or mpi
//   timeout         GEARBOX_COMM_TIMEOUT seconds (default 300, HCCL's default)
//   algorithm       GEARBOX_COMM_ALGORITHM: auto, ring, bcube, halving_doubling
//   bind address    GEARBOX_COMM_ADDR (default 127.0.0.1 when the master is local, else the
//                   host name)
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/gloo_communicator.h"
#include "comm/store.h"

namespace gearbox::comm {

struct JobEnvironment {
  int rank = 0;
  int size = 1;
  std::string store;  // empty: serve one on master_addr:master_port from rank 0
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::string backend = "gloo";
  std::chrono::milliseconds timeout{300000};
  Algorithm algorithm = Algorithm::Auto;
  std::string bind_address = "127.0.0.1";
  std::string rank_table;  // GEARBOX_RANK_TABLE
};

Result<JobEnvironment> read_job_environment();

// The world's Gloo options of a job (its rank, size, timeout, algorithm and address): what
// join_job creates the world with and what its sub-groups start from.
GlooOptions gloo_options(const JobEnvironment& env);

// The world communicator of this process's job. Keeps the store server alive (rank 0 without
// GEARBOX_STORE) for as long as the communicator lives.
struct Job {
  JobEnvironment env;
  std::shared_ptr<KvStore> store;
  std::unique_ptr<TcpStoreServer> store_server;
  std::unique_ptr<Communicator> world;
};
Result<std::unique_ptr<Job>> join_job();

}  // namespace gearbox::comm
