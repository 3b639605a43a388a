// Pipeline-parallel training (nn::PipelineParallel on Gloo) against single-process training:
// a 4-layer MLP and a 3-layer transformer encoder on sklearn's digits cut into 2 and 4 stages on
// forked ranks, GPipe and 1F1B, 4 micro-batches, must follow the single-process run on the same
// global batches from the same initial weights: the batch loss at each of 50 steps within 1e-5
// relative and the final parameters within 1e-4, with SGD-momentum and with AdamW (issue 27
// item 2's criterion); and 2 x 2 meshes: two such pipelines trained data-parallel, and a
// 2-stage pipeline whose stages are tensor-parallel over 2 ranks each.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "../rank_runner.h"
#include "parallel_test_util.h"

namespace nn = gbx::nn;
using gearbox::comm::testing::join;
using gearbox::comm::testing::MeanOverSequence;
using gearbox::comm::testing::read_doubles;
using gearbox::comm::testing::read_run;
using gearbox::comm::testing::RowsAsSequence;
using gearbox::comm::testing::run_ranks;
using gearbox::comm::testing::run_reference_and_ranks;
using gearbox::comm::testing::TrainedRun;
using gearbox::comm::testing::worst_relative_difference;
using gearbox::comm::testing::write_doubles;
using gearbox::comm::testing::write_run;

namespace {

constexpr int64_t kTrain = 1500, kBatch = 60;
constexpr int kSteps = 50;

enum class Opt { SgdMomentum, AdamW };

const nn::LossFunction kCrossEntropy = [](const nn::Tensor& y, const nn::Tensor& t) { return nn::cross_entropy(y, t); };

enum class Net { Mlp, Transformer };

struct Config {
  int stages = 2;
  nn::PipelineSchedule schedule = nn::PipelineSchedule::OneFOneB;
  Opt opt = Opt::SgdMomentum;
  int64_t micro_batches = 4;
  Net net = Net::Mlp;
};

// The network as a list of modules (seed 0 on every process: the same initial weights). The
// transformer: rows as a sequence, a Linear embedding to 16, three post-norm encoder layers
// (4 heads, feed-forward 32, no dropout), the mean over the sequence, a linear head.
std::vector<std::shared_ptr<nn::Module>> make_layers(Net net) {
  nn::manual_seed(0);
  if (net == Net::Transformer) {
    std::vector<std::shared_ptr<nn::Module>> layers{std::make_shared<RowsAsSequence>(),
                                                    std::make_shared<nn::Linear>(8, 16)};
    for (int i = 0; i < 3; ++i)
      layers.push_back(std::make_shared<nn::TransformerEncoderLayer>(
          16, 4, nn::TransformerEncoderLayerOptions{.dim_feedforward = 32, .dropout = 0.0, .batch_first = true}));
    layers.push_back(std::make_shared<MeanOverSequence>());
    layers.push_back(std::make_shared<nn::Linear>(16, 10));
    return layers;
  }
  return {std::make_shared<nn::Linear>(64, 48), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(48, 32), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(32, 32), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(32, 10)};
}

// The first layer of each stage, for 2 and 4 stages (the transformer: the encoder layers are
// 2, 3, 4; activations between stages are [micro-batch, 8, 16] sequences).
std::vector<size_t> cuts(int stages, Net net) {
  if (net == Net::Transformer) return stages == 2 ? std::vector<size_t>{0, 4, 7} : std::vector<size_t>{0, 3, 4, 5, 7};
  return stages == 2 ? std::vector<size_t>{0, 4, 7} : std::vector<size_t>{0, 2, 4, 6, 7};
}

// The transformer at the MLP's SGD rate diverges, and then any two float32 runs part (the
// rounding of different micro-batch shapes is amplified); 0.02 trains it steadily.
std::unique_ptr<nn::Optimizer> make_optimizer(Opt opt, Net net, const std::vector<nn::Tensor>& params) {
  if (opt == Opt::SgdMomentum)
    return std::make_unique<nn::SGD>(params, nn::SGDOptions{.lr = net == Net::Mlp ? 0.1 : 0.02, .momentum = 0.9});
  return std::make_unique<nn::AdamW>(params, nn::AdamOptions{.lr = 2e-3, .weight_decay = 1e-2});
}

// The losses and this stage's parameters ("layer.name"), and the pipeline's stats.
struct Run : TrainedRun {
  int64_t max_in_flight = 0;
  double ideal_bubble = 0;
};

void record_params(const std::vector<std::shared_ptr<nn::Module>>& layers, size_t from, size_t to, Run* r) {
  for (size_t i = from; i < to; ++i)
    for (auto& [name, p] : layers[i]->named_parameters()) {
      std::vector<float> v = p.to_float_vector();
      r->params[std::to_string(i) + "." + name] = std::vector<double>(v.begin(), v.end());
    }
}

// group null: the single-process reference. With `dp`, this pipeline is one of dp->size()
// replicas, each taking its share of every global batch; the stage's gradients are averaged over
// dp (the ranks holding the same stage) before the step, and the loss is the replicas' mean.
Run train(const Config& cfg, std::shared_ptr<nn::ProcessGroup> group, std::shared_ptr<nn::ProcessGroup> dp = nullptr) {
  nn::Tensor x = nn::load_npy(std::string(GEARBOX_DIGITS_DIR) + "/x.npy");
  nn::Tensor y = nn::load_npy(std::string(GEARBOX_DIGITS_DIR) + "/y.npy");
  auto layers = make_layers(cfg.net);
  Run out;
  const size_t from = group ? cuts(cfg.stages, cfg.net)[size_t(group->rank())] : 0;
  const size_t to = group ? cuts(cfg.stages, cfg.net)[size_t(group->rank()) + 1] : layers.size();
  auto stage = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>(
      layers.begin() + std::ptrdiff_t(from), layers.begin() + std::ptrdiff_t(to)));
  auto opt = make_optimizer(cfg.opt, cfg.net, stage->parameters());
  std::unique_ptr<nn::PipelineParallel> pipe;
  if (group)
    pipe = std::make_unique<nn::PipelineParallel>(stage, group, nn::PipelineOptions{cfg.micro_batches, cfg.schedule});
  const int64_t rows = dp ? kBatch / dp->size() : kBatch;
  for (int s = 0; s < kSteps; ++s) {
    const int64_t start = (s * kBatch) % kTrain + (dp ? dp->rank() * rows : 0);
    nn::Tensor xb = nn::slice(x, 0, start, start + rows), yb = nn::slice(y, 0, start, start + rows);
    opt->zero_grad();
    if (pipe) {
      const double loss = pipe->train_step(xb, yb, kCrossEntropy);
      if (dp) nn::average_gradients(stage->parameters(), dp);
      out.losses.push_back(dp ? dp->average(loss) : loss);
    } else {
      nn::Tensor loss = nn::cross_entropy((*stage)(xb), yb);
      loss.backward();
      out.losses.push_back(loss.item());
    }
    opt->step();
  }
  record_params(layers, from, to, &out);
  if (pipe) out.max_in_flight = pipe->stats().max_in_flight, out.ideal_bubble = pipe->stats().ideal_bubble;
  return out;
}

