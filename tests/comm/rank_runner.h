// Spawns the ranks of a test job as child processes of the test (fork), each with its own
// communicator on 127.0.0.1, and collects what each reported. A rank's body returns "" when
// everything matched and a description of the first mismatch otherwise.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace gearbox::comm::testing {

struct RankResult {
  int exit_code = -1;   // -1: killed or did not finish
  std::string message;  // what the body returned (or its report)
};

inline std::string fresh_dir(const std::string& name) {
  std::random_device rd;
  auto dir = std::filesystem::temp_directory_path() /
             ("gbx_comm_" + name + "_" + std::to_string(getpid()) + "_" + std::to_string(rd()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

// body(rank, size, dir) runs in the child; dir is a fresh folder the ranks share (file store).
inline std::vector<RankResult> run_ranks(int n, const std::string& name,
                                         const std::function<std::string(int, int, const std::string&)>& body,
                                         int deadline_s = 60) {
  std::string dir = fresh_dir(name);
  std::vector<pid_t> pids(n);
  auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < n; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) {
      std::string msg = body(r, n, dir);
      std::ofstream(dir + "/result." + std::to_string(r)) << msg;
      std::fflush(nullptr);
      _exit(msg.empty() ? 0 : 1);
    }
  }
  std::vector<RankResult> results(n);
  int left = n;
  while (left > 0) {
    int status = 0;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p > 0) {
      for (int r = 0; r < n; ++r)
        if (pids[r] == p) {
          results[r].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
          --left;
        }
      continue;
    }
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(deadline_s)) {
      for (int r = 0; r < n; ++r)
        if (results[r].exit_code == -1) kill(pids[r], SIGKILL);
      while (waitpid(-1, &status, 0) > 0) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < n; ++r) {
    std::ifstream in(dir + "/result." + std::to_string(r));
    results[r].message.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return results;
}

}  // namespace gearbox::comm::testing
