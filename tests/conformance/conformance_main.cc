// gearbox_conformance: runs the ONNX backend node test suite through gearbox and reports
// pass / fail / unsupported / crash / timeout per case.
//
//   gearbox_conformance --suite DIR [--filter REGEX] [--report FILE.json] [--baseline FILE]
//                       [--timeout-s N] [--threads N] [--via-gbm] [--verbose]
//
// --via-gbm runs each case the way a compiled model runs: the optimized graph is written to
// .gbm bytes and read back (gbm_writer/gbm_reader) before the session is created.
//
// DIR holds one folder per case (model.onnx + test_data_set_*/); a folder whose node/
// subfolder holds them is accepted too. Each case runs in a forked child (case_runner.h),
// so a crash or a hang is recorded as CRASH / TIMEOUT and the run goes on.
//
// With --baseline FILE (the names of the cases that must pass, one per line) the exit status
// is non-zero when a listed case that ran does not pass -- even if another case started
// passing --, when any case crashed or timed out, or when an OP_UNSUPPORTED error fails to name
// the op and its opset; the cases that changed either way are printed. This is what ctest
// runs (tests/conformance/CMakeLists.txt); docs/conformance.md explains how to update the
// baseline (--write-baseline FILE writes the passing cases of a full run).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baseline.h"
#include "case_runner.h"

namespace gearbox::conformance {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string suite;
  std::string filter;
  std::string report;
  std::string baseline;
  std::string write_baseline;
  double timeout_s = 20;
  int threads = 1;
  bool via_gbm = false;
  bool verbose = false;
};

struct CaseRecord {
  std::string name;
  CaseOutcome outcome;
  OpUses ops;
  bool have_ops = false;
  std::string rule_violation;  // check_unsupported_message's finding
  double seconds = 0;
};

const char* kUsage =
    "usage: gearbox_conformance --suite DIR [--filter REGEX] [--report FILE.json] [--baseline FILE]\n"
    "                           [--write-baseline FILE] [--timeout-s N (default 20)] [--threads N (default 1)]\n"
    "                           [--via-gbm]\n"
    "                           [--verbose]\n";

std::optional<Options> parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) {
        std::cerr << "gearbox_conformance: " << a << " needs a value\n";
        return false;
      }
      out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--suite") {
      if (!value(o.suite)) return std::nullopt;
    } else if (a == "--filter") {
      if (!value(o.filter)) return std::nullopt;
    } else if (a == "--report") {
      if (!value(o.report)) return std::nullopt;
    } else if (a == "--baseline") {
      if (!value(o.baseline)) return std::nullopt;
    } else if (a == "--write-baseline") {
      if (!value(o.write_baseline)) return std::nullopt;
    } else if (a == "--timeout-s" || a == "--threads") {
      if (!value(v)) return std::nullopt;
      char* end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || d <= 0) {
        std::cerr << "gearbox_conformance: " << a << " needs a positive number, got '" << v << "'\n";
        return std::nullopt;
      }
      if (a == "--timeout-s") o.timeout_s = d;
      else o.threads = static_cast<int>(d);
    } else if (a == "--via-gbm") {
      o.via_gbm = true;
    } else if (a == "--verbose" || a == "-v") {
      o.verbose = true;
    } else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else {
      std::cerr << "gearbox_conformance: unknown option '" << a << "'\n" << kUsage;
      return std::nullopt;
    }
  }
  if (o.suite.empty()) {
    std::cerr << "gearbox_conformance: --suite is required\n" << kUsage;
    return std::nullopt;
  }
  return o;
}

bool is_case_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p / "model.onnx", ec);
}

// Case folders under `suite` (or under suite/node), sorted by name.
std::vector<fs::path> list_cases(fs::path suite) {
  std::vector<fs::path> cases;
  std::error_code ec;
  for (int attempt = 0; attempt < 2 && cases.empty(); ++attempt) {
    for (const auto& e : fs::directory_iterator(suite, ec))
      if (e.is_directory() && is_case_dir(e.path())) cases.push_back(e.path());
    suite /= "node";
  }
  std::sort(cases.begin(), cases.end());
  return cases;
}

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

json outcome_json(const CaseOutcome& o) {
  return {{"status", static_cast<int>(o.status)}, {"code", o.code}, {"code_num", o.code_num}, {"message", o.message}};
}