void save(const Run& r, const std::string& path) {
  std::ofstream f(path);
  write_run(f, r);
  f << r.max_in_flight << ' ';
  write_doubles(f, {r.ideal_bubble});
}

Run load(const std::string& path) {
  std::ifstream f(path);
  Run r;
  static_cast<TrainedRun&>(r) = read_run(f);
  f >> r.max_in_flight;
  r.ideal_bubble = read_doubles(f).at(0);
  return r;
}

void expect_matches(const Config& cfg, const std::string& tag) {
  auto runs = run_reference_and_ranks<Run>(
      cfg.stages, "pp_" + tag, [&cfg](auto group) { return train(cfg, group); }, save, load);
  ASSERT_TRUE(runs.ok);
  const Run& ref = runs.reference;
  const std::vector<Run>& ranks = runs.ranks;
  ASSERT_EQ(ref.losses.size(), size_t(kSteps));
  size_t params_seen = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const Run& run = ranks[r];
    ASSERT_EQ(run.losses.size(), size_t(kSteps)) << "rank " << r;
    EXPECT_LE(worst_relative_difference(run.losses, ref.losses), 1e-5)
        << tag << " rank " << r << ": worst per-step loss difference";
    for (auto& [name, v] : run.params) {
      auto it = ref.params.find(name);
      ASSERT_NE(it, ref.params.end()) << name;
      ASSERT_EQ(v.size(), it->second.size()) << name;
      double d = 0;
      for (size_t i = 0; i < v.size(); ++i)
        d = std::max(d, std::abs(v[i] - it->second[i]) / (std::abs(it->second[i]) + 1e-2));
      EXPECT_LE(d, 1e-4) << tag << " " << name;
      ++params_seen;
    }
    const int64_t bound = cfg.schedule == nn::PipelineSchedule::GPipe
                              ? cfg.micro_batches
                              : std::min<int64_t>(cfg.micro_batches, cfg.stages - int64_t(r));
    EXPECT_EQ(run.max_in_flight, bound) << tag << " rank " << r << " held micro-batches";
    EXPECT_DOUBLE_EQ(run.ideal_bubble, double(cfg.stages - 1) / double(cfg.micro_batches + cfg.stages - 1));
  }
  EXPECT_EQ(params_seen, ref.params.size()) << "the stages together hold every parameter once";
  // The loss fell: the run trained (the comparison above would also pass for two frozen runs).
  EXPECT_LT(ref.losses.back(), 0.8 * ref.losses.front());
}

