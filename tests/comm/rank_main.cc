// gearbox_comm_rank: a rank program for the launch and MPI tests. It joins the job from its
// environment (comm/environment.h), prints a line or two, and then, as asked:
//   --check-all        runs every collective check (collective_checks.h) on the world group
//   --fail-rank K --exit-code C   rank K exits with code C after the first allreduce
//   --stall-rank K     rank K sleeps 2x the timeout before its 17th allreduce
//   --traffic N FLOATS --hold-until FILE   N allreduces and 2 broadcasts of FLOATS float32s,
//                      then FILE.ready.RANK is written and the rank waits (up to 120 s) for
//                      FILE, so a test can read its counters in `gearbox smi` meanwhile
// Exit code 0 when everything matched.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "comm/environment.h"
#include "tests/comm/collective_checks.h"

using namespace gearbox;
using namespace gearbox::comm;

int main(int argc, char** argv) {
  bool check_all = false;
  int fail_rank = -1, exit_code = 3, stall_rank = -1, traffic = 0, traffic_floats = 0;
  std::string hold_until;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--check-all") check_all = true;
    else if (a == "--fail-rank" && i + 1 < argc) fail_rank = std::atoi(argv[++i]);
    else if (a == "--exit-code" && i + 1 < argc) exit_code = std::atoi(argv[++i]);
    else if (a == "--stall-rank" && i + 1 < argc) stall_rank = std::atoi(argv[++i]);
    else if (a == "--traffic" && i + 2 < argc) {
      traffic = std::atoi(argv[++i]);
      traffic_floats = std::atoi(argv[++i]);
    } else if (a == "--hold-until" && i + 1 < argc) hold_until = argv[++i];
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
      if (i == 17 && world.rank() == stall_rank)
        std::this_thread::sleep_for(2 * world.timeout() + std::chrono::seconds(1));
      if (Status s = world.allreduce(x); !s.ok()) {
        std::cerr << s.to_string_with_help() << "\n";
        return 1;
      }
    }
  }
  if (traffic > 0) {
    Tensor x(DType::F32, {traffic_floats});
    for (int i = 0; i < traffic + 2; ++i)
      if (Status s = i < traffic ? world.allreduce(x) : world.broadcast(x, 0); !s.ok()) {
        std::cerr << s.to_string_with_help() << "\n";
        return 1;
      }
    std::ofstream(hold_until + ".ready." + std::to_string(world.rank())) << "ready\n";
    for (int waited = 0; !std::filesystem::exists(hold_until) && waited < 12000; ++waited)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
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