// The child: runs the case and writes "O <ops json>\n" (right after import) and
// "R <outcome json>\n" to fd. Never returns.
[[noreturn]] void child_main(const fs::path& dir, const Options& opt, int fd) {
  if (!opt.verbose) {
    // Kernel logging or library noise must not interleave with the one-line-per-case output.
    int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) {
      ::dup2(null_fd, 1);
      ::dup2(null_fd, 2);
      ::close(null_fd);
    }
  }
  CaseOptions copt;
  copt.threads = opt.threads;
  copt.via_gbm = opt.via_gbm;
  CaseOutcome outcome = run_case(dir.string(), copt, [&](const OpUses& ops) {
    json j = json::object();
    for (const auto& [op, opset] : ops) j[op] = opset;
    write_all(fd, "O " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
  });
  write_all(fd, "R " + outcome_json(outcome).dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
  ::close(fd);
  std::fflush(nullptr);
  ::_exit(0);
}

std::string signal_description(int sig) {
  const char* d = ::strsignal(sig);
  return "killed by signal " + std::to_string(sig) + (d ? " (" + std::string(d) + ")" : std::string());
}

CaseRecord run_forked(const fs::path& dir, const Options& opt) {
  CaseRecord rec;
  rec.name = dir.filename().string();
  const auto start = Clock::now();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    rec.outcome = {CaseStatus::Crash, "", 0, std::string("pipe failed: ") + std::strerror(errno)};
    return rec;
  }
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    rec.outcome = {CaseStatus::Crash, "", 0, std::string("fork failed: ") + std::strerror(errno)};
    return rec;
  }
  if (pid == 0) {
    ::close(fds[0]);
    child_main(dir, opt, fds[1]);
  }
  ::close(fds[1]);

  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.timeout_s));
  std::string data;
  bool eof = false, timed_out = false;
  char buf[65536];
  while (!eof) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) eof = true;
    else data.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);

  // The pipe closes when the child exits; give a child that closed it early the rest of
  // the deadline before killing it.
  int wstatus = 0;
  bool reaped = false;
  while (!timed_out) {
    pid_t w = ::waitpid(pid, &wstatus, WNOHANG);
    if (w == pid) {
      reaped = true;
      break;
    }
    if (w < 0 && errno != EINTR) break;
    if (Clock::now() >= deadline) {
      timed_out = true;
      break;
    }
    ::usleep(2000);
  }
  if (!reaped) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
  }
  rec.seconds = std::chrono::duration<double>(Clock::now() - start).count();

  std::optional<CaseOutcome> result;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t nl = data.find('\n', pos);
    if (nl == std::string::npos) break;  // a partial line: the child died while writing
    std::string line = data.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.size() < 2) continue;
    json j = json::parse(line.substr(2), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) continue;
    if (line[0] == 'O' && j.is_object()) {
      for (auto it = j.begin(); it != j.end(); ++it) rec.ops[it.key()] = it.value().get<int>();
      rec.have_ops = true;
    } else if (line[0] == 'R' && j.is_object()) {
      CaseOutcome o;
      o.status = static_cast<CaseStatus>(j.value("status", 1));
      o.code = j.value("code", "");
      o.code_num = j.value("code_num", 0);
      o.message = j.value("message", "");
      result = o;
    }
  }

  if (result) {
    rec.outcome = *result;
  } else if (timed_out) {
    rec.outcome = {CaseStatus::Timeout, "", 0, "no result after " + std::to_string(opt.timeout_s).substr(0, 6) + " s; killed"};
  } else if (WIFSIGNALED(wstatus)) {
    rec.outcome = {CaseStatus::Crash, "", 0, signal_description(WTERMSIG(wstatus))};
  } else {
    rec.outcome = {CaseStatus::Crash, "", 0,
                   "exited with status " + std::to_string(WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1) +
                       " without a result"};
  }
  rec.rule_violation = check_unsupported_message(rec.outcome, rec.ops);
  return rec;
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > 400) s = s.substr(0, 400) + "...";
  return s;
}

