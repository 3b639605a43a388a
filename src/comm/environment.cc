#include "comm/environment.h"

#include <unistd.h>

#include <cstdlib>

#include "comm/gloo_communicator.h"
#include "comm/mpi_communicator.h"

namespace gearbox::comm {
namespace {
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}
Result<int> env_int(const char* name, const char* v) {
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (!end || *end || x < 0 || x > (1 << 24))
    return make_error(ErrorCode::COMM_SETUP_FAILED, name, "='", v, "' is not a non-negative integer");
  return int(x);
}
}  // namespace

Result<JobEnvironment> read_job_environment() {
  JobEnvironment e;
  const char* pairs[][2] = {{"GEARBOX_RANK", "GEARBOX_WORLD_SIZE"},
                            {"RANK", "WORLD_SIZE"},
                            {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"PMI_RANK", "PMI_SIZE"}};
  bool found = false;
  for (auto& p : pairs) {
    if (env(p[0]) && env(p[1])) {
      GBX_ASSIGN_OR_RETURN(e.rank, env_int(p[0], env(p[0])));
      GBX_ASSIGN_OR_RETURN(e.size, env_int(p[1], env(p[1])));
      found = true;
      break;
    }
  }
  if (found && (e.size < 1 || e.rank >= e.size))
    return make_error(ErrorCode::COMM_SETUP_FAILED, "rank ", e.rank, " is not below the world size ", e.size);
  if (const char* s = env("GEARBOX_STORE")) e.store = s;
  if (const char* a = env("MASTER_ADDR")) e.master_addr = a;
  if (const char* p = env("MASTER_PORT")) {
    GBX_ASSIGN_OR_RETURN(e.master_port, env_int("MASTER_PORT", p));
  }
  if (const char* b = env("GEARBOX_COMM_BACKEND")) e.backend = b;
  // mpirun's environment selects MPI unless told otherwise.
  else if (env("OMPI_COMM_WORLD_RANK") && !env("GEARBOX_RANK") && !env("RANK")) e.backend = "mpi";
  if (e.backend != "gloo" && e.backend != "mpi")
    return make_error(ErrorCode::COMM_SETUP_FAILED, "GEARBOX_COMM_BACKEND='", e.backend, "': use gloo or mpi");
  if (const char* t = env("GEARBOX_COMM_TIMEOUT")) {
    char* end = nullptr;
    double s = std::strtod(t, &end);
    if (!end || *end || !(s > 0))
      return make_error(ErrorCode::COMM_SETUP_FAILED, "GEARBOX_COMM_TIMEOUT='", t,
                        "' is not a positive number of seconds");
    e.timeout = std::chrono::milliseconds(int64_t(s * 1000));
  }
  if (const char* a = env("GEARBOX_COMM_ALGORITHM"))
    if (!parse_algorithm(a, &e.algorithm))
      return make_error(ErrorCode::COMM_SETUP_FAILED, "GEARBOX_COMM_ALGORITHM='", a,
                        "': use auto, ring, bcube or halving_doubling");
  if (const char* a = env("GEARBOX_COMM_ADDR")) {
    e.bind_address = a;
  } else if (e.master_addr != "127.0.0.1" && e.master_addr != "localhost") {
    char host[256] = {0};
    if (gethostname(host, sizeof(host) - 1) == 0) e.bind_address = host;
  }
  if (const char* t = env("GEARBOX_RANK_TABLE")) e.rank_table = t;
  return e;
}

Result<std::unique_ptr<Job>> join_job() {
  auto job = std::make_unique<Job>();
  GBX_ASSIGN_OR_RETURN(job->env, read_job_environment());
  const JobEnvironment& e = job->env;
  if (e.backend == "mpi") {
    GBX_ASSIGN_OR_RETURN(job->world, create_mpi_communicator(e.timeout));
    return job;
  }
  std::string spec = e.store;
  if (spec.empty()) {
    if (e.size == 1) {
      spec = "file:/tmp/gearbox-comm-single-" + std::to_string(getpid());
    } else {
      if (e.master_port == 0)
        return make_error(ErrorCode::COMM_SETUP_FAILED, "rank ", e.rank, " of ", e.size,
                          ": no store: set GEARBOX_STORE or MASTER_ADDR and MASTER_PORT (gearbox launch sets them)");
      if (e.rank == 0) {
        GBX_ASSIGN_OR_RETURN(job->store_server, TcpStoreServer::start(e.master_addr, e.master_port));
      }
      spec = "tcp://" + e.master_addr + ":" + std::to_string(e.master_port);
    }
  }
  GBX_ASSIGN_OR_RETURN(job->store, open_store(spec));
  GBX_ASSIGN_OR_RETURN(auto c, GlooCommunicator::create(job->store, gloo_options(e)));
  job->world = std::move(c);
  return job;
}

GlooOptions gloo_options(const JobEnvironment& e) {
  GlooOptions o;
  o.rank = e.rank;
  o.size = e.size;
  o.timeout = e.timeout;
  o.algorithm = e.algorithm;
  o.bind_address = e.bind_address;
  return o;
}

}  // namespace gearbox::comm
