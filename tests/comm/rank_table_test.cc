// Rank tables (HCCL's schema): a valid table parses; each kind of malformed table fails with
// its own catalogue code; groups from the table give working communicators on their members.
#include <gtest/gtest.h>

#include "comm/gloo_communicator.h"
#include "comm/rank_table.h"
#include "tests/comm/rank_runner.h"

namespace gearbox::comm {
namespace {

const char* kTable = R"({
  "version": "1.0", "server_count": "2", "status": "completed",
  "server_list": [
    {"server_id": "10.0.0.1", "device": [{"device_id": "0", "device_ip": "192.168.1.8", "rank_id": "0"},
                                         {"device_id": "1", "device_ip": "192.168.1.9", "rank_id": "1"}]},
    {"server_id": "10.0.0.2", "device": [{"device_id": "0", "device_ip": "192.168.2.8", "rank_id": 2},
                                         {"device_id": "1", "device_ip": "192.168.2.9", "rank_id": 3}]}],
  "group_list": [{"group_name": "dp", "rank_list": [0, 2]}, {"group_name": "mp", "rank_list": ["1", "3"]}]
})";

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(RankTable, ParsesHcclSchemaWithStringsOrNumbers) {
  auto t = parse_rank_table(kTable);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->size(), 4);
  EXPECT_EQ(t->server_count, 2);
  EXPECT_EQ(t->ranks[2].server_id, "10.0.0.2");
  EXPECT_EQ(t->ranks[3].device_ip, "192.168.2.9");
  EXPECT_EQ(t->groups.at("world"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(t->groups.at("mp"), (std::vector<int>{1, 3}));
}

TEST(RankTable, EachMalformationHasItsOwnCode) {
  struct Case {
    std::string text;
    ErrorCode code;
  } cases[] = {
      {replaced(kTable, "\"status\": \"completed\",", "\"status\": \"completed\""), ErrorCode::RANK_TABLE_INVALID_JSON},
      {replaced(kTable, "\"rank_id\": 3", "\"rank_id\": 1"), ErrorCode::RANK_TABLE_DUPLICATE_RANK},
      {replaced(kTable, "\"server_count\": \"2\"", "\"server_count\": \"3\""), ErrorCode::RANK_TABLE_COUNT_MISMATCH},
      {replaced(kTable, "\"rank_id\": 3", "\"rank_id\": 5"), ErrorCode::RANK_TABLE_MISSING_DEVICE},
      {replaced(kTable, "\"rank_list\": [0, 2]", "\"rank_list\": [0, 4]"), ErrorCode::RANK_TABLE_UNKNOWN_GROUP_MEMBER},
      {replaced(kTable, "\"version\": \"1.0\",", ""), ErrorCode::RANK_TABLE_INVALID_JSON},
  };
  for (const Case& c : cases) {
    auto t = parse_rank_table(c.text, "t.json");
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), c.code) << t.status().to_string();
    EXPECT_NE(t.status().message().find("t.json"), std::string::npos);
  }
  auto dup = parse_rank_table(replaced(kTable, "\"rank_id\": 3", "\"rank_id\": 1"));
  EXPECT_NE(dup.status().message().find("rank_id 1 appears twice"), std::string::npos) << dup.status().message();
}

// dp = {0, 2} and mp = {1, 3} from the table, each allreducing its members' ranks while the
// world group allreduces too, interleaved: the sums say each group reached exactly its members.
TEST(RankTable, GroupsFromTheTableReduceOverTheirMembersOnly) {
  auto results = testing::run_ranks(4, "groups", [](int rank, int size, const std::string& dir) -> std::string {
    auto table = parse_rank_table(kTable);
    if (!table) return table.status().to_string();
    auto store = open_store("file:" + dir + "/store");
    GlooOptions o;
    o.rank = rank;
    o.size = size;
    o.timeout = std::chrono::seconds(20);
    auto world = GlooCommunicator::create(*store, o);
    if (!world) return world.status().to_string();
    std::unique_ptr<GlooCommunicator> mine[2];
    const char* names[2] = {"dp", "mp"};
    for (int g = 0; g < 2; ++g) {
      auto c = GlooCommunicator::create_group(*store, o, names[g], table->groups.at(names[g]));
      if (!c) return c.status().to_string();
      mine[g] = std::move(*c);
    }
    GlooCommunicator* group = mine[0] ? mine[0].get() : mine[1].get();
    if (!group || (mine[0] && mine[1])) return "rank is in a wrong number of groups";
    Tensor t = Tensor::from_vector<int64_t>({int64_t(1) << rank});
    Tensor w = Tensor::from_vector<int64_t>({int64_t(1) << rank});
    if (Status s = group->allreduce(t); !s.ok()) return s.to_string();
    if (Status s = (*world)->allreduce(w); !s.ok()) return s.to_string();
    int64_t want = rank % 2 == 0 ? (1 | 4) : (2 | 8);
    if (t.data<int64_t>()[0] != want) return "group sum " + std::to_string(t.data<int64_t>()[0]);
    if (w.data<int64_t>()[0] != 15) return "world sum " + std::to_string(w.data<int64_t>()[0]);
    if (group->group() != (rank % 2 == 0 ? "dp" : "mp") || group->size() != 2 || group->rank() != rank / 2)
      return "group identity wrong";
    return "";
  });
  for (size_t r = 0; r < results.size(); ++r) EXPECT_EQ(results[r].exit_code, 0) << results[r].message;
}

}  // namespace
}  // namespace gearbox::comm
