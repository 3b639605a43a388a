// bench/allreduce: gearbox's allreduce bandwidth per message size and Gloo algorithm, on N
// local ranks that this program forks itself (file store in a fresh folder).
// nccl-tests' definitions: time = the slowest rank's mean per call; algbw = bytes / time;
// busbw = algbw * 2(n-1)/n. torch_peer.py measures torch.distributed's Gloo backend the same way;
// compare.py alternates the two.
//   gearbox_bench_allreduce --ranks 4 --sizes 4,65536,67108864 --algorithms auto,ring,bcube,halving_doubling
// prints one line per (algorithm, size): "gearbox ALGO RANKS BYTES TIME_US ALGBW_GBS BUSBW_GBS".
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "comm/gloo_communicator.h"

using namespace gearbox;
using namespace gearbox::comm;

static std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(x);
  return out;
}

static int rank_main(int rank, int n, const std::string& dir, const std::vector<size_t>& sizes,
                     const std::vector<std::string>& algos, double min_seconds) {
  auto store = open_store("file:" + dir);
  GlooOptions o;
  o.rank = rank;
  o.size = n;
  o.timeout = std::chrono::seconds(120);
  auto c = GlooCommunicator::create(*store, o);
  if (!c) {
    std::fprintf(stderr, "%s\n", c.status().to_string().c_str());
    return 1;
  }
  for (const std::string& a : algos) {
    Algorithm algo;
    if (!parse_algorithm(a, &algo)) return 2;
    (*c)->set_algorithm(algo);
    for (size_t bytes : sizes) {
      Tensor t(DType::F32, {int64_t(std::max<size_t>(bytes / 4, 1))});
      for (int w = 0; w < 2; ++w) (void)(*c)->allreduce(t);
      // Iteration count agreed by all ranks: rank 0's estimate, broadcast.
      auto t0 = std::chrono::steady_clock::now();
      (void)(*c)->allreduce(t);
      double once = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      Tensor iters = Tensor::from_vector<int64_t>({std::max<int64_t>(3, std::min<int64_t>(1000, int64_t(min_seconds / std::max(once, 1e-6))))});
      (void)(*c)->broadcast(iters, 0);
      (void)(*c)->barrier();
      int64_t k = iters.data<int64_t>()[0];
      t0 = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < k; ++i) (void)(*c)->allreduce(t);
      double per = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / double(k);
      Tensor slowest = Tensor::from_vector<float>({float(per)});
      (void)(*c)->allreduce(slowest, ReduceOp::Max);
      if (rank == 0) {
        double s = slowest.data<float>()[0], algbw = double(t.nbytes()) / s / 1e9;
        std::printf("gearbox %s %d %zu %.1f %.4f %.4f\n", a.c_str(), n, t.nbytes(), s * 1e6, algbw,
                    algbw * 2.0 * (n - 1) / n);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  int n = 2;
  std::string sizes_arg = "4,1024,65536,1048576,16777216,67108864,268435456";
  std::string algos_arg = "auto,ring,bcube,halving_doubling";
  double min_seconds = 0.3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--ranks") n = std::atoi(argv[i + 1]);
    else if (a == "--sizes") sizes_arg = argv[i + 1];
    else if (a == "--algorithms") algos_arg = argv[i + 1];
    else if (a == "--min-seconds") min_seconds = std::atof(argv[i + 1]);
  }
  std::vector<size_t> sizes;
  for (auto& s : split(sizes_arg)) sizes.push_back(std::stoull(s));
  auto algos = split(algos_arg);
  std::string dir = (std::filesystem::temp_directory_path() / ("gbx_bench_allreduce_" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t p = fork();
    if (p == 0) _exit(rank_main(r, n, dir, sizes, algos, min_seconds));
    pids.push_back(p);
  }
  int rc = 0;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
  }
  std::filesystem::remove_all(dir);
  return rc;
}
