// Every dp x tp x pp layout of one GPT-style transformer on this machine's ranks, timed, against
// gearbox plan's predictions for the same network (issue 27; driver: run.py beside this file,
// docs/performance.md "Parallel layouts").
//
//   gearbox_bench_parallel_layouts predict NETWORK.json LINKS.json DEVICES
//       the planner's best layout of each dp x tp x pp (the search the bench can run: no ZeRO,
//       no recomputation) as JSON lines, where it runs units whole also the same degrees with
//       every unit split, and the one the search picks
//   gearbox launch -n 4 -- gearbox_bench_parallel_layouts run NETWORK.json LAYOUT_JSON STEPS WARMUP
//       trains the network in that layout (one of predict's layouts, as gearbox plan --json writes
//       it: nn::parse_parallel_layout reads it), rank 0 prints one JSON line: per-step wall times
//       and losses
//   gearbox_bench_parallel_layouts calibrate NETWORK.json
//       this process's single-thread matmul rate, memory bandwidth, the framework's fixed
//       cost per op and a profile of the network's layers, as JSON (calibrate.py writes them
//       into a links file)
//   gearbox launch -n 4 -- gearbox_bench_parallel_layouts sync [ITERS]
//       the extra cost of a collective between ranks that were computing (sharing cores)
//
// The network is the planner's (comm/plan/network.h) built from the framework's layers:
// a vocabulary-parallel embedding plus learned positions; pre-norm blocks x + attn(LN(x)) with a
// causal mask (ParallelMultiheadAttention), x + fc2(gelu(fc1(LN(x)))) (column / row parallel);
// a final LayerNorm, an untied column-parallel head and the vocabulary-parallel cross-entropy
// (the JSON says "tied_embeddings": false). tp = 1, and the units the layout runs whole on every
// tensor-parallel rank (the planner's per-layer choice), use the plain layers. float32, AdamW.
// Ranks are numbered tp fastest, then dp, then pp (the planner's order). Data parallelism
// averages each stage's gradients after the backward pass (nn::average_gradients, not
// overlapped: what the cost model assumes).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "comm/environment.h"
#include "comm/gloo_communicator.h"
#include "comm/plan/search.h"
#include "gearbox/nn_distributed.hpp"

namespace nn = gbx::nn;
namespace plan = gearbox::comm::plan;
using nlohmann::json;

