// The sharded optimizer (nn::ZeroRedundancyOptimizer, stages 1 and 2, on Gloo) against
// single-process training: the digits MLP (the comm.ddp_digits fixture's real digits) trained on 2
// and 4 forked ranks with global batch B must follow the single-process run with batch B from the
// same initial weights (the DDP test's criteria: the global mean loss of every step within 1e-5
// relative, the final parameters within 1e-4), with SGD-momentum and AdamW. The partition is
// checked on what the ranks really hold: every parameter stepped by exactly one rank (stage 1), the
// ranks' optimizer state adding up to the single-process optimizer's, the largest share within
// one parameter of an even split. ZeroMemory measures the state and gradient bytes per rank for
// 1, 2 and 4 ranks (docs/distributed.md's table) against the 1/N prediction.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>

#include "../rank_runner.h"
#include "comm/gloo_communicator.h"
#include "gearbox/nn_distributed.hpp"
#include "parallel_test_util.h"

namespace nn = gbx::nn;
using gearbox::comm::testing::join;
using gearbox::comm::testing::read_doubles;
using gearbox::comm::testing::run_and_collect;
using gearbox::comm::testing::run_ranks;
using gearbox::comm::testing::write_doubles;

namespace {

constexpr int64_t kTrain = 1500;

enum class Opt { SgdMomentum, AdamW };

nn::OptimizerFactory factory(Opt opt) {
  return [opt](std::vector<nn::Tensor> params) -> std::unique_ptr<nn::Optimizer> {
    if (opt == Opt::SgdMomentum)
      return std::make_unique<nn::SGD>(std::move(params),
                                       nn::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4});
    return std::make_unique<nn::AdamW>(std::move(params), nn::AdamOptions{.lr = 1e-2, .weight_decay = 1e-2});
  };
}

std::shared_ptr<nn::Sequential> make_mlp(const std::vector<int64_t>& widths) {
  std::vector<std::shared_ptr<nn::Module>> layers;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    if (i > 0) layers.push_back(std::make_shared<nn::ReLU>());
    layers.push_back(std::make_shared<nn::Linear>(widths[i], widths[i + 1]));
  }
  return std::make_shared<nn::Sequential>(layers);
}

// The mean over the ranks of each rank's doubles (exact: they travel as bit patterns).
std::vector<double> global_mean(nn::ProcessGroup& world, const std::vector<double>& local) {
  std::vector<double> mean;
  for (double v : local) mean.push_back(world.average(v));
  return mean;
}

// What one process of a run leaves (text, hex floats: exact across the fork).
struct RunResult : gearbox::comm::testing::TrainedRun {
  std::vector<std::string> stepped;  // stage 1: the parameters this rank's local optimizer holds
  double local_elements = 0;         // elements the local optimizer steps
  double state_bytes = 0, gradient_bytes = 0;

  void save(const std::string& path) const {
    std::ofstream f(path);
    gearbox::comm::testing::write_run(f, *this);
    f << stepped.size();
    for (auto& s : stepped) f << ' ' << s;
    f << '\n';
    write_doubles(f, {local_elements, state_bytes, gradient_bytes});
  }
  static RunResult load(const std::string& path) {
    std::ifstream f(path);
    RunResult r;
    static_cast<gearbox::comm::testing::TrainedRun&>(r) = gearbox::comm::testing::read_run(f);
    size_t ns = 0;
    f >> ns;
    r.stepped.resize(ns);
    for (auto& s : r.stepped) f >> s;
    std::vector<double> tail = read_doubles(f);
    if (tail.size() == 3) {
      r.local_elements = tail[0];
      r.state_bytes = tail[1];
      r.gradient_bytes = tail[2];
    }
    return r;
  }
};

