// nn::ParallelMesh and nn::parse_parallel_layout: the framework applying gearbox plan's layout.
// The groups each rank gets are checked against the planner's rank order computed here by
// brute force (tp fastest, then dp, then pp), through a real allreduce over each group; the
// training itself in every layout is bench/parallel_layouts' (comm.bench_parallel_layouts_smoke:
// losses agree across layouts).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "comm/communicator.h"
#include "parallel_test_util.h"

namespace {

namespace nn = gbx::nn;
using gearbox::comm::testing::run_ranks;

// The sum of the world ranks in `group`, by an allreduce over it (0 for no group).
double sum_of_ranks(const std::shared_ptr<nn::ProcessGroup>& group, int world_rank) {
  return group ? group->sum(double(world_rank)) : 0.0;
}

TEST(ParallelMesh, GroupsFollowThePlannersRankOrder) {
  for (auto [dp, tp, pp] : {std::tuple{2, 2, 1}, std::tuple{1, 2, 2}, std::tuple{2, 1, 2}, std::tuple{1, 4, 1}}) {
    const std::string name = "mesh_" + std::to_string(dp) + std::to_string(tp) + std::to_string(pp);
    auto ranks =
        run_ranks(4, name, [&, dp = dp, tp = tp, pp = pp](int rank, int size, const std::string& dir) -> std::string {
          setenv("GEARBOX_RANK", std::to_string(rank).c_str(), 1);
          setenv("GEARBOX_WORLD_SIZE", std::to_string(size).c_str(), 1);
          setenv("GEARBOX_STORE", ("file:" + dir + "/store").c_str(), 1);
          auto world = nn::ProcessGroup::from_environment();
          nn::ParallelLayout l;
          l.dp = dp, l.tp = tp, l.pp = pp, l.micro_batches = 2;
          l.stage_units = pp == 1 ? std::vector<int>{6} : std::vector<int>{2, 4};
          l.replicated_units = {0, 5};
          nn::ParallelMesh mesh(world, l);
          // Brute force: the ranks sharing this rank's other two coordinates.
          const int t = rank % tp, d = (rank / tp) % dp, p = rank / (tp * dp);
          double want_tp = 0, want_dp = 0, want_pp = 0;
          for (int r = 0; r < size; ++r) {
            const int rt = r % tp, rd = (r / tp) % dp, rp = r / (tp * dp);
            if (rd == d && rp == p) want_tp += r;
            if (rt == t && rp == p) want_dp += r;
            if (rt == t && rd == d) want_pp += r;
          }
          if (mesh.tensor_rank() != t || mesh.data_rank() != d || mesh.stage() != p) return "coordinates";
          if (bool(mesh.tensor_group()) != (tp > 1) || bool(mesh.data_group()) != (dp > 1) ||
              bool(mesh.pipeline_group()) != (pp > 1))
            return "a group of degree 1, or a missing group";
          const double got_tp = sum_of_ranks(mesh.tensor_group(), rank), got_dp = sum_of_ranks(mesh.data_group(), rank),
                       got_pp = sum_of_ranks(mesh.pipeline_group(), rank);
          if ((tp > 1 && got_tp != want_tp) || (dp > 1 && got_dp != want_dp) || (pp > 1 && got_pp != want_pp))
            return "group members: tp " + std::to_string(got_tp) + "/" + std::to_string(want_tp) + " dp " +
                   std::to_string(got_dp) + "/" + std::to_string(want_dp) + " pp " + std::to_string(got_pp) + "/" +
                   std::to_string(want_pp);
          if (mesh.first_unit() != (p == 0 ? 0 : 2) || mesh.unit_count() != l.stage_units[size_t(p)])
            return "stage units";
          if (mesh.tensor_group_for(0) || mesh.tensor_group_for(5) || mesh.tensor_group_for(1) != mesh.tensor_group())
            return "units run whole get no group, split ones the tensor group";
          if (mesh.pipeline_options().micro_batches != 2) return "pipeline options";
          return "";
        });
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(ranks[size_t(r)].exit_code, 0)
          << dp << "x" << tp << "x" << pp << " rank " << r << ": " << ranks[size_t(r)].message;
  }
}

TEST(ParallelMesh, ReadsGearboxPlansJson) {
  // The shape of `gearbox plan --json`'s document (comm.plan_cli checks the command writes it).
  const std::string doc = R"({"devices": 8, "chosen": {"layout": {"dp": 2, "tp": 2, "pp": 2, "micro_batches": 4,
      "schedule": "gpipe", "zero": 1, "recompute": false, "stage_units": [3, 3], "replicated_units": [0, 5]},
      "estimate": {"step_s": 1.0}}, "runners_up": []})";
  const nn::ParallelLayout l = nn::parse_parallel_layout(doc);
  EXPECT_EQ(l.dp, 2);
  EXPECT_EQ(l.tp, 2);
  EXPECT_EQ(l.pp, 2);
  EXPECT_EQ(l.micro_batches, 4);
  EXPECT_EQ(l.schedule, nn::PipelineSchedule::GPipe);
  EXPECT_EQ(l.zero, 1);
  EXPECT_EQ(l.stage_units, (std::vector<int>{3, 3}));
  EXPECT_TRUE(l.runs_whole(0) && l.runs_whole(5) && !l.runs_whole(1));
  EXPECT_EQ(nn::parse_parallel_layout(R"({"dp": 4, "tp": 1, "pp": 1, "stage_units": [6]})").devices(), 4);
  for (const char* bad :
       {"", "[]", R"({"tp": 1, "pp": 1, "stage_units": [6]})", R"({"dp": 0, "tp": 1, "pp": 1, "stage_units": [6]})",
        R"({"dp": 1, "tp": 1, "pp": 2, "stage_units": [3]})", R"({"dp": 1, "tp": 1, "pp": 1})",
        R"({"dp": 1, "tp": 1, "pp": 1, "stage_units": [0]})",
        R"({"dp": 1, "tp": 1, "pp": 1, "stage_units": [6], "schedule": "zigzag"})",
        R"({"dp": 1, "tp": 2, "pp": 1, "stage_units": [6], "replicated_units": [3, 1]})",
        R"({"dp": 1, "tp": 1, "pp": 1, "stage_units": [6], "zero": 3})",
        R"({"dp": 1, "tp": 1, "pp": 1, "stage_units": [6], "recompute": 1})",
        R"({"dp": "2", "tp": 1, "pp": 1, "stage_units": [6]})"}) {
    try {
      nn::parse_parallel_layout(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const nn::Error& e) {
      EXPECT_EQ(e.code(), "PLAN_SPEC_INVALID") << bad;
    }
  }
}

// A group handed in (not from the environment) cannot make sub-groups: it says so.
TEST(ParallelMesh, NewGroupNeedsTheJobsStore) {
  auto ranks = run_ranks(1, "mesh_refused", [&](int rank, int size, const std::string& dir) -> std::string {
    std::unique_ptr<gearbox::comm::GlooCommunicator> comm;
    std::string error;
    auto pg = gearbox::comm::testing::join(rank, size, dir, &comm, &error);
    if (!pg) return error;
    try {
      pg->new_group({0});
    } catch (const nn::Error& e) {
      return e.code() == "INVALID_ARGUMENT" ? "" : "code " + e.code();
    }
    return "no error";
  });
  EXPECT_EQ(ranks[0].exit_code, 0) << ranks[0].message;
}

}  // namespace