TEST(PipelineParallel, TwoStagesGPipeSgdMatchesOneProcess) {
  expect_matches({2, nn::PipelineSchedule::GPipe, Opt::SgdMomentum}, "pp2_gpipe_sgd");
}

TEST(PipelineParallel, TwoStages1F1BAdamWMatchesOneProcess) {
  expect_matches({2, nn::PipelineSchedule::OneFOneB, Opt::AdamW}, "pp2_1f1b_adamw");
}

TEST(PipelineParallel, FourStages1F1BSgdMatchesOneProcess) {
  expect_matches({4, nn::PipelineSchedule::OneFOneB, Opt::SgdMomentum}, "pp4_1f1b_sgd");
}

TEST(PipelineParallel, FourStagesGPipeAdamWMatchesOneProcess) {
  expect_matches({4, nn::PipelineSchedule::GPipe, Opt::AdamW}, "pp4_gpipe_adamw");
}

TEST(PipelineParallel, TransformerTwoStages1F1BSgdMatchesOneProcess) {
  expect_matches({2, nn::PipelineSchedule::OneFOneB, Opt::SgdMomentum, 4, Net::Transformer}, "pp2_tf_1f1b_sgd");
}

TEST(PipelineParallel, TransformerFourStagesGPipeSgdMatchesOneProcess) {
  expect_matches({4, nn::PipelineSchedule::GPipe, Opt::SgdMomentum, 4, Net::Transformer}, "pp4_tf_gpipe_sgd");
}

// ---- pipeline x data parallelism: a 2 x 2 mesh ---------------------------------------------