namespace {

void check(const gearbox::Status& s) {
  if (!s.ok()) throw std::runtime_error(s.to_string());
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

plan::TransformerSpec load_spec(const std::string& path) {
  auto spec = plan::load_network(path);
  if (!spec.ok()) {
    std::cerr << spec.status().to_string() << "\n";
    std::exit(2);
  }
  return *spec;
}

using Group = std::shared_ptr<nn::ProcessGroup>;

// The embedding unit: token ids [b, s] -> [b, s, h], the vocabulary split over tp.
class EmbeddingUnit : public nn::Module {
 public:
  EmbeddingUnit(const plan::TransformerSpec& sp, const Group& tp) {
    if (tp) table_ = std::make_shared<nn::VocabParallelEmbedding>(sp.vocab, sp.hidden, tp);
    else table_ = std::make_shared<nn::Embedding>(sp.vocab, sp.hidden);
    register_module("table", table_);
    positions_ = register_parameter("positions", nn::Tensor::randn({sp.seq, sp.hidden}) * 0.02);
  }
  nn::Tensor forward(const nn::Tensor& ids) override { return nn::add((*table_)(ids), positions_); }

 private:
  std::shared_ptr<nn::Module> table_;
  nn::Tensor positions_;
};

// A pre-norm GPT block; heads and the MLP split over tp.
class Block : public nn::Module {
 public:
  Block(const plan::TransformerSpec& sp, const Group& tp) {
    const int64_t h = sp.hidden;
    nn::MultiheadAttentionOptions a{.batch_first = true};
    ln1_ = std::make_shared<nn::LayerNorm>(std::vector<int64_t>{h});
    ln2_ = std::make_shared<nn::LayerNorm>(std::vector<int64_t>{h});
    if (tp) {
      pattn_ = std::make_shared<nn::ParallelMultiheadAttention>(h, sp.heads, tp, a);
      fc1_ = std::make_shared<nn::ColumnParallelLinear>(h, sp.ffn(), tp);
      fc2_ = std::make_shared<nn::RowParallelLinear>(sp.ffn(), h, tp);
      register_module("attn", pattn_);
    } else {
      attn_ = std::make_shared<nn::MultiheadAttention>(h, sp.heads, a);
      fc1_ = std::make_shared<nn::Linear>(h, sp.ffn());
      fc2_ = std::make_shared<nn::Linear>(sp.ffn(), h);
      register_module("attn", attn_);
    }
    register_module("ln1", ln1_);
    register_module("ln2", ln2_);
    register_module("fc1", fc1_);
    register_module("fc2", fc2_);
    // Causal: position i attends to positions <= i.
    std::vector<float> m(size_t(sp.seq * sp.seq), 0.0f);
    for (int64_t i = 0; i < sp.seq; ++i)
      for (int64_t j = i + 1; j < sp.seq; ++j) m[size_t(i * sp.seq + j)] = -1e9f;
    mask_ = nn::Tensor::from_vector(m, {sp.seq, sp.seq});
  }
  nn::Tensor forward(const nn::Tensor& x) override {
    nn::Tensor n = (*ln1_)(x);
    nn::Tensor a = pattn_ ? pattn_->attend(n, n, n, mask_) : attn_->attend(n, n, n, mask_, false).output;
    nn::Tensor y = nn::add(x, a);
    return nn::add(y, (*fc2_)(nn::gelu((*fc1_)((*ln2_)(y)))));
  }

 private:
  std::shared_ptr<nn::ParallelMultiheadAttention> pattn_;
  std::shared_ptr<nn::MultiheadAttention> attn_;
  std::shared_ptr<nn::Module> ln1_, ln2_, fc1_, fc2_;
  nn::Tensor mask_;
};

// The final LayerNorm and the logits [b * s, V / tp] (this rank's classes).
class Head : public nn::Module {
 public:
  Head(const plan::TransformerSpec& sp, const Group& tp) : hidden_(sp.hidden) {
    ln_ = std::make_shared<nn::LayerNorm>(std::vector<int64_t>{sp.hidden});
    if (tp)
      logits_ = std::make_shared<nn::ColumnParallelLinear>(sp.hidden, sp.vocab, tp,
                                                           nn::ColumnParallelLinearOptions{.bias = false});
    else logits_ = std::make_shared<nn::Linear>(sp.hidden, sp.vocab, false);
    register_module("ln", ln_);
    register_module("logits", logits_);
  }
  nn::Tensor forward(const nn::Tensor& x) override { return (*logits_)(nn::reshape((*ln_)(x), {-1, hidden_})); }

 private:
  int64_t hidden_;
  std::shared_ptr<nn::Module> ln_, logits_;
};

// ---- run: one layout under gearbox launch ----------------------------------------------

int run(int argc, char** argv) {
  if (argc != 6) {
    std::cerr << "run NETWORK LAYOUT_JSON STEPS WARMUP\n";
    return 2;
  }
  const plan::TransformerSpec sp = load_spec(argv[2]);
  const int steps = std::stoi(argv[4]), warmup = std::stoi(argv[5]);
  std::shared_ptr<nn::ProcessGroup> world = nn::ProcessGroup::from_environment();
  const int rank = world->rank(), size = world->size();
  nn::ParallelMesh mesh(world, nn::parse_parallel_layout(argv[3]));
  const int d_idx = mesh.data_rank();

  // The whole network from one seed on every rank (the parallel layers keep their slices; a unit
  // run whole builds the plain layers, which draw the same weights), then this rank's stage.
  const int head_unit = int(sp.layers) + 1;
  nn::manual_seed(0);
  std::vector<std::shared_ptr<nn::Module>> all{std::make_shared<EmbeddingUnit>(sp, mesh.tensor_group_for(0))};
  for (int i = 1; i < head_unit; ++i) all.push_back(std::make_shared<Block>(sp, mesh.tensor_group_for(i)));
  all.push_back(std::make_shared<Head>(sp, mesh.tensor_group_for(head_unit)));
  auto stage = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>(
      all.begin() + mesh.first_unit(), all.begin() + mesh.first_unit() + mesh.unit_count()));
  all.clear();
  nn::AdamW opt(stage->parameters(), nn::AdamOptions{.lr = 1e-3, .weight_decay = 1e-2});
  nn::LossFunction loss_fn = [head_g = mesh.tensor_group_for(head_unit)](const nn::Tensor& logits,
                                                                         const nn::Tensor& target) {
    nn::Tensor t = nn::reshape(target, {-1});
    return head_g ? nn::vocab_parallel_cross_entropy(logits, t, head_g) : nn::cross_entropy(logits, t);
  };
  std::unique_ptr<nn::PipelineParallel> pipe;
  if (mesh.pipeline_group())
    pipe = std::make_unique<nn::PipelineParallel>(stage, mesh.pipeline_group(), mesh.pipeline_options());

  // Token ids (uniform, from a seed of their own): every layout trains on the same global
  // batches; this replica takes rows [d_idx b, (d_idx + 1) b) of each.
  const nn::ParallelLayout& layout = mesh.layout();
  const int64_t b = sp.global_batch / layout.dp, micro = layout.micro_batches;
  std::vector<double> times, losses;
  for (int step = 0; step < warmup + steps; ++step) {
    nn::manual_seed(1000 + uint64_t(step));
    nn::Tensor ids = nn::Tensor::uniform({sp.global_batch, sp.seq + 1}, 0, double(sp.vocab));
    std::vector<float> f = ids.to_float_vector();
    std::vector<int64_t> v(f.begin(), f.end());
    nn::Tensor all_ids = nn::Tensor::from_vector(v, {sp.global_batch, sp.seq + 1});
    nn::Tensor mine = nn::slice(all_ids, 0, d_idx * b, (d_idx + 1) * b);
    nn::Tensor x = nn::slice(mine, 1, 0, sp.seq), y = nn::slice(mine, 1, 1, sp.seq + 1);
    if (size > 1) world->barrier();
    const double t0 = now_s();
    opt.zero_grad();
    double loss = 0;
    if (pipe) {
      loss = pipe->train_step(x, y, loss_fn);
    } else {
      for (int64_t j = 0; j < micro; ++j) {
        const int64_t r = b / micro;
        nn::Tensor l = loss_fn((*stage)(nn::slice(x, 0, j * r, (j + 1) * r)), nn::slice(y, 0, j * r, (j + 1) * r));
        (l * (1.0 / double(micro))).backward();
        loss += l.item() / double(micro);
      }
    }
    if (const auto& dp_g = mesh.data_group()) {
      nn::average_gradients(stage->parameters(), dp_g);
      loss = dp_g->average(loss);
    }
    opt.step();
    // Every rank's step has ended when the slowest has: the step's time is the slowest rank's.
    if (size > 1) world->barrier();
    const double dt = now_s() - t0;
    if (step >= warmup) times.push_back(dt), losses.push_back(loss);
  }
  if (rank == 0)
    std::cout
        << json{{"dp", layout.dp}, {"tp", layout.tp}, {"pp", layout.pp}, {"step_s", times}, {"loss", losses}}.dump()
        << std::endl;
  return 0;
}

// ---- predict: the planner on the same network ------------------------------------------

int predict(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "predict NETWORK LINKS DEVICES\n";
    return 2;
  }
  const plan::TransformerSpec sp = load_spec(argv[2]);
  auto hw = plan::load_hardware(argv[3], plan::Hardware{});
  if (!hw.ok()) {
    std::cerr << hw.status().to_string() << "\n";
    return 2;
  }
  plan::SearchOptions o;
  o.memory_limit = hw->memory_bytes > 0 ? hw->memory_bytes : 1e18;
  o.keep = 1;
  o.allow_zero = false;       // the bench runs no ZeRO (it saves memory, not time)
  o.allow_recompute = false;  // nor recomputation (the framework has none yet)
  auto r = plan::search(sp, std::stoi(argv[4]), *hw, o);
  if (!r.ok()) {
    std::cerr << r.status().to_string() << "\n";
    return 1;
  }
  auto print = [](const plan::Layout& l, const plan::Estimate& e, bool fits) {
    std::cout
        << json{{"layout", plan::layout_to_json(l)}, {"estimate", plan::estimate_to_json(e)}, {"fits", fits}}.dump()
        << "\n";
  };
  for (const auto& d : r->per_degrees) {
    print(d.best.layout, d.best.estimate, d.fits);
    // The per-layer choice is checked too: the same layout with every unit split.
    if (d.best.layout.replicated_units.empty()) continue;
    plan::Layout split = d.best.layout;
    split.replicated_units.clear();
    const bool fits = plan::choose_stage_cut(sp, *hw, o.memory_limit, &split);
    auto e = plan::estimate(sp, *hw, split);
    if (e.ok()) print(split, *e, fits);
  }
  std::cout << json{{"chosen", plan::layout_to_json(r->best.front().layout)}}.dump() << "\n";
  return 0;
}

