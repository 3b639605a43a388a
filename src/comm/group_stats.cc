#include "comm/group_stats.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/strings.h"
#include "comm/trace.h"

namespace gearbox::comm {
namespace {

namespace fs = std::filesystem;

std::string file_safe(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') ? c : '_';
  return out.empty() ? "_" : out;
}

bool process_alive(int64_t pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

}  // namespace

std::string stats_directory() {
  if (const char* d = std::getenv("GEARBOX_STATS_DIR"); d && *d) return d;
  return "/tmp/gearbox-" + std::to_string(::getuid()) + "/comm";
}

GroupStats::GroupStats(std::string group, std::string backend, int rank, int size)
    : group_(std::move(group)), backend_(std::move(backend)), rank_(rank), size_(size), started_ms_(wall_ms()) {
  static std::atomic<int> counter{0};
  const std::string dir = stats_directory();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return;
  // Ranks killed (or _exit()ed) leave their files behind: sweep those of processes that are gone.
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    char* rest = nullptr;
    const long long pid = std::strtoll(name.c_str(), &rest, 10);
    std::error_code ignored;
    if (rest && *rest == '-' && !process_alive(pid)) fs::remove(it->path(), ignored);
  }
  path_ = dir + "/" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + file_safe(group_) + "-rank" +
          std::to_string(rank_) + ".json";
}

GroupStats::~GroupStats() {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove(path_, ec);
}

void GroupStats::record(const char* op, size_t bytes, double seconds, const Status& outcome) {
  if (outcome.ok()) {
    OpCounts& c = ops_[op];
    ++c.calls;
    c.bytes += bytes;
    c.seconds += seconds;
  } else if (outcome.code() == ErrorCode::COMM_TIMEOUT) {
    ++timeouts_;
  } else if (outcome.code() == ErrorCode::COMM_RANK_FAILED) {
    ++rank_failures_;
  } else {
    ++other_errors_;
  }
  pending_ = true;
  if (std::chrono::steady_clock::now() >= due() || !outcome.ok()) publish();
}

nlohmann::json GroupStats::to_json() const {
  nlohmann::json ops = nlohmann::json::object();
  for (const auto& [name, c] : ops_) ops[name] = {{"calls", c.calls}, {"bytes", c.bytes}, {"seconds", c.seconds}};
  return {{"pid", static_cast<int64_t>(::getpid())},
          {"group", group_},
          {"backend", backend_},
          {"rank", rank_},
          {"size", size_},
          {"started_ms", started_ms_},
          {"updated_ms", wall_ms()},
          {"ops", ops},
          {"timeouts", timeouts_},
          {"rank_failures", rank_failures_},
          {"other_errors", other_errors_}};
}

void GroupStats::publish() {
  if (!pending_ || path_.empty()) return;
  pending_ = false;
  last_write_ = std::chrono::steady_clock::now();
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << to_json().dump() << "\n";
    if (!out) return;
  }
  std::rename(tmp.c_str(), path_.c_str());
}

std::vector<nlohmann::json> read_group_stats(const std::string& dir, int* stale) {
  std::vector<nlohmann::json> out;
  *stale = 0;
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".json") files.push_back(it->path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    std::ifstream in(f);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("pid") || !j["pid"].is_number_integer() ||
        !j.contains("ops") || !j["ops"].is_object() || !process_alive(j["pid"].get<int64_t>())) {
      ++*stale;
      continue;
    }
    j["file"] = f.string();
    out.push_back(std::move(j));
  }
  return out;
}

std::string group_stats_prometheus(const std::vector<nlohmann::json>& groups) {
  struct Metric {
    const char* name;
    const char* help;
    const char* field;  // per op; nullptr: the group's own counter in `group_field`
    const char* group_field;
  };
  static const Metric kMetrics[] = {
      {"gearbox_comm_collectives_total", "Collectives completed, per group, rank and op", "calls", nullptr},
      {"gearbox_comm_bytes_total", "Bytes of the tensors those collectives carried, per group, rank and op", "bytes",
       nullptr},
      {"gearbox_comm_seconds_total", "Seconds spent in those collectives, per group, rank and op", "seconds", nullptr},
      {"gearbox_comm_timeouts_total", "Collectives that timed out (COMM_TIMEOUT), per group and rank", nullptr,
       "timeouts"},
      {"gearbox_comm_rank_failures_total", "Collectives that lost a peer (COMM_RANK_FAILED), per group and rank",
       nullptr, "rank_failures"},
  };
  std::ostringstream os;
  for (const Metric& m : kMetrics) {
    os << "# HELP " << m.name << " " << m.help << "\n# TYPE " << m.name << " counter\n";
    for (const auto& g : groups) {
      const std::string labels = "group=\"" + escape_prometheus_label(g.value("group", "")) + "\",rank=\"" +
                                 std::to_string(g.value("rank", -1)) + "\",size=\"" +
                                 std::to_string(g.value("size", 0)) + "\",backend=\"" +
                                 escape_prometheus_label(g.value("backend", "")) + "\",pid=\"" +
                                 std::to_string(g.value("pid", int64_t(0))) + "\"";
      if (m.group_field) {
        os << m.name << "{" << labels << "} " << g.value(m.group_field, uint64_t(0)) << "\n";
        continue;
      }
      for (const auto& [op, c] : g["ops"].items()) {
        if (!c.is_object() || !c.contains(m.field) || !c[m.field].is_number()) continue;
        os << m.name << "{" << labels << ",op=\"" << escape_prometheus_label(op) << "\"} " << c[m.field].dump() << "\n";
      }
    }
  }
  return os.str();
}

}  // namespace gearbox::comm
