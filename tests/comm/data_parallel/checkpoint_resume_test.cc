// Checkpoints under data parallelism (issue 26 item 4): the digits MLP trained with Adam on 2
// forked ranks for K steps, rank 0 saves (nn::save_checkpoint of the wrapped module and the
// optimizer), then training resumes from that file on 4 ranks and on 1 process without DDP for K
// more steps. Every combination must follow one process that trained 2K steps straight with the
// same global batch: the global mean loss of every step within 1e-5 relative, the final
// parameters within 1e-4 (the tolerances of data_parallel_test.cc: ranks sum gradients in another
// order). A ZeroRedundancyOptimizer refuses to be checkpointed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "comm/communicator.h"
#include "gearbox/nn_distributed.hpp"
#include "parallel_test_util.h"

namespace nn = gbx::nn;
using gearbox::comm::testing::fresh_dir;
using gearbox::comm::testing::load_run;
using gearbox::comm::testing::run_and_collect;
using gearbox::comm::testing::save_run;
using gearbox::comm::testing::TrainedRun;
using gearbox::comm::testing::worst_relative_difference;

namespace {

constexpr int64_t kTrain = 1500;
constexpr int64_t kGlobalBatch = 60;  // divides by 1, 2 and 4: 25 steps per epoch on each
constexpr int kSteps = 8;             // K; the resumed run crosses no epoch, the data order is the sampler's

// Steps [from, to) of the run on this process's share of each global batch; loads `load` into the
// fresh model and optimizer first, and rank 0 saves `save` at the end. Returns the global mean
// loss of each step and the final parameters.
TrainedRun train(std::shared_ptr<nn::ProcessGroup> world, int from, int to, const std::string& load,
                 const std::string& save) {
  const int n = world ? world->size() : 1, rank = world ? world->rank() : 0;
  nn::Tensor x = nn::load_npy(std::string(GEARBOX_DIGITS_DIR) + "/x.npy");
  nn::Tensor y = nn::load_npy(std::string(GEARBOX_DIGITS_DIR) + "/y.npy");
  nn::Tensor x_train = nn::slice(x, 0, 0, kTrain), y_train = nn::slice(y, 0, 0, kTrain);
  // Every rank, and the resumed runs, start from different weights: only the checkpoint (or, at
  // step 0, DDP's broadcast of rank 0's) makes them equal. Rank 0 at step 0 is the reference's seed.
  nn::manual_seed(static_cast<uint64_t>(1000 * from + rank));
  auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(64, 32), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(32, 10)});
  std::shared_ptr<nn::DistributedDataParallel> ddp;
  nn::Module* model = net.get();
  if (world) {
    ddp = std::make_shared<nn::DistributedDataParallel>(net, world);
    model = ddp.get();
  }
  nn::Adam opt(model->parameters(), nn::AdamOptions{.lr = 0.01});
  if (!load.empty()) {
    std::map<std::string, std::string> meta = nn::load_checkpoint(load, *net, &opt);
    if (meta.at("step") != std::to_string(from)) throw std::runtime_error("checkpoint of step " + meta.at("step"));
  }
  nn::DistributedSampler sampler(kTrain, n, rank, {.shuffle = true, .seed = 7, .drop_last = true});
  const int64_t local_batch = kGlobalBatch / n;
  const int steps_per_epoch = static_cast<int>(kTrain / kGlobalBatch);
  TrainedRun out;
  std::vector<double> local_losses;
  for (int s = from; s < to; ++s) {
    sampler.set_epoch(static_cast<uint64_t>(s / steps_per_epoch));
    std::vector<int64_t> idx = sampler.indices();
    const auto b = idx.begin() + static_cast<std::ptrdiff_t>((s % steps_per_epoch) * local_batch);
    std::vector<int64_t> rows(b, b + local_batch);
    nn::Tensor loss = nn::cross_entropy((*model)(nn::index_rows(x_train, rows)), nn::index_rows(y_train, rows));
    opt.zero_grad();
    loss.backward();
    if (ddp) ddp->synchronize_gradients();
    opt.step();
    local_losses.push_back(loss.item());
  }
  out.losses = local_losses;
  if (world) {  // the global batch's loss: the mean of the ranks' means (exact doubles via int64 bits)
    gearbox::Tensor mine(gearbox::DType::I64, {static_cast<int64_t>(local_losses.size())}), all;
    std::memcpy(mine.mutable_raw(), local_losses.data(), local_losses.size() * sizeof(double));
    gearbox::Status st = world->communicator().allgather(mine, all);
    if (!st.ok()) throw std::runtime_error(st.to_string());
    for (size_t i = 0; i < local_losses.size(); ++i) {
      double sum = 0;
      for (int r = 0; r < n; ++r) {
        double v = 0;
        std::memcpy(&v, all.data<int64_t>() + static_cast<size_t>(r) * local_losses.size() + i, sizeof v);
        sum += v;
      }
      out.losses[i] = sum / n;
    }
  }
  // The checkpoint holds the module's own names (not DDP's "module." ones) and full state: rank
  // 0's copy is every rank's.
  if (!save.empty() && rank == 0) nn::save_checkpoint(save, *net, &opt, {{"step", std::to_string(to)}});
  for (auto& [name, p] : net->named_parameters()) {
    std::vector<float> v = p.to_float_vector();
    out.params[name] = std::vector<double>(v.begin(), v.end());
  }
  return out;
}

