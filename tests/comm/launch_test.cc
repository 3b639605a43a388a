// gearbox launch's core (comm/launcher.h): rank environments, "[rank k] " prefixes, the exit
// code and the named rank when one fails, a stall's desync report on every rank, mpirun's
// environment, and a rank table that sets N.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "comm/launcher.h"
#include "tests/comm/rank_runner.h"

namespace gearbox::comm {
namespace {

struct Ran {
  LaunchResult result;
  std::string out, err;
};

Ran run(LaunchOptions o) {
  std::ostringstream out, err;
  Ran r;
  r.result = launch(o, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

LaunchOptions with(int n, std::vector<std::string> args) {
  LaunchOptions o;
  o.n = n;
  o.program = {GEARBOX_COMM_RANK};
  o.program.insert(o.program.end(), args.begin(), args.end());
  o.grace_s = 10;
  return o;
}

TEST(Launch, StartsEveryRankWithItsEnvironmentAndPrefixesItsLines) {
  Ran r = run(with(3, {}));
  EXPECT_EQ(r.result.exit_code, 0) << r.err;
  for (int k = 0; k < 3; ++k) {
    EXPECT_NE(r.out.find("[rank " + std::to_string(k) + "] hello from rank " + std::to_string(k) + " of 3 (gloo)\n"),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[rank " + std::to_string(k) + "] sum of ranks 3\n"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("[rank " + std::to_string(k) + "] stderr line of rank " + std::to_string(k) + "\n"),
              std::string::npos) << r.err;
  }
}

TEST(Launch, AFailingRankGivesItsExitCodeAndIsNamed) {
  Ran r = run(with(2, {"--fail-rank", "1", "--exit-code", "7"}));
  EXPECT_EQ(r.result.exit_code, 7);
  EXPECT_EQ(r.result.status.code(), ErrorCode::LAUNCH_RANK_FAILED);
  EXPECT_NE(r.result.status.message().find("rank 1 (exit code 7)"), std::string::npos) << r.result.status.message();
  EXPECT_EQ(r.result.status.message().find("rank 0"), std::string::npos) << r.result.status.message();
}

TEST(Launch, AStallIsReportedOnEveryRankThroughTheLaunchersStore) {
  LaunchOptions o = with(3, {"--stall-rank", "2"});
  o.timeout_s = 2;
  Ran r = run(o);
  EXPECT_NE(r.result.exit_code, 0);
  for (int k : {0, 1}) {
    std::string line = "[rank " + std::to_string(k) + "] [gearbox comm] GBX-E10001 COMM_TIMEOUT: collective #17 allreduce";
    EXPECT_NE(r.err.find(line), std::string::npos) << r.err;
  }
  EXPECT_NE(r.err.find("rank 2: never joined #17"), std::string::npos) << r.err;
}

TEST(Launch, RankTableSetsTheNumberOfRanksAndAMismatchIsAnError) {
  std::string dir = testing::fresh_dir("table");
  std::string path = dir + "/table.json";
  std::ofstream(path) << R"({"version": "1.0", "server_count": "1", "status": "completed",
    "server_list": [{"server_id": "127.0.0.1", "device": [{"device_id": "0", "rank_id": "0"},
                                                          {"device_id": "1", "rank_id": "1"}]}]})";
  LaunchOptions o = with(0, {});
  o.rank_table = path;
  Ran r = run(o);
  EXPECT_EQ(r.result.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[rank 1] hello from rank 1 of 2"), std::string::npos) << r.out;
  o.n = 3;
  Ran bad = run(o);
  EXPECT_NE(bad.result.exit_code, 0);
  EXPECT_EQ(bad.result.status.code(), ErrorCode::RANK_TABLE_MISSING_DEVICE);
}

TEST(Launch, MpiBackendStartsRanksWithMpirunAndTheSamePrefixes) {
  if (system("command -v mpirun > /dev/null") != 0) GTEST_FAIL() << "mpirun missing: scripts/install-deps.sh installs openmpi-bin";
  // Containers often forbid the cross-memory-attach single copy: shared memory without it.
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
  LaunchOptions o = with(2, {});
  o.backend = "mpi";
  Ran r = run(o);
  EXPECT_EQ(r.result.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[rank 0] hello from rank 0 of 2 (mpi)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[rank 1] sum of ranks 1"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gearbox::comm
