// Starts the N ranks of a job on this machine (`gearbox launch`): each with its rank
// environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
// gearbox's GEARBOX_RANK, GEARBOX_WORLD_SIZE, GEARBOX_STORE, GEARBOX_COMM_BACKEND,
// GEARBOX_COMM_TIMEOUT, GEARBOX_RANK_TABLE), serves the job's rendezvous store
// (TcpStoreServer), prefixes every output line with "[rank k] ", forwards SIGINT/SIGTERM, and
// ends with a non-zero exit code and LAUNCH_RANK_FAILED naming every rank that failed.
// backend "mpi" hands the start to mpirun (--tag-output lines are rewritten to the same prefix).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"

namespace gearbox::comm {

struct LaunchOptions {
  int n = 0;               // 0: the rank table's size
  std::string rank_table;  // HCCL JSON (rank_table.h)
  std::string master = "127.0.0.1:0";  // the store's ADDR:PORT (0: a free port)
  std::string backend = "gloo";
  double timeout_s = 0;  // 0: the ranks' default (300 s)
  double grace_s = 30;   // after a rank fails, how long the others get before SIGTERM
  std::vector<std::string> program;
};

struct LaunchResult {
  int exit_code = 0;  // 0, the first failed rank's exit code (128+signal if killed), 1/2 on setup/usage errors
  Status status;
};

LaunchResult launch(const LaunchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace gearbox::comm