// The op an OP_UNSUPPORTED message is about: the longest model op type that appears in it
// as a whole word ("Conv" must not match inside "ConvTranspose").
std::string unsupported_op(const CaseRecord& r) {
  std::string best;
  for (const auto& [qualified, opset] : r.ops) {
    auto dot = qualified.rfind('.');
    std::string op = dot == std::string::npos ? qualified : qualified.substr(dot + 1);
    const std::string& m = r.outcome.message;
    for (size_t p = m.find(op); p != std::string::npos; p = m.find(op, p + 1)) {
      auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
      bool left_ok = p == 0 || !word(m[p - 1]);
      bool right_ok = p + op.size() >= m.size() || !word(m[p + op.size()]);
      if (left_ok && right_ok && qualified.size() > best.size()) best = qualified;
    }
  }
  return best;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::optional<std::set<std::string>> read_baseline(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return parse_baseline(text.str());
}

int run(const Options& opt) {
  std::optional<std::regex> filter;
  if (!opt.filter.empty()) {
    try {
      filter.emplace(opt.filter, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      std::cerr << "gearbox_conformance: --filter '" << opt.filter << "' is not a valid regex: " << e.what() << "\n";
      return 2;
    }
  }
  std::optional<std::set<std::string>> baseline;
  if (!opt.baseline.empty()) {
    baseline = read_baseline(opt.baseline);
    if (!baseline) {
      std::cerr << "gearbox_conformance: cannot read the baseline file " << opt.baseline
                << " (one passing case name per line, test_...)\n";
      return 2;
    }
  }
  std::vector<fs::path> cases;
  for (auto& c : list_cases(opt.suite))
    if (!filter || std::regex_search(c.filename().string(), *filter)) cases.push_back(c);
  if (cases.empty()) {
    std::cerr << "gearbox_conformance: no cases in " << opt.suite
              << (opt.filter.empty() ? "" : " matching '" + opt.filter + "'")
              << " (expected folders holding model.onnx; generate the suite with "
                 "/usr/bin/python3 scripts/gen_node_suite.py DIR)\n";
    return 2;
  }

  std::vector<CaseRecord> records;
  int counts[5] = {0, 0, 0, 0, 0};
  int violations = 0;
  for (const auto& dir : cases) {
    CaseRecord r = run_forked(dir, opt);
    ++counts[static_cast<int>(r.outcome.status)];
    std::string reason;
    if (!r.outcome.code.empty()) reason = r.outcome.code + ": ";
    reason += r.outcome.message;
    std::cout << status_name(r.outcome.status) << " " << r.name;
    if (!reason.empty()) std::cout << "  " << one_line(reason);
    std::cout << "\n";
    if (!r.rule_violation.empty()) {
      ++violations;
      std::cout << "  RULE " << r.name << ": " << r.rule_violation << "\n";
    }
    if (opt.verbose) std::cout << "  (" << r.seconds << " s)\n";
    std::cout.flush();
    records.push_back(std::move(r));
  }

  const int passed = counts[0], failed = counts[1], unsupported = counts[2], crashed = counts[3], timed_out = counts[4];
  const int total = static_cast<int>(records.size());
  std::map<std::string, int> by_code, by_op;
  for (const auto& r : records) {
    if (r.outcome.status != CaseStatus::Unsupported) continue;
    ++by_code[r.outcome.code];
    if (r.outcome.code == "OP_UNSUPPORTED") {
      std::string op = unsupported_op(r);
      ++by_op[op.empty() ? "?" : op];
    }
  }
  std::cout << "conformance: " << passed << " passed, " << failed << " failed, " << unsupported << " unsupported, "
            << crashed << " crashed, " << timed_out << " timed out of " << total << "\n";
  if (!by_op.empty()) {
    std::vector<std::pair<std::string, int>> top(by_op.begin(), by_op.end());
    std::stable_sort(top.begin(), top.end(), [](auto& a, auto& b) { return a.second > b.second; });
    std::cout << "top unsupported ops:";
    for (size_t i = 0; i < top.size() && i < 20; ++i) std::cout << " " << top[i].first << "(" << top[i].second << ")";
    std::cout << "\n";
  }

  int rc = 0;
  if (baseline) {
    // Per case: a listed case that ran and did not pass is a regression, whatever else
    // started passing; a passing case not listed is progress to record.
    std::vector<CaseResult> results;
    for (const auto& r : records)
      results.push_back({r.name, r.outcome.status == CaseStatus::Pass, status_name(r.outcome.status)});
    const BaselineDiff d = diff_baseline(results, *baseline, [&](const std::string& name) {
      return !filter || std::regex_search(name, *filter);
    });
    const auto& regressed = d.regressed;
    const auto& newly_passing = d.newly_passing;
    const auto& not_in_suite = d.missing;
    std::cout << "baseline " << opt.baseline << ": " << d.listed_ran << " listed case(s) ran, " << regressed.size()
              << " no longer pass, " << newly_passing.size() << " pass and are not listed\n";
    for (const std::string& n : regressed) std::cout << "  REGRESSED " << n << "\n";
    for (const std::string& n : newly_passing) std::cout << "  NEWLY PASSING " << n << "\n";
    for (const std::string& n : not_in_suite) std::cout << "  MISSING " << n << " (listed, not in the suite)\n";
    if (d.failed()) {
      std::cout << "conformance FAILED: " << regressed.size() << " case(s) of the baseline no longer pass, "
                << not_in_suite.size() << " are missing from the suite (lines above)\n";
      rc = 1;
    } else if (!newly_passing.empty()) {
      std::cout << "more cases pass than the baseline: add the NEWLY PASSING names to " << opt.baseline
                << " (or rerun the full suite with --write-baseline " << opt.baseline << ")\n";
    }
    if (crashed + timed_out > 0) {
      std::cout << "conformance FAILED: " << crashed << " crashed, " << timed_out << " timed out (must be 0)\n";
      rc = 1;
    }
    if (violations > 0) {
      std::cout << "conformance FAILED: " << violations
                << " OP_UNSUPPORTED errors do not name the op and its opset (lines marked RULE)\n";
      rc = 1;
    }
  }

  if (!opt.report.empty()) {
    json summary = {{"total", total},        {"passed", passed},   {"failed", failed},
                    {"unsupported", unsupported}, {"crashed", crashed}, {"timed_out", timed_out},
                    {"rule_violations", violations}, {"suite", opt.suite}, {"filter", opt.filter},
                    {"unsupported_by_code", by_code}, {"unsupported_ops", by_op}};
    summary["baseline"] = baseline ? json(baseline->size()) : json(nullptr);
    json jcases = json::array();
    for (const auto& r : records) {
      json ops = json::array();
      for (const auto& [op, opset] : r.ops) ops.push_back(op);
      json c = {{"name", r.name},       {"status", lower(status_name(r.outcome.status))},
                {"code", r.outcome.code}, {"code_num", r.outcome.code_num},
                {"message", r.outcome.message}, {"ops", ops},
                {"seconds", r.seconds}};
      if (!r.ops.empty()) {
        json opsets = json::object();
        for (const auto& [op, opset] : r.ops) opsets[op] = opset;
        c["opsets"] = opsets;
      }
      if (!r.rule_violation.empty()) c["rule_violation"] = r.rule_violation;
      jcases.push_back(std::move(c));
    }
    json report = {{"summary", summary}, {"cases", jcases}};
    std::ofstream out(opt.report);
    out << report.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
    if (!out) {
      std::cerr << "gearbox_conformance: cannot write report " << opt.report << "\n";
      return 2;
    }
  }
  if (!opt.write_baseline.empty()) {
    // The passing cases of this run, sorted: what a new baseline.txt holds. Refused for a
    // filtered run, which would drop every case it skipped.
    if (filter) {
      std::cerr << "gearbox_conformance: --write-baseline needs the full suite (no --filter)\n";
      return 2;
    }
    std::ofstream out(opt.write_baseline);
    out << "# The ONNX node-suite cases (onnx 1.12) gearbox passes: gearbox_conformance fails when one of\n"
           "# them no longer passes. Written by gearbox_conformance --write-baseline from a full run;\n"
           "# docs/conformance.md. "
        << passed << " of " << total << " cases.\n";
    for (const auto& r : records)
      if (r.outcome.status == CaseStatus::Pass) out << r.name << "\n";
    if (!out) {
      std::cerr << "gearbox_conformance: cannot write " << opt.write_baseline << "\n";
      return 2;
    }
  }
  return rc;
}

}  // namespace
}  // namespace gearbox::conformance

int main(int argc, char** argv) {
  auto opt = gearbox::conformance::parse_args(argc, argv);
  if (!opt) return 2;
  return gearbox::conformance::run(*opt);
}
