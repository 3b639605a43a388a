// Timeouts that diagnose: a planted stall (rank 1 sleeps before its 17th allreduce) and a
// planted crash (rank 2 exits before it) must give, on every surviving rank, a report naming the
// collective number, op, group and the late or missing rank, within timeout + 5 s, and an error
// (COMM_TIMEOUT / COMM_RANK_FAILED) that makes the rank exit non-zero.
#include <gtest/gtest.h>

#include <unistd.h>

#include "comm/gloo_communicator.h"
#include "tests/comm/rank_runner.h"

namespace gearbox::comm {
namespace {
using testing::run_ranks;

constexpr int kTimeoutMs = 3000;

// 16 allreduces, then rank `culprit` misbehaves before the 17th.
std::string job(int rank, int size, const std::string& dir, int culprit, bool crash) {
  auto store = open_store("file:" + dir + "/store");
  GlooOptions o;
  o.rank = rank;
  o.size = size;
  o.timeout = std::chrono::milliseconds(kTimeoutMs);
  auto c = GlooCommunicator::create(*store, o);
  if (!c) return c.status().to_string();
  Tensor t(DType::F32, {1024});
  for (int i = 1; i <= 16; ++i)
    if (Status s = (*c)->allreduce(t); !s.ok()) return "early failure: " + s.to_string();
  if (rank == culprit) {
    // Crash after the peers have surely finished #16 (a rank dying mid-#16 would fail #16 on
    // them: Gloo fails pending ops on a closed pair), with no cleanup, like a crash.
    if (crash) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      _exit(3);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * kTimeoutMs + 1000));
  }
  Status s = (*c)->allreduce(t);
  if (s.ok()) return "OK?! the 17th allreduce succeeded";
  return s.to_string();
}

TEST(CommTimeout, PlantedStallIsReportedOnEveryRankNamingTheLateRank) {
  const int n = 3, culprit = 1;
  auto results = run_ranks(n, "stall", [](int r, int s, const std::string& d) { return job(r, s, d, culprit, false); });
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + results[r].message);
    EXPECT_NE(results[r].exit_code, 0);
    if (r == culprit) continue;  // it wakes up to find its peers gone; its report is a bonus
    EXPECT_NE(results[r].message.find("COMM_TIMEOUT"), std::string::npos);
    EXPECT_NE(results[r].message.find("collective #17 allreduce"), std::string::npos);
    EXPECT_NE(results[r].message.find("group 'world'"), std::string::npos);
    EXPECT_NE(results[r].message.find("rank 1: never joined #17 (last entered #16 allreduce, finished it)"),
              std::string::npos);
    EXPECT_NE(results[r].message.find("never joined: 1"), std::string::npos);
    // The stalled rank is alive (its heartbeat goes on): it must not be called dead.
    EXPECT_EQ(results[r].message.find("heartbeat stopped (dead or hung): 1"), std::string::npos);
  }
}

TEST(CommTimeout, PlantedCrashIsReportedOnEverySurvivorNamingTheDeadRank) {
  const int n = 3, culprit = 2;
  auto results = run_ranks(n, "crash", [](int r, int s, const std::string& d) { return job(r, s, d, culprit, true); });
  EXPECT_EQ(results[culprit].exit_code, 3);
  for (int r = 0; r < n; ++r) {
    if (r == culprit) continue;
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + results[r].message);
    EXPECT_NE(results[r].exit_code, 0);
    // The transport notices the closed connection (COMM_RANK_FAILED) before the timeout, or the
    // timeout fires (COMM_TIMEOUT): either way the report names the collective and rank 2.
    bool coded = results[r].message.find("COMM_RANK_FAILED") != std::string::npos ||
                 results[r].message.find("COMM_TIMEOUT") != std::string::npos;
    EXPECT_TRUE(coded);
    EXPECT_NE(results[r].message.find("collective #17 allreduce"), std::string::npos);
    EXPECT_NE(results[r].message.find("rank 2: never joined #17"), std::string::npos);
    EXPECT_NE(results[r].message.find("heartbeat stopped (dead or hung): 2"), std::string::npos);
  }
}

}  // namespace
}  // namespace gearbox::comm