// Runs `train_ref()` (the one-process reference) in one forked process and `train_on_mesh(inner,
// outer)` on the 4 ranks of a 2 x 2 mesh (join_mesh_2x2's groups, named `inner` and `outer`),
// each saving its Run under `dir` ("ref", "0".."3"). Returns the ranks' results.
template <class Ref, class OnMesh>
std::vector<gearbox::comm::testing::RankResult> run_reference_and_mesh(const std::string& tag, const std::string& dir,
                                                                       const char* inner, const char* outer,
                                                                       Ref train_ref, OnMesh train_on_mesh) {
  auto ref_run = run_ranks(1, tag + "_ref", [&](int, int, const std::string&) -> std::string {
    try {
      save(train_ref(), dir + "/ref");
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  });
  EXPECT_EQ(ref_run[0].exit_code, 0) << ref_run[0].message;
  return run_ranks(4, tag, [&](int rank, int size, const std::string& store_dir) -> std::string {
    gearbox::comm::testing::Mesh2x2 mesh;
    if (std::string bad = gearbox::comm::testing::join_mesh_2x2(rank, size, store_dir, inner, outer, &mesh);
        !bad.empty())
      return bad;
    try {
      save(train_on_mesh(mesh.inner, mesh.outer), dir + "/" + std::to_string(rank));
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  });
}

// 4 ranks, rank = 2 replica + stage: pipelines {0, 1} and {2, 3} (2 stages, 1F1B, 2 micro-batches
// of 15 rows) each take half of every global batch of 60; the ranks holding the same stage,
// {0, 2} and {1, 3}, average their gradients (nn::average_gradients) before the step. Must follow
// the one-process run on the whole batches: the replicas' mean loss within 1e-5 at every step,
// every rank's stage parameters within 1e-4 (the two replicas of a stage stay identical).
void expect_mesh_matches(Opt opt) {
  const Config cfg{2, nn::PipelineSchedule::OneFOneB, opt, 2, Net::Mlp};
  const std::string dir = gearbox::comm::testing::fresh_dir("pp_dp_mesh");
  auto ranks = run_reference_and_mesh(
      "pp_dp", dir, "pp", "dp", [&] { return train(cfg, nullptr); },
      [&](auto pipeline, auto replicas) { return train(cfg, pipeline, replicas); });
  const Run ref = load(dir + "/ref");
  ASSERT_EQ(ref.losses.size(), size_t(kSteps));
  std::map<std::string, std::vector<double>> replica0;
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(ranks[size_t(r)].exit_code, 0) << "rank " << r << ": " << ranks[size_t(r)].message;
    const Run run = load(dir + "/" + std::to_string(r));
    EXPECT_LE(worst_relative_difference(run.losses, ref.losses), 1e-5) << "rank " << r << ": worst per-step loss";
    ASSERT_FALSE(run.params.empty()) << "rank " << r;
    for (auto& [name, v] : run.params) {
      const auto it = ref.params.find(name);
      ASSERT_NE(it, ref.params.end()) << name;
      ASSERT_EQ(v.size(), it->second.size()) << name;
      double d = 0;
      for (size_t i = 0; i < v.size(); ++i)
        d = std::max(d, std::abs(v[i] - it->second[i]) / (std::abs(it->second[i]) + 1e-2));
      EXPECT_LE(d, 1e-4) << "rank " << r << " " << name;
      if (r < 2) replica0[name] = v;
      else EXPECT_EQ(v, replica0.at(name)) << "the replicas of " << name << " parted";
    }
  }
  EXPECT_LT(ref.losses.back(), 0.8 * ref.losses.front());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(PipelineParallel, PipelineTimesDataParallelMeshSgdMatchesOneProcess) { expect_mesh_matches(Opt::SgdMomentum); }
TEST(PipelineParallel, PipelineTimesDataParallelMeshAdamWMatchesOneProcess) { expect_mesh_matches(Opt::AdamW); }

// ---- pipeline x tensor parallelism: a 2 x 2 mesh (the 1 x 2 x 2 layout) ------------------

// Each digit's 8 rows as a sequence through two post-norm encoder blocks: x = LN(x + attn(x)),
// x = LN(x + fc2(relu(fc1(x)))) (16 features, 4 heads, MLP width 32). With a tensor-parallel
// group the heads and the fc1/fc2 pair are split over it (ParallelMultiheadAttention,
// ColumnParallelLinear, RowParallelLinear), the rest is replicated; without one, the plain
// layers of the one-process twin (the same initial weights: the parallel layers draw the full
// weight and keep their slice).
class TpEncoderBlock : public nn::Module {
 public:
  explicit TpEncoderBlock(const std::shared_ptr<nn::ProcessGroup>& tp) {
    nn::MultiheadAttentionOptions a{.batch_first = true};
    if (tp) attn_ = add("attn", std::make_shared<nn::ParallelMultiheadAttention>(16, 4, tp, a));
    else attn_ = add("attn", std::make_shared<nn::MultiheadAttention>(16, 4, a));
    norm1_ = add("norm1", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{16}));
    fc1_ = add("fc1", tp ? std::shared_ptr<nn::Module>(std::make_shared<nn::ColumnParallelLinear>(16, 32, tp))
                         : std::make_shared<nn::Linear>(16, 32));
    fc2_ = add("fc2", tp ? std::shared_ptr<nn::Module>(std::make_shared<nn::RowParallelLinear>(32, 16, tp))
                         : std::make_shared<nn::Linear>(32, 16));
    norm2_ = add("norm2", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{16}));
  }
  nn::Tensor forward(const nn::Tensor& in) override {
    nn::Tensor x = (*norm1_)(nn::add(in, (*attn_)(in)));
    return (*norm2_)(nn::add(x, (*fc2_)(nn::relu((*fc1_)(x)))));
  }

 private:
  std::shared_ptr<nn::Module> add(const std::string& name, std::shared_ptr<nn::Module> m) {
    register_module(name, m);
    return m;
  }
  std::shared_ptr<nn::Module> attn_, norm1_, fc1_, fc2_, norm2_;
};

