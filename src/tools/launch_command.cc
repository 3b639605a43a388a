// `gearbox launch -n N [--rank-table FILE] [--master ADDR:PORT] [--backend gloo|mpi] -- PROGRAM ARGS`
// (comm/launcher.h does the work; docs/distributed.md).
#include <iostream>

#include "comm/launcher.h"
#include "tools/commands.h"

namespace gearbox::cli {

void add_launch_command(CLI::App& app, std::function<int()>* action) {
  auto o = std::make_shared<comm::LaunchOptions>();
  CLI::App* sub = app.add_subcommand("launch", "Start the N ranks of a distributed job on this machine (docs/distributed.md)");
  sub->add_option("-n,--nproc", o->n, "Number of ranks (default: the rank table's)");
  sub->add_option("--rank-table", o->rank_table, "Rank table (HCCL JSON schema); passed to the ranks as GEARBOX_RANK_TABLE");
  sub->add_option("--master", o->master, "ADDR:PORT of the job's rendezvous store (default 127.0.0.1 and a free port)");
  sub->add_option("--backend", o->backend, "gloo (default) or mpi (starts the ranks with mpirun)");
  sub->add_option("--timeout", o->timeout_s, "Collective timeout in seconds for the ranks (GEARBOX_COMM_TIMEOUT; default 300)");
  sub->add_option("--grace", o->grace_s, "Seconds the other ranks get to report after one fails, before SIGTERM (default 30)");
  sub->add_option("program", o->program, "PROGRAM ARGS (after --)")->required();
  sub->callback([o, action] {
    *action = [o] {
      comm::LaunchResult r = comm::launch(*o, std::cout, std::cerr);
      if (!r.status.ok()) report(r.status);
      return r.exit_code;
    };
  });
}

}  // namespace gearbox::cli