// One run on the digits: world == nullptr is the single-process reference (batch 60, seed 0);
// else this rank's share of a ZeRO run (batch 60/N; ranks other than 0 draw their network from
// another seed, so only the optimizer's broadcast makes the replicas start equal). Stage 1 runs
// under DistributedDataParallel (it averages the gradients), stage 2 on the bare network.
RunResult train(Opt opt, int stage, int steps, std::shared_ptr<nn::ProcessGroup> world) {
  const int n = world ? world->size() : 1, rank = world ? world->rank() : 0;
  nn::Tensor x = nn::load_npy(std::string(GEARBOX_DIGITS_DIR) + "/x.npy");
  nn::Tensor y = nn::load_npy(std::string(GEARBOX_DIGITS_DIR) + "/y.npy");
  nn::Tensor x_train = nn::slice(x, 0, 0, kTrain), y_train = nn::slice(y, 0, 0, kTrain);
  nn::manual_seed(rank == 0 ? 0 : 1000 + static_cast<uint64_t>(rank));
  std::shared_ptr<nn::Sequential> net = make_mlp({64, 32, 10});
  std::shared_ptr<nn::DistributedDataParallel> ddp;
  nn::Module* model = net.get();
  if (world && stage == 1) {
    ddp = std::make_shared<nn::DistributedDataParallel>(net, world, nn::DDPOptions{.bucket_bytes = 4096});
    model = ddp.get();
  }
  std::unique_ptr<nn::Optimizer> optimizer;
  nn::ZeroRedundancyOptimizer* zero = nullptr;
  if (world) {
    auto z = std::make_unique<nn::ZeroRedundancyOptimizer>(model->parameters(), world, factory(opt),
                                                           nn::ZeroOptions{.stage = stage});
    zero = z.get();
    optimizer = std::move(z);
  } else {
    optimizer = factory(opt)(model->parameters());
  }
  nn::DistributedSampler sampler(kTrain, n, rank, {.shuffle = true, .seed = 7, .drop_last = true});
  const int64_t local_batch = 60 / n;
  RunResult out;
  int step = 0;
  for (uint64_t epoch = 0; step < steps; ++epoch) {
    sampler.set_epoch(epoch);
    std::vector<int64_t> idx = sampler.indices();
    for (size_t b = 0; b + static_cast<size_t>(local_batch) <= idx.size() && step < steps;
         b += static_cast<size_t>(local_batch), ++step) {
      std::vector<int64_t> rows(idx.begin() + static_cast<std::ptrdiff_t>(b),
                                idx.begin() + static_cast<std::ptrdiff_t>(b) + local_batch);
      nn::Tensor loss = nn::cross_entropy((*model)(nn::index_rows(x_train, rows)), nn::index_rows(y_train, rows));
      optimizer->zero_grad();
      loss.backward();
      if (ddp) ddp->synchronize_gradients();
      optimizer->step();
      out.losses.push_back(loss.item());
    }
  }
  if (world) out.losses = global_mean(*world, out.losses);
  auto named = net->named_parameters();
  for (auto& [name, p] : named) {
    std::vector<float> v = p.to_float_vector();
    out.params[name].assign(v.begin(), v.end());
  }
  nn::Optimizer& local = zero ? zero->local_optimizer() : *optimizer;
  for (const nn::Tensor& p : local.params()) {
    out.local_elements += static_cast<double>(p.numel());
    for (auto& [name, q] : named)
      if (q.impl() == p.impl()) out.stepped.push_back(name);
  }
  out.state_bytes = static_cast<double>(optimizer->state_bytes());
  // Gradient bytes held after the step, read off the tensors (stage 2: the local optimizer's
  // slices hold the kept gradients).
  for (const nn::Tensor& p : net->parameters())
    if (p.grad().defined()) out.gradient_bytes += static_cast<double>(p.numel() * 4);
  if (zero && stage == 2)
    for (const nn::Tensor& p : local.params())
      if (p.grad().defined()) out.gradient_bytes += static_cast<double>(p.numel() * 4);
  return out;
}