// The network as layers: rows as a sequence, embed (8 -> 16), two blocks, the mean over the
// sequence, the head (16 -> 10). Stage 0 of 2 holds layers [0, 3) (embedding and the first
// block), stage 1 layers [3, 6); activations between them are [micro-batch, 8, 16].
std::vector<std::shared_ptr<nn::Module>> make_tp_layers(const std::shared_ptr<nn::ProcessGroup>& tp) {
  nn::manual_seed(0);
  std::vector<std::shared_ptr<nn::Module>> layers{std::make_shared<RowsAsSequence>(),
                                                  std::make_shared<nn::Linear>(8, 16)};
  layers.push_back(std::make_shared<TpEncoderBlock>(tp));
  layers.push_back(std::make_shared<TpEncoderBlock>(tp));
  layers.push_back(std::make_shared<MeanOverSequence>());
  layers.push_back(std::make_shared<nn::Linear>(16, 10));
  return layers;
}

// pp null: the one-process reference (tp null too). Otherwise this rank runs stage pp->rank()
// with its blocks split over tp; SGD with momentum, 4 micro-batches of 15 rows, 1F1B.
Run train_tp_pipeline(std::shared_ptr<nn::ProcessGroup> pp, std::shared_ptr<nn::ProcessGroup> tp) {
  nn::Tensor x = nn::load_npy(std::string(GEARBOX_DIGITS_DIR) + "/x.npy");
  nn::Tensor y = nn::load_npy(std::string(GEARBOX_DIGITS_DIR) + "/y.npy");
  auto layers = make_tp_layers(tp);
  const size_t from = pp ? (pp->rank() == 0 ? 0 : 3) : 0, to = pp ? (pp->rank() == 0 ? 3 : 6) : 6;
  auto stage = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>(
      layers.begin() + std::ptrdiff_t(from), layers.begin() + std::ptrdiff_t(to)));
  // SGD, not Adam: a tensor-parallel collective that scaled a gradient by the group size would
  // go unseen under Adam (see tensor_parallel_test.cc).
  nn::SGD opt(stage->parameters(), nn::SGDOptions{.lr = 0.05, .momentum = 0.9});
  std::unique_ptr<nn::PipelineParallel> pipe;
  if (pp) pipe = std::make_unique<nn::PipelineParallel>(stage, pp, nn::PipelineOptions{4});
  Run out;
  for (int s = 0; s < kSteps; ++s) {
    const int64_t start = (s * kBatch) % kTrain;
    nn::Tensor xb = nn::slice(x, 0, start, start + kBatch), yb = nn::slice(y, 0, start, start + kBatch);
    opt.zero_grad();
    if (pipe) {
      out.losses.push_back(pipe->train_step(xb, yb, kCrossEntropy));
    } else {
      nn::Tensor loss = nn::cross_entropy((*stage)(xb), yb);
      loss.backward();
      out.losses.push_back(loss.item());
    }
    opt.step();
  }
  record_params(layers, from, to, &out);
  return out;
}

// Tensor-parallel rank r of p's part of the one-process parameter `name` ("layer.param").
std::vector<double> expected_tp_slice(const std::string& name, const std::vector<double>& full, int r, int p) {
  auto rows = [&](int64_t width, int64_t first, int64_t count) {
    return std::vector<double>(full.begin() + first * width, full.begin() + (first + count) * width);
  };
  auto columns = [&](int64_t out_n, int64_t in_n) {
    std::vector<double> v;
    const int64_t cols = in_n / p;
    for (int64_t o = 0; o < out_n; ++o)
      v.insert(v.end(), full.begin() + o * in_n + r * cols, full.begin() + o * in_n + (r + 1) * cols);
    return v;
  };
  if (name.ends_with("attn.in_proj_weight") || name.ends_with("attn.in_proj_bias")) {  // q, k, v: this rank's heads
    const int64_t width = name.ends_with("weight") ? 16 : 1, n = 16 / p;
    std::vector<double> v;
    for (int64_t i = 0; i < 3; ++i) {
      std::vector<double> part = rows(width, i * 16 + r * n, n);
      v.insert(v.end(), part.begin(), part.end());
    }
    return v;
  }
  if (name.ends_with("fc1.weight")) return rows(16, r * (32 / p), 32 / p);
  if (name.ends_with("fc1.bias")) return rows(1, r * (32 / p), 32 / p);
  if (name.ends_with("attn.out_proj.weight")) return columns(16, 16);
  if (name.ends_with("fc2.weight")) return columns(16, 32);
  return full;  // replicated
}

