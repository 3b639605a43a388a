// The MPI backend (Debian's libopenmpi-dev): for jobs started by mpirun, whose environment
// (OMPI_COMM_WORLD_RANK/SIZE) MPI itself reads. Collectives run as MPI-3 non-blocking calls
// polled against the timeout, so a stalled peer gives COMM_TIMEOUT and the desync report like
// Gloo's; a dead peer usually makes mpirun end the whole job first (OpenMPI's default).
// The Tracer's store: GEARBOX_STORE when set, else a folder under /tmp named after mpirun's job
// id (one machine; set GEARBOX_STORE=file:SHARED_DIR across hosts).
#pragma once

#include <chrono>
#include <memory>

#include "comm/communicator.h"

namespace gearbox::comm {

// Initializes MPI once per process (MPI_THREAD_MULTIPLE: collectives run on the worker thread,
// point-to-point calls on threads of their own) and returns the world communicator.
Result<std::unique_ptr<Communicator>> create_mpi_communicator(std::chrono::milliseconds timeout);

}  // namespace gearbox::comm