// ---- calibrate: this process's rates and fixed cost per op ------------------------------

// The median of `reps` timings of fn() after one warm-up call.
template <class F>
double median_s(int reps, F fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_s();
    fn();
    t.push_back(now_s() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int calibrate(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "calibrate NETWORK\n";
    return 2;
  }
  const plan::TransformerSpec sp = load_spec(argv[2]);
  nn::manual_seed(0);
  double flops = 0, matmul_s = 0, bytes = 0, add_s = 0;
  {
    nn::NoGradGuard no_grad;
    // At the network's shapes, from one sequence's tokens to a quarter of the batch's: the
    // MLP's matrix product [T, h] x [h, ffn], and a residual add of two [T, h] activations
    // (reads two, writes one: the bandwidth an elementwise op of that size sees, allocation
    // of its output included).
    for (int64_t T : {sp.seq, sp.seq * std::max<int64_t>(1, sp.global_batch / 4)}) {
      nn::Tensor a = nn::Tensor::randn({T, sp.hidden}), w = nn::Tensor::randn({sp.hidden, sp.ffn()});
      matmul_s += median_s(21, [&] { nn::matmul(a, w); });
      flops += 2.0 * double(T) * double(sp.hidden) * double(sp.ffn());
      nn::Tensor b = nn::Tensor::randn({T, sp.hidden});
      add_s += median_s(21, [&] { nn::add(a, b); });
      bytes += 3.0 * 4 * double(T) * double(sp.hidden);
    }
  }
  // The fixed cost per op: one block's forward and backward at one token of 2 features per head,
  // where the arithmetic is nothing, over the cost model's op count for that: a block's forward
  // ops, the backward counted as two forwards (the model's rule).
  plan::TransformerSpec tiny = sp;
  tiny.hidden = 2 * sp.heads, tiny.ffn_hidden = 0, tiny.seq = 1;
  const int ops = int(plan::units(tiny, 1, 1)[1].ops.size());
  Block block(tiny, nullptr);
  nn::Tensor in = nn::Tensor::randn({1, 1, tiny.hidden});
  in.set_requires_grad();
  const double block_s = median_s(201, [&] {
    block.zero_grad();
    nn::sum(block(in)).backward();
  });
  const double overhead = block_s / (3.0 * ops);

  // The profile: the network's layers at its shapes (micro-batches of 1 sequence, a quarter of
  // the batch and the whole batch, tp = 1), forward and forward + backward, grouped by the cost model's ops they
  // compute. Each group's time, less the fixed cost of its ops, over the FLOPs the model counts
  // for them, is the rate of each op in the group (the ops of a group scale alike with the
  // micro-batch and the tensor-parallel split, so one rate prices their sum exactly).
  struct Group {
    std::vector<std::string> ops;
    double flops = 0, forward_s = 0, backward_s = 0;
  };
  std::map<std::string, Group> groups{
      {"attention", {{"qkv", "attention_scores", "softmax", "attention_context", "projection"}}},
      {"mlp", {{"mlp_up", "gelu", "mlp_down"}}},
      {"norms_and_residuals", {{"layer_norm_1", "residual_layer_norm_2", "residual"}}},
      {"embedding", {{"embedding"}}},
      {"head", {{"layer_norm_final", "logits", "cross_entropy"}}}};
  const int64_t h = sp.hidden;
  for (int64_t b : {int64_t{1}, std::max<int64_t>(1, sp.global_batch / 4), sp.global_batch}) {
    std::map<std::string, double> op_flops;
    for (const plan::Unit& u : plan::units(sp, b, 1))
      for (const plan::Op& op : u.ops) op_flops[op.name] = op.flops;
    nn::manual_seed(0);
    auto leaf = [](std::vector<int64_t> shape) { return nn::Tensor::randn(std::move(shape)).set_requires_grad(); };
    Block block(sp, nullptr);  // for its causal mask's shape only
    std::vector<float> m(size_t(sp.seq * sp.seq), 0.0f);
    for (int64_t i = 0; i < sp.seq; ++i)
      for (int64_t j = i + 1; j < sp.seq; ++j) m[size_t(i * sp.seq + j)] = -1e9f;
    nn::Tensor mask = nn::Tensor::from_vector(m, {sp.seq, sp.seq});
    nn::MultiheadAttention mha(h, sp.heads, {.batch_first = true});
    nn::Linear up(h, sp.ffn()), down(sp.ffn(), h), logits(h, sp.vocab, false);
    nn::LayerNorm ln1({h}), ln2({h}), lnf({h});
    nn::Embedding table(sp.vocab, h);
    nn::Tensor positions = leaf({sp.seq, h});
    nn::Tensor x = leaf({b, sp.seq, h}), y = leaf({b, sp.seq, h});
    std::vector<int64_t> id_values(size_t(b * sp.seq));
    for (size_t i = 0; i < id_values.size(); ++i) id_values[i] = int64_t(i * 7919 % size_t(sp.vocab));
    nn::Tensor ids = nn::Tensor::from_vector(id_values, {b, sp.seq});
    nn::Tensor targets = nn::Tensor::from_vector(id_values);
    std::map<std::string, std::function<std::vector<nn::Tensor>()>> forward{
        {"attention", [&] { return std::vector<nn::Tensor>{mha.attend(x, x, x, mask, false).output}; }},
        {"mlp", [&] { return std::vector<nn::Tensor>{down(nn::gelu(up(x)))}; }},
        {"norms_and_residuals",
         [&] {
           return std::vector<nn::Tensor>{ln1(x), ln2(nn::add(x, y)), nn::add(x, y)};
         }},
        {"embedding", [&] { return std::vector<nn::Tensor>{nn::add(table(ids), positions)}; }},
        {"head", [&] {
           return std::vector<nn::Tensor>{nn::cross_entropy(logits(nn::reshape(lnf(x), {-1, h})), targets)};
         }}};
    for (auto& [name, g] : groups) {
      auto& fwd = forward.at(name);
      // Gradients of the outputs' shapes, made once (not timed).
      std::vector<nn::Tensor> grads;
      for (const nn::Tensor& o : fwd()) grads.push_back(o.rank() == 0 ? nn::Tensor() : nn::Tensor::randn(o.shape()));
      const double f_s = median_s(15, [&] { fwd(); });
      const double fb_s = median_s(15, [&] {
        std::vector<nn::Tensor> outs = fwd();
        for (size_t i = 0; i < outs.size(); ++i) outs[i].backward(grads[i]);
      });
      for (const std::string& op : g.ops) g.flops += op_flops.at(op);
      const double n = double(g.ops.size());
      g.forward_s += std::max(f_s - n * overhead, 0.1 * f_s);
      g.backward_s += std::max(fb_s - f_s - 2 * n * overhead, 0.1 * (fb_s - f_s));
    }
  }
  json op_rates = json::object(), group_times = json::object();
  for (auto& [name, g] : groups) {
    for (const std::string& op : g.ops)
      op_rates[op] = {{"forward_gflops", g.flops / g.forward_s / 1e9},
                      {"backward_gflops", g.flops / g.backward_s / 1e9}};
    group_times[name] = {{"forward_ms", g.forward_s * 1e3}, {"backward_ms", g.backward_s * 1e3}};
  }

  json out{{"matmul_gflops", flops / matmul_s / 1e9},
           {"memory_bandwidth_gbs", bytes / add_s / 1e9},
           {"op_overhead_us", overhead * 1e6},
           {"ops", op_rates},
           {"profile_ms", group_times},
           {"tiny_block_forward_backward_us", block_s * 1e6},
           {"cost_model_ops_per_block", ops}};
  std::cout << out.dump() << std::endl;
  return 0;
}

// ---- sync: what a collective costs between ranks that were computing ---------------------

// Under gearbox launch: every rank alternates a compute segment (matrix products) with a small
// allreduce of all ranks, and times three loops of `iters`: compute alone, the allreduce alone
// (back to back, as bench/allreduce times it) and the two alternating. On a host whose ranks
// share cores, the third costs more than the sum of the first two: a rank that a message wakes
// waits for a core the computing ranks hold. Rank 0 prints the extra per collective.
int sync(int argc, char** argv) {
  const int iters = argc > 2 ? std::stoi(argv[2]) : 40;
  auto joined = gearbox::comm::join_job();
  if (!joined.ok()) {
    std::cerr << joined.status().to_string() << "\n";
    return 1;
  }
  auto& job = **joined;
  gearbox::comm::Communicator& world = *job.world;
  nn::manual_seed(0);
  nn::NoGradGuard no_grad;
  nn::Tensor a = nn::Tensor::randn({512, 128}), w = nn::Tensor::randn({128, 512});
  gearbox::Tensor small(gearbox::DType::F32, {1024});
  auto compute = [&] {
    for (int i = 0; i < 4; ++i) nn::matmul(a, w);
  };
  auto allreduce = [&] { check(world.allreduce(small)); };
  auto loop = [&](auto body) {
    check(world.barrier());
    const double t0 = now_s();
    for (int i = 0; i < iters; ++i) body();
    check(world.barrier());
    return (now_s() - t0) / iters;
  };
  loop([&] { compute(), allreduce(); });  // warm-up
  const double c = loop(compute), r = loop(allreduce), both = loop([&] { compute(), allreduce(); });
  if (job.env.rank == 0)
    std::cout << json{{"ranks", job.env.size},
                      {"compute_ms", c * 1e3},
                      {"allreduce_ms", r * 1e3},
                      {"alternating_ms", both * 1e3},
                      {"sync_overhead_us", std::max(0.0, both - c - r) * 1e6}}
                     .dump()
              << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "run") return run(argc, argv);
    if (mode == "predict") return predict(argc, argv);
    if (mode == "calibrate") return calibrate(argc, argv);
    if (mode == "sync") return sync(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "gearbox_bench_parallel_layouts " << mode << ": " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: gearbox_bench_parallel_layouts predict|run|calibrate ... (see the file's header)\n";
  return 2;
}