// 4 ranks, rank = 2 stage + tp rank: tensor-parallel groups {0, 1} (stage 0) and {2, 3}
// (stage 1), pipelines {0, 2} and {1, 3} (each stage's tp rank r talks to the other stage's tp
// rank r). Every rank's loss within 1e-5 of the one-process run at each of 50 steps, each
// rank's slices within 1e-4 (the key projection's bias to the step size: its gradient is zero
// in exact arithmetic, both runs move it by rounding noise).
void expect_tp_pipeline_matches() {
  const std::string dir = gearbox::comm::testing::fresh_dir("pp_tp_mesh");
  auto ranks = run_reference_and_mesh(
      "pp_tp", dir, "tp", "pp", [] { return train_tp_pipeline(nullptr, nullptr); },
      [](auto tensor_parallel, auto pipeline) { return train_tp_pipeline(pipeline, tensor_parallel); });
  const Run ref = load(dir + "/ref");
  ASSERT_EQ(ref.losses.size(), size_t(kSteps));
  size_t params_seen = 0;
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(ranks[size_t(r)].exit_code, 0) << "rank " << r << ": " << ranks[size_t(r)].message;
    const Run run = load(dir + "/" + std::to_string(r));
    EXPECT_LE(worst_relative_difference(run.losses, ref.losses), 1e-5) << "rank " << r << ": worst per-step loss";
    ASSERT_FALSE(run.params.empty()) << "rank " << r;
    for (auto& [name, v] : run.params) {
      const auto it = ref.params.find(name);
      ASSERT_NE(it, ref.params.end()) << name;
      const std::vector<double> want = expected_tp_slice(name, it->second, r % 2, 2);
      ASSERT_EQ(v.size(), want.size()) << "rank " << r << " " << name;
      const bool key_bias = name.ends_with("attn.in_proj_bias");
      double d = 0;
      for (size_t i = 0; i < v.size(); ++i) {
        const bool in_key_block = key_bias && i >= v.size() / 3 && i < 2 * v.size() / 3;
        const double e = std::abs(v[i] - want[i]);
        d = std::max(d, in_key_block ? e / (2e-3 * kSteps) : e / (std::abs(want[i]) + 1e-2) / 1e-4);
      }
      EXPECT_LE(d, 1.0) << "rank " << r << " " << name << " (1 = at the tolerance)";
      if (r % 2 == 0) ++params_seen;
    }
  }
  EXPECT_EQ(params_seen, ref.params.size()) << "the stages together hold every parameter once";
  EXPECT_LT(ref.losses.back(), 0.8 * ref.losses.front());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(PipelineParallel, PipelineTimesTensorParallelMeshMatchesOneProcess) { expect_tp_pipeline_matches(); }

// A batch the micro-batches do not divide, seen by the first stage only, fails every rank with
// INVALID_ARGUMENT instead of leaving the others waiting on a receive.
TEST(PipelineParallel, BadBatchFailsEveryRankWithoutHanging) {
  auto ranks = run_ranks(2, "pp_bad", [&](int rank, int size, const std::string& dir) -> std::string {
    std::unique_ptr<gearbox::comm::GlooCommunicator> comm;
    std::string error;
    auto pg = join(rank, size, dir, &comm, &error);
    if (!pg) return error;
    nn::manual_seed(0);
    auto stage = std::make_shared<nn::Linear>(4, 4);
    nn::PipelineParallel pipe(stage, pg, {.micro_batches = 4});
    nn::Tensor x = nn::Tensor::zeros({6, 4});
    nn::Tensor y = nn::Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3});
    try {
      pipe.train_step(x, y, kCrossEntropy);
    } catch (const nn::Error& e) {
      if (e.code() != "INVALID_ARGUMENT") return "code " + e.code();
      return "";
    }
    return "no error";
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(ranks[size_t(r)].exit_code, 0) << "rank " << r << ": " << ranks[size_t(r)].message;
}

}  // namespace
