// gearbox_comm_rank: a rank program for the launch and MPI tests. It joins the job from its
// environment (comm/environment.h), prints a line or two, and then, as asked:
//   --check-all        runs every collective check (collective_checks.h) on the world group
//   --fail-rank K --exit-code C   rank K exits with code C after the first allreduce
//   --stall-rank K     rank K sleeps 2x the timeout before its 17th allreduce
// Exit code 0 when everything matched.
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "comm/environment.h"
#include "tests/comm/collective_checks.h"

using namespace gearbox;
using namespace gearbox::comm;

int main(int argc, char** argv) {
  bool check_all = false;
  int fail_rank = -1, exit_code = 3, stall_rank = -1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--check-all") check_all = true;
    else if (a == "--fail-rank" && i + 1 < argc) fail_rank = std::atoi(argv[++i]);
    else if (a == "--exit-code" && i + 1 < argc) exit_code = std::atoi(argv[++i]);
    else if (a == "--stall-rank" && i + 1 < argc) stall_rank = std::atoi(argv[++i]);
  }
  auto job = join_job();
  if (!job) {
    std::cerr << job.status().to_string_with_help() << "\n";
    return 1;
  }
  Communicator& world = *(*job)->world;
  std::cout << "hello from rank " << world.rank() << " of " << world.size() << " (" << world.backend() << ")\n"
            << std::flush;
  std::cerr << "stderr line of rank " << world.rank() << "\n" << std::flush;
  Tensor t = Tensor::from_vector<int64_t>({world.rank()});
  if (Status s = world.allreduce(t); !s.ok()) {
    std::cerr << s.to_string_with_help() << "\n";
    return 1;
  }
  std::cout << "sum of ranks " << t.data<int64_t>()[0] << "\n" << std::flush;
  if (world.rank() == fail_rank) return exit_code;
  if (stall_rank >= 0) {
    Tensor x(DType::F32, {256});
    for (int i = 2; i <= 17; ++i) {
      if (i == 17 && world.rank() == stall_rank) std::this_thread::sleep_for(2 * world.timeout() + std::chrono::seconds(1));
      if (Status s = world.allreduce(x); !s.ok()) {
        std::cerr << s.to_string_with_help() << "\n";
        return 1;
      }
    }
  }
  if (check_all) {
    std::string bad = testing::check_all_collectives(world);
    if (!bad.empty()) {
      std::cerr << "MISMATCH: " << bad << "\n";
      return 1;
    }
    std::cout << "all collectives match\n";
  }
  return 0;
}