std::pair<RunResult, std::vector<RunResult>> run_both(Opt opt, int stage, int ranks, int steps,
                                                      const std::string& tag) {
  auto job = [&](std::shared_ptr<nn::ProcessGroup> group) { return train(opt, stage, steps, group); };
  auto save = [](const RunResult& r, const std::string& path) { r.save(path); };
  // The reference depends on the optimizer only: run once per optimizer (and step count).
  static std::map<std::pair<Opt, int>, RunResult> references;
  if (!references.count({opt, steps})) {
    auto ref = run_and_collect<RunResult>(1, false, "zero_" + tag + "_ref", job, save, RunResult::load);
    if (ref.empty()) return {RunResult{}, std::vector<RunResult>(size_t(ranks))};
    references[{opt, steps}] = ref[0];
  }
  auto per_rank = run_and_collect<RunResult>(ranks, true, "zero_" + tag, job, save, RunResult::load);
  if (per_rank.empty()) per_rank.resize(size_t(ranks));
  return {references[{opt, steps}], per_rank};
}

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-12); }

// rtol 1e-4 with atol 1e-6, as the DDP test.
double max_param_diff(const RunResult& a, const RunResult& b) {
  double worst = 0;
  for (auto& [name, v] : b.params) {
    auto it = a.params.find(name);
    if (it == a.params.end() || it->second.size() != v.size()) return INFINITY;
    for (size_t i = 0; i < v.size(); ++i)
      worst = std::max(worst, std::abs(it->second[i] - v[i]) / (std::abs(v[i]) + 1e-2));
  }
  return worst;
}

struct Case {
  int stage;
  Opt opt;
  int ranks;
};

std::string case_name(const Case& c) {
  return "Stage" + std::to_string(c.stage) + "_" + (c.opt == Opt::AdamW ? "AdamW" : "SgdMomentum") + "_" +
         std::to_string(c.ranks) + "ranks";
}
void PrintTo(const Case& c, std::ostream* os) { *os << case_name(c); }

class ZeroParity : public ::testing::TestWithParam<Case> {};

TEST_P(ZeroParity, MatchesSingleProcessAndShardsTheState) {
  const Case c = GetParam();
  const int steps = 50;
  auto [ref, ranks] = run_both(c.opt, c.stage, c.ranks, steps, case_name(c));
  ASSERT_EQ(ref.losses.size(), size_t(steps));
  ASSERT_EQ(ranks[0].losses.size(), size_t(steps));
  double worst_loss = 0;
  for (int s = 0; s < steps; ++s) {
    const double d = rel(ranks[0].losses[size_t(s)], ref.losses[size_t(s)]);
    worst_loss = std::max(worst_loss, d);
    EXPECT_LE(d, 1e-5) << "step " << s << ": ZeRO " << ranks[0].losses[size_t(s)] << " vs " << ref.losses[size_t(s)];
  }
  const double worst_param = max_param_diff(ranks[0], ref);
  EXPECT_LE(worst_param, 1e-4);
  // Replicas identical bit for bit: every rank ends with the owners' values.
  for (size_t r = 1; r < ranks.size(); ++r) EXPECT_EQ(ranks[r].params, ranks[0].params) << "rank " << r;

  // The partition, from what the ranks' local optimizers really hold.
  double total_elements = 0, largest = 0;
  for (auto& [name, v] : ref.params) {
    total_elements += static_cast<double>(v.size());
    largest = std::max(largest, static_cast<double>(v.size()));
  }
  double elements = 0, state = 0, max_state = 0, grads = 0;
  std::map<std::string, int> stepped_by;
  for (const RunResult& r : ranks) {
    elements += r.local_elements;
    state += r.state_bytes;
    max_state = std::max(max_state, r.state_bytes);
    grads += r.gradient_bytes;
    for (auto& name : r.stepped) ++stepped_by[name];
  }
  EXPECT_EQ(elements, total_elements);  // no element stepped twice or never (with the next check)
  if (c.stage == 1) {
    // Whole parameters: each one in exactly one rank's local optimizer.
    EXPECT_EQ(stepped_by.size(), ref.params.size());
    for (auto& [name, count] : stepped_by) EXPECT_EQ(count, 1) << name;
  }
  // The state the single process holds, split: together the ranks hold exactly as much, the
  // largest share at most an even split plus one parameter's state.
  ASSERT_GT(ref.state_bytes, 0);
  EXPECT_EQ(state, ref.state_bytes);
  const double state_per_element = ref.state_bytes / total_elements;  // 4 (momentum) or 8 (Adam)
  EXPECT_EQ(state_per_element, c.opt == Opt::AdamW ? 8.0 : 4.0);
  EXPECT_LE(max_state, ref.state_bytes / c.ranks + largest * state_per_element);
  // Gradients held after the step: stage 1 every rank all of them (DDP's average); stage 2 each
  // rank its slice, the slices adding up to one copy.
  if (c.stage == 1) {
    for (const RunResult& r : ranks) EXPECT_EQ(r.gradient_bytes, total_elements * 4);
  } else {
    EXPECT_EQ(grads, total_elements * 4);
    for (const RunResult& r : ranks) EXPECT_EQ(r.gradient_bytes, r.local_elements * 4);
  }
  std::printf("[zero] %s: max per-step loss rel diff %.3g, max param rel diff %.3g, state bytes max %.0f of %.0f\n",
              case_name(c).c_str(), worst_loss, worst_param, max_state, ref.state_bytes);
}

