// Rank tables in HCCL's JSON schema: which rank runs on which server and device.
//
//   {"version": "1.0", "server_count": "2", "status": "completed",
//    "server_list": [{"server_id": "10.0.0.1",
//                     "device": [{"device_id": "0", "device_ip": "192.168.1.8", "rank_id": "0"}, ...]},
//                    ...],
//    "group_list": [{"group_name": "dp", "rank_list": [0, 2]}, ...]}   (optional; gearbox's)
//
// Numbers may be JSON numbers or strings of digits (HCCL writes strings). Validation: bad JSON
// or a missing field (RANK_TABLE_INVALID_JSON), a repeated rank_id (RANK_TABLE_DUPLICATE_RANK),
// server_count differing from server_list (RANK_TABLE_COUNT_MISMATCH), rank_ids not 0..N-1 or a
// server without devices (RANK_TABLE_MISSING_DEVICE), a group naming a rank the table lacks
// (RANK_TABLE_UNKNOWN_GROUP_MEMBER).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace gearbox::comm {

struct RankEntry {
  int rank_id = 0;
  std::string server_id;
  int device_id = 0;
  std::string device_ip;
};

struct RankTable {
  std::string version;
  std::string status;
  int server_count = 0;
  std::vector<RankEntry> ranks;  // indexed by rank_id
  // "world" (every rank) plus the table's group_list.
  std::map<std::string, std::vector<int>> groups;
  int size() const { return int(ranks.size()); }
};

Result<RankTable> parse_rank_table(const std::string& text, const std::string& source = "rank table");
Result<RankTable> load_rank_table(const std::string& path);
// A group by name from a rank list: every member must be one of the table's ranks, once.
Status add_group(RankTable& table, const std::string& name, const std::vector<int>& ranks);

}  // namespace gearbox::comm