TEST(DataParallelCheckpoint, ResumesOnAnyNumberOfRanks) {
  const std::string dir = fresh_dir("ckpt_resume");
  const std::string ckpt = dir + "/step" + std::to_string(kSteps) + ".safetensors";
  auto reference = run_and_collect<TrainedRun>(
      1, false, "ckpt_ref", [](std::shared_ptr<nn::ProcessGroup>) { return train(nullptr, 0, 2 * kSteps, "", ""); },
      save_run, load_run);
  auto first = run_and_collect<TrainedRun>(
      2, true, "ckpt_first", [&](std::shared_ptr<nn::ProcessGroup> g) { return train(g, 0, kSteps, "", ckpt); },
      save_run, load_run);
  ASSERT_FALSE(reference.empty());
  ASSERT_FALSE(first.empty());
  ASSERT_TRUE(std::filesystem::exists(ckpt));
  for (int ranks : {4, 1}) {
    SCOPED_TRACE(std::to_string(ranks) + " rank(s) resume");
    auto resumed = run_and_collect<TrainedRun>(
        ranks, ranks > 1, "ckpt_resumed" + std::to_string(ranks),
        [&](std::shared_ptr<nn::ProcessGroup> g) { return train(g, kSteps, 2 * kSteps, ckpt, ""); }, save_run,
        load_run);
    ASSERT_FALSE(resumed.empty());
    std::vector<double> losses = first[0].losses;
    losses.insert(losses.end(), resumed[0].losses.begin(), resumed[0].losses.end());
    ASSERT_EQ(losses.size(), reference[0].losses.size());
    const double loss_difference = worst_relative_difference(losses, reference[0].losses);
    EXPECT_LT(loss_difference, 1e-5);
    double worst_param = 0;
    for (const TrainedRun& r : resumed) {
      ASSERT_EQ(r.params.size(), reference[0].params.size());
      for (auto& [name, want] : reference[0].params) {
        const std::vector<double>& got = r.params.at(name);
        ASSERT_EQ(got.size(), want.size()) << name;
        double worst = 0;
        for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
        EXPECT_LT(worst, 1e-4) << name;
        worst_param = std::max(worst_param, worst);
      }
    }
    std::printf("resumed on %d: worst loss relative difference %.3g, parameter difference %.3g\n", ranks,
                loss_difference, worst_param);
    std::fflush(stdout);  // before the next fork copies the buffer
  }
  // The resumed runs learned: the last loss is below the first (the comparison above would also
  // pass for a run that stood still only if the reference stood still too).
  EXPECT_LT(reference[0].losses.back(), reference[0].losses.front());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(DataParallelCheckpoint, ZeroRedundancyOptimizerRefusesClearly) {
  const std::string dir = fresh_dir("ckpt_zero_file");
  auto runs = run_and_collect<TrainedRun>(
      2, true, "ckpt_zero",
      [&](std::shared_ptr<nn::ProcessGroup> g) {
        nn::manual_seed(0);
        auto net = std::make_shared<nn::Linear>(4, 2);
        nn::ZeroRedundancyOptimizer opt(net->parameters(), g, [](std::vector<nn::Tensor> p) {
          return std::make_unique<nn::Adam>(p, nn::AdamOptions{});
        });
        TrainedRun out;
        try {
          nn::save_checkpoint(dir + "/x.safetensors", *net, &opt);
        } catch (const nn::Error& e) {
          out.losses.push_back(
              e.code() == "INVALID_ARGUMENT" && std::string(e.what()).find("sharded") != std::string::npos ? 1 : 0);
        }
        return out;
      },
      save_run, load_run);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  ASSERT_EQ(runs.size(), 2u);
  for (const TrainedRun& r : runs) EXPECT_EQ(r.losses, std::vector<double>{1});
}

}  // namespace