INSTANTIATE_TEST_SUITE_P(Digits, ZeroParity,
                         ::testing::Values(Case{1, Opt::SgdMomentum, 2}, Case{1, Opt::SgdMomentum, 4},
                                           Case{1, Opt::AdamW, 2}, Case{1, Opt::AdamW, 4}, Case{2, Opt::SgdMomentum, 2},
                                           Case{2, Opt::SgdMomentum, 4}, Case{2, Opt::AdamW, 2},
                                           Case{2, Opt::AdamW, 4}),
                         [](const ::testing::TestParamInfo<Case>& i) { return case_name(i.param); });

// Optimizer-state and gradient bytes per rank with AdamW, N = 1, 2, 4, plain DDP vs stage 1 vs
// stage 2, on the digits MLP and on a 64-Hx5-10 MLP (5 hidden layers of H: four HxH weights, so
// whole-parameter ownership can balance on 2 and 4 ranks; H = 256, or GEARBOX_ZERO_MEMORY_HIDDEN). Measured on the
// tensors the ranks hold after a step; compared with the prediction from the parameter count P (AdamW: 8 bytes of state
// per element, 4 of gradient): DDP 12P, stage 1 8P/N + 4P, stage 2 12P/N. The criterion, within 15%, is
// asserted for the largest rank wherever the partition can meet it: stage 2 always (its flat partition splits evenly),
// stage 1 on the big MLP (on the digits MLP one weight is 85% of the parameters, so one rank must hold its state).
struct MemoryRow {
  std::string model, mode;
  int ranks;
  double predicted, max_measured, min_measured, communicated;
};

