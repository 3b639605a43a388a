// GroupStats: this process' traffic per communication group (collectives, bytes, seconds per
// op; timeouts and lost peers), published as a small JSON file that `gearbox smi` and its
// Prometheus output read from any other process on the machine.
//
// Why a file: the counters live in the training processes, and smi is another process (like
// nvidia-smi reading the driver). One file per communicator, `<pid>-<n>-<group>-rank<r>.json`
// in GEARBOX_STATS_DIR (default /tmp/gearbox-<uid>/comm), written by the communicator's worker
// thread with a rename (a reader never sees half a file), at most every 0.5 s while collectives
// run and once more when the worker goes idle, so a waiting job shows its final counts; removed
// when the communicator is destroyed. A file whose process is gone is stale and not shown.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace gearbox::comm {

class GroupStats {
 public:
  GroupStats(std::string group, std::string backend, int rank, int size);
  ~GroupStats();  // removes the file
  GroupStats(const GroupStats&) = delete;
  GroupStats& operator=(const GroupStats&) = delete;

  // One collective (or send/recv) finished with `outcome` after `seconds`.
  void record(const char* op, size_t bytes, double seconds, const Status& outcome);
  // Counts not yet in the file, and when they are due (0.5 s after the last write).
  bool pending() const { return pending_; }
  std::chrono::steady_clock::time_point due() const { return last_write_ + kInterval; }
  // Writes the file now (no-op without pending counts).
  void publish();

  nlohmann::json to_json() const;
  const std::string& path() const { return path_; }

  static constexpr std::chrono::milliseconds kInterval{500};

 private:
  struct OpCounts {
    uint64_t calls = 0, bytes = 0;
    double seconds = 0;
  };
  std::string group_, backend_;
  int rank_, size_;
  int64_t started_ms_;
  std::map<std::string, OpCounts> ops_;
  uint64_t timeouts_ = 0, rank_failures_ = 0, other_errors_ = 0;
  bool pending_ = true;  // the first publish announces the group
  std::chrono::steady_clock::time_point last_write_{};
  std::string path_;  // empty when the folder cannot be created (stats are best effort)
};

// GEARBOX_STATS_DIR, else /tmp/gearbox-<uid>/comm.
std::string stats_directory();

// The groups of live processes whose files are in `dir`, each file's JSON plus "file"; files of
// processes that exited, or that do not parse, are counted in *stale.
std::vector<nlohmann::json> read_group_stats(const std::string& dir, int* stale);

// Those groups in Prometheus' text exposition format (counters per group, rank and op).
std::string group_stats_prometheus(const std::vector<nlohmann::json>& groups);

}  // namespace gearbox::comm
