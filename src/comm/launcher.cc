// The launcher behind `gearbox launch` (src/tools/launch_command.cc): see launcher.h.
#include "comm/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <optional>
#include <string>

#include "comm/rank_table.h"
#include "comm/store.h"

namespace gearbox::comm {
namespace {

// mpirun --tag-output's "[JOB,RANK]<stdout>:" (or <stderr>) prefix as "[rank RANK] "; any other
// line unchanged. Parsed by hand: GCC 12's std::regex trips -Werror=maybe-uninitialized at -O1.
std::string retag_mpi_line(const std::string& line) {
  auto digits = [&](size_t i) {
    size_t j = i;
    while (j < line.size() && line[j] >= '0' && line[j] <= '9') ++j;
    return j;
  };
  if (line.empty() || line[0] != '[') return line;
  const size_t job_end = digits(1);
  if (job_end == 1 || job_end >= line.size() || line[job_end] != ',') return line;
  const size_t rank_end = digits(job_end + 1);
  if (rank_end == job_end + 1) return line;
  for (const char* tag : {"]<stdout>:", "]<stderr>:"})
    if (line.compare(rank_end, std::strlen(tag), tag) == 0)
      return "[rank " + line.substr(job_end + 1, rank_end - job_end - 1) + "] " + line.substr(rank_end + std::strlen(tag));
  return line;
}

LaunchResult fail(Status s) { return {s.code() == ErrorCode::USAGE ? 2 : 1, std::move(s)}; }

volatile std::sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

struct Rank {
  pid_t pid = -1;
  int out = -1, err = -1;
  std::string out_line, err_line;
  std::optional<int> exit_code;  // set when reaped; 128+sig when killed
  std::string how;               // "exit code 3", "signal 9 (Killed)"
};

// Writes complete lines of `chunk` with the prefix; keeps the unfinished tail in `pending`.
void emit(std::ostream& os, const std::string& prefix, std::string& pending, const char* chunk, size_t n) {
  pending.append(chunk, n);
  size_t start = 0, nl;
  while ((nl = pending.find('\n', start)) != std::string::npos) {
    os << prefix << pending.substr(start, nl - start + 1);
    start = nl + 1;
  }
  pending.erase(0, start);
  os.flush();
}

}  // namespace

LaunchResult launch(const LaunchOptions& o_in, std::ostream& out_stream, std::ostream& err_stream) {
  LaunchOptions o = o_in;
  g_signal = 0;
  if (o.program.empty()) return fail(make_error(ErrorCode::USAGE, "launch: no program given (gearbox launch -n N -- PROGRAM ARGS)"));
  if (!o.rank_table.empty()) {
    auto t = load_rank_table(o.rank_table);
    if (!t) return fail(t.status());
    if (o.n == 0) o.n = t->size();
    if (o.n != t->size())
      return fail(make_error(ErrorCode::RANK_TABLE_MISSING_DEVICE, "launch: -n ", o.n, " but the rank table ",
                               o.rank_table, " lists ", t->size(), " ranks"));
  }
  if (o.n < 1) return fail(make_error(ErrorCode::USAGE, "launch: -n must be at least 1 (got ", o.n, ")"));
  if (o.backend != "gloo" && o.backend != "mpi")
    return fail(make_error(ErrorCode::USAGE, "launch: --backend '", o.backend, "': use gloo or mpi"));
  size_t colon = o.master.rfind(':');
  if (colon == std::string::npos)
    return fail(make_error(ErrorCode::USAGE, "launch: --master '", o.master, "': expected ADDR:PORT"));
  std::string addr = o.master.substr(0, colon);
  int port = std::atoi(o.master.c_str() + colon + 1);

  // The job's store: gearbox ranks rendezvous on it; MASTER_PORT is left to the program
  // (torch.distributed binds it itself), so the store takes another port when none is given.
  auto server = TcpStoreServer::start(addr, port);
  if (!server) return fail(server.status());
  int store_port = (*server)->port();
  int program_port = store_port + 1;
  if (port == 0) {
    // a second free port for MASTER_PORT
    auto probe = TcpStoreServer::start(addr, 0);
    if (probe) program_port = (*probe)->port();
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::vector<std::string> argv_s = o.program;
  int n_procs = o.n;
  if (o.backend == "mpi") {
    // mpirun starts the ranks; --tag-output marks each line "[jobid,rank]<stdout>:" which is
    // rewritten to gearbox's prefix below.
    argv_s = {"mpirun", "-n", std::to_string(o.n), "--oversubscribe", "--tag-output"};
    if (geteuid() == 0) argv_s.push_back("--allow-run-as-root");
    argv_s.insert(argv_s.end(), o.program.begin(), o.program.end());
    n_procs = 1;
  }

  std::vector<Rank> ranks(n_procs);
  for (int r = 0; r < n_procs; ++r) {
    int out[2], err[2];
    if (pipe(out) != 0 || pipe(err) != 0)
      return fail(make_error(ErrorCode::LAUNCH_RANK_FAILED, "launch: pipe() failed: ", std::strerror(errno)));
    pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);  // signals reach a rank only through the launcher's forwarding
      dup2(out[1], 1);
      dup2(err[1], 2);
      close(out[0]);
      close(err[0]);
      close(out[1]);
      close(err[1]);
      auto set = [](const char* k, const std::string& v) { setenv(k, v.c_str(), 1); };
      std::string store = "tcp://" + addr + ":" + std::to_string(store_port);
      set("GEARBOX_STORE", store);
      set("GEARBOX_COMM_BACKEND", o.backend);
      set("MASTER_ADDR", addr);
      set("MASTER_PORT", std::to_string(program_port));
      if (o.timeout_s > 0) set("GEARBOX_COMM_TIMEOUT", std::to_string(o.timeout_s));
      if (!o.rank_table.empty()) set("GEARBOX_RANK_TABLE", o.rank_table);
      if (o.backend == "gloo") {
        for (const char* k : {"RANK", "GEARBOX_RANK", "LOCAL_RANK"}) set(k, std::to_string(r));
        for (const char* k : {"WORLD_SIZE", "GEARBOX_WORLD_SIZE", "LOCAL_WORLD_SIZE"}) set(k, std::to_string(o.n));
      }
      std::vector<char*> argv;
      for (std::string& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      std::fprintf(stderr, "gearbox launch: cannot start %s: %s\n", argv[0], std::strerror(errno));
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    ranks[r].pid = pid;
    ranks[r].out = out[0];
    ranks[r].err = err[0];
  }

  auto prefix_for = [&](int r) { return o.backend == "mpi" ? std::string() : "[rank " + std::to_string(r) + "] "; };
  auto forward = [&](int r, int fd, bool is_err) {
    char buf[65536];
    ssize_t got = read(fd, buf, sizeof(buf));
    if (got <= 0) {
      std::string& pending = is_err ? ranks[r].err_line : ranks[r].out_line;
      if (!pending.empty()) (is_err ? err_stream : out_stream) << prefix_for(r) << pending << "\n" << std::flush;
      pending.clear();
      close(fd);
      return false;
    }
    std::string& pending = is_err ? ranks[r].err_line : ranks[r].out_line;
    if (o.backend == "mpi") {
      // rewrite "[1,k]<stdout>:" to "[rank k] " line by line
      std::string lines;
      pending.append(buf, size_t(got));
      size_t start = 0, nl;
      while ((nl = pending.find('\n', start)) != std::string::npos) {
        std::string line = pending.substr(start, nl - start);
        line = retag_mpi_line(line);
        lines += line + "\n";
        start = nl + 1;
      }
      pending.erase(0, start);
      (is_err ? err_stream : out_stream) << lines << std::flush;
      return true;
    }
    emit(is_err ? err_stream : out_stream, prefix_for(r), pending, buf, size_t(got));
    return true;
  };

  std::optional<std::chrono::steady_clock::time_point> first_failure;
  int forwarded = 0;
  bool terminated = false;
  for (;;) {
    if (g_signal && g_signal != forwarded) {
      forwarded = g_signal;
      for (Rank& rk : ranks)
        if (!rk.exit_code) kill(rk.pid, forwarded);
    }
    std::vector<pollfd> fds;
    std::vector<std::pair<int, bool>> owner;
    for (int r = 0; r < n_procs; ++r) {
      if (ranks[r].out >= 0) fds.push_back({ranks[r].out, POLLIN, 0}), owner.push_back({r, false});
      if (ranks[r].err >= 0) fds.push_back({ranks[r].err, POLLIN, 0}), owner.push_back({r, true});
    }
    if (!fds.empty() && poll(fds.data(), fds.size(), 50) > 0) {
      for (size_t i = 0; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        auto [r, is_err] = owner[i];
        if (!forward(r, fds[i].fd, is_err)) (is_err ? ranks[r].err : ranks[r].out) = -1;
      }
    } else if (fds.empty()) {
      usleep(20000);
    }
    int status = 0;
    pid_t p;
    while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
      for (Rank& rk : ranks) {
        if (rk.pid != p) continue;
        if (WIFEXITED(status)) {
          rk.exit_code = WEXITSTATUS(status);
          rk.how = "exit code " + std::to_string(*rk.exit_code);
        } else if (WIFSIGNALED(status)) {
          rk.exit_code = 128 + WTERMSIG(status);
          rk.how = "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
        }
        if (*rk.exit_code != 0 && !first_failure) first_failure = std::chrono::steady_clock::now();
      }
    }
    bool all_done = true, pipes_open = false;
    for (Rank& rk : ranks) {
      all_done = all_done && rk.exit_code.has_value();
      pipes_open = pipes_open || rk.out >= 0 || rk.err >= 0;
    }
    if (all_done && !pipes_open) break;
    // After a failure the others get --grace seconds to notice it and report, then SIGTERM,
    // and SIGKILL 5 s later.
    if (first_failure) {
      double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - *first_failure).count();
      if (since > o.grace_s && !terminated) {
        terminated = true;
        for (Rank& rk : ranks)
          if (!rk.exit_code) kill(rk.pid, SIGTERM);
      }
      if (since > o.grace_s + 5)
        for (Rank& rk : ranks)
          if (!rk.exit_code) kill(rk.pid, SIGKILL);
    }
  }

  std::string failed;
  int code = 0;
  for (int r = 0; r < n_procs; ++r) {
    if (*ranks[r].exit_code == 0) continue;
    std::string who = o.backend == "mpi" ? "mpirun" : "rank " + std::to_string(r);
    failed += (failed.empty() ? "" : ", ") + who + " (" + ranks[r].how + ")";
    if (code == 0) code = *ranks[r].exit_code;
  }
  if (code == 0) return {0, Status::OK()};
  return {code, make_error(ErrorCode::LAUNCH_RANK_FAILED, "launch: ", failed, (g_signal ? " after a forwarded signal" : ""))};
}


}  // namespace gearbox::comm