TEST(ZeroMemory, PerRankBytesFallAsPredicted) {
  // The bigger MLP's width: 256 in CI (seconds); docs/distributed.md's table is the run with
  // GEARBOX_ZERO_MEMORY_HIDDEN=1024.
  int64_t hidden = 256;
  if (const char* h = std::getenv("GEARBOX_ZERO_MEMORY_HIDDEN")) hidden = std::atoll(h);
  const std::string big = "MLP 64-" + std::to_string(hidden) + "x5-10";
  const std::vector<std::pair<std::string, std::vector<int64_t>>> models = {
      {"digits 64-32-10", {64, 32, 10}}, {big, {64, hidden, hidden, hidden, hidden, hidden, 10}}};
  const std::vector<std::string> modes = {"DDP", "ZeRO-1", "ZeRO-2"};
  std::vector<MemoryRow> rows;
  for (int n : {1, 2, 4})
    for (auto& [model_name, widths] : models) {
      // One job per model, each on a fresh communicator. (This test found the stall of a large
      // ring allreduce after Gloo's old-style halving-doubling, ~16 s instead of ~0.25 s on 4
      // ranks; Auto no longer picks halving-doubling: GlooAlgorithms.AutoNeverPicksHalvingDoubling.)
      const std::string out = gearbox::comm::testing::fresh_dir("zero_mem");
      auto results = run_ranks(
          n, "zero_mem",
          [&](int rank, int size, const std::string& dir) -> std::string {
            std::unique_ptr<gearbox::comm::GlooCommunicator> comm;
            std::string error;
            auto pg = join(rank, size, dir, &comm, &error);
            if (!pg) return error;
            try {
              std::ofstream f(out + "/" + std::to_string(rank));
              for (auto& mode : modes) {
                nn::manual_seed(0);
                auto net = make_mlp(widths);
                // Stage 2 averages the gradients itself: no DDP (its hooks would allreduce them).
                std::shared_ptr<nn::DistributedDataParallel> ddp;
                if (mode != "ZeRO-2") ddp = std::make_shared<nn::DistributedDataParallel>(net, pg);
                nn::Module* model = ddp ? static_cast<nn::Module*>(ddp.get()) : net.get();
                std::unique_ptr<nn::Optimizer> opt;
                nn::ZeroRedundancyOptimizer* zero = nullptr;
                if (mode == "DDP") {
                  opt = factory(Opt::AdamW)(net->parameters());
                } else {
                  auto z = std::make_unique<nn::ZeroRedundancyOptimizer>(
                      net->parameters(), pg, factory(Opt::AdamW), nn::ZeroOptions{.stage = mode == "ZeRO-1" ? 1 : 2});
                  zero = z.get();
                  opt = std::move(z);
                }
                nn::Tensor x = nn::Tensor::randn({4, 64});
                nn::Tensor y = nn::Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4});
                for (int s = 0; s < 2; ++s) {
                  opt->zero_grad();
                  nn::cross_entropy((*model)(x), y).backward();
                  if (ddp) ddp->synchronize_gradients();
                  opt->step();
                }
                // Read off the tensors this rank holds after the step.
                double grad_bytes = 0;
                for (const nn::Tensor& p : net->parameters())
                  if (p.grad().defined()) grad_bytes += static_cast<double>(p.numel() * 4);
                if (zero && mode == "ZeRO-2")
                  for (const nn::Tensor& p : zero->local_optimizer().params())
                    if (p.grad().defined()) grad_bytes += static_cast<double>(p.numel() * 4);
                const double communicated = (ddp ? static_cast<double>(ddp->stats().bucket_bytes_on_wire) : 0) +
                                            (zero ? static_cast<double>(zero->stats().bytes_communicated_per_step) : 0);
                f << std::hexfloat << static_cast<double>(opt->state_bytes()) + grad_bytes << ' ' << communicated
                  << '\n';
              }
            } catch (const std::exception& e) {
              return e.what();
            }
            return "";
          },
          120);
      for (int r = 0; r < n; ++r)
        ASSERT_EQ(results[size_t(r)].exit_code, 0) << "rank " << r << ": " << results[size_t(r)].message;
      std::vector<std::ifstream> files;
      for (int r = 0; r < n; ++r) files.emplace_back(out + "/" + std::to_string(r));
      double p = 0;
      for (size_t i = 0; i + 1 < widths.size(); ++i)
        p += static_cast<double>(widths[i] * widths[i + 1] + widths[i + 1]);
      for (auto& mode : modes) {
        MemoryRow row{model_name, mode, n, 0, 0, INFINITY, 0};
        row.predicted = mode == "DDP" ? 12 * p : mode == "ZeRO-1" ? 8 * p / n + 4 * p : 12 * p / n;
        for (auto& f : files) {
          const double bytes = gearbox::comm::testing::read_double(f);
          row.communicated = gearbox::comm::testing::read_double(f);
          row.max_measured = std::max(row.max_measured, bytes);
          row.min_measured = std::min(row.min_measured, bytes);
        }
        rows.push_back(row);
      }
      std::error_code ec;
      std::filesystem::remove_all(out, ec);
    }
  std::printf("[zero-memory] AdamW, optimizer state + gradient bytes held per rank after a step\n");
  std::printf(
      "| model | mode | N | predicted | largest rank | smallest rank | largest/predicted | step collectives |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const MemoryRow& r : rows) {
    std::printf("| %s | %s | %d | %.0f | %.0f | %.0f | %.3f | %.0f |\n", r.model.c_str(), r.mode.c_str(), r.ranks,
                r.predicted, r.max_measured, r.min_measured, r.max_measured / r.predicted, r.communicated);
    const bool balanced = r.mode != "ZeRO-1" || r.model == big || r.ranks == 1;
    if (balanced)
      EXPECT_LE(std::abs(r.max_measured / r.predicted - 1), 0.15) << r.model << ' ' << r.mode << " N=" << r.ranks;
    if (r.mode == "DDP") EXPECT_EQ(r.max_measured, r.predicted);
  }
}

// Misuse: ranks passing different parameter lists fail with DDP_MODEL_MISMATCH on every rank;
// step() before any backward() with INVALID_ARGUMENT (on every rank, before any collective); an
// unknown stage with INVALID_ARGUMENT.
TEST(ZeroErrors, MisuseIsReported) {
  auto results = run_ranks(2, "zero_errors", [](int rank, int size, const std::string& dir) -> std::string {
    std::unique_ptr<gearbox::comm::GlooCommunicator> comm;
    std::string error;
    auto pg = join(rank, size, dir, &comm, &error);
    if (!pg) return error;
    auto other = make_mlp({64, rank == 0 ? 32 : 16, 10});
    try {
      nn::ZeroRedundancyOptimizer opt(other->parameters(), pg, factory(Opt::AdamW));
      return "no error for different parameters";
    } catch (const nn::Error& e) {
      if (e.code() != "DDP_MODEL_MISMATCH") return std::string("wrong code: ") + e.what();
      if (std::string(e.what()).find("parameter 0") == std::string::npos) return std::string("unnamed: ") + e.what();
    }
    auto net = make_mlp({64, 32, 10});
    for (int stage : {1, 2}) {
      nn::ZeroRedundancyOptimizer opt(net->parameters(), pg, factory(Opt::SgdMomentum), {.stage = stage});
      try {
        opt.step();
        return "no error for step() without gradients, stage " + std::to_string(stage);
      } catch (const nn::Error& e) {
        if (e.code() != "INVALID_ARGUMENT" || std::string(e.what()).find("backward()") == std::string::npos)
          return std::string("unexpected error: ") + e.what();
      }
    }
    try {
      nn::ZeroRedundancyOptimizer opt(net->parameters(), pg, factory(Opt::SgdMomentum), {.stage = 3});
      return "no error for stage 3";
    } catch (const nn::Error& e) {
      if (e.code() != "INVALID_ARGUMENT") return std::string("wrong code for stage 3: ") + e.what();
    }
    return "";
  });
  for (size_t r = 0; r < results.size(); ++r)
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ": " << results[r].message;
}

// state_bytes() on the optimizers the parity runs do not use, against torch's state layout
// (RMSprop: square_avg, + grad_avg when centered, + momentum_buffer with momentum; Adagrad: sum,
// filled at construction). In a forked child: the parent runs no kernels.
TEST(ZeroStateBytes, EveryOptimizerCountsItsBuffers) {
  auto results = run_ranks(1, "state_bytes", [](int, int, const std::string&) -> std::string {
    auto w = nn::Tensor::zeros({3, 5}).set_requires_grad();
    auto step = [&](nn::Optimizer& opt) {
      opt.zero_grad();
      nn::sum(w * w + w).backward();
      opt.step();
      return opt.state_bytes();
    };
    nn::RMSprop plain({w}, {.lr = 1e-2});
    nn::RMSprop full({w}, {.lr = 1e-2, .momentum = 0.9, .centered = true});
    nn::Adagrad adagrad({w}, {.lr = 1e-2});
    if (adagrad.state_bytes() != 15 * 4) return "Adagrad before a step: " + std::to_string(adagrad.state_bytes());
    if (plain.state_bytes() != 0) return "RMSprop before a step: " + std::to_string(plain.state_bytes());
    if (size_t b = step(plain); b != 15 * 4) return "RMSprop: " + std::to_string(b);
    if (size_t b = step(full); b != 3 * 15 * 4) return "RMSprop centered + momentum: " + std::to_string(b);
    if (size_t b = step(adagrad); b != 15 * 4) return "Adagrad: " + std::to_string(b);
    return "";
  });
  EXPECT_EQ(results[0].exit_code, 0) << results[0].message;
}

}  // namespace
