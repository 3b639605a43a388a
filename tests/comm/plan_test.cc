// gearbox plan's cost model and search (src/comm/plan) against references outside it: GPT-3's
// published parameter counts, Narayanan et al.'s closed form for training FLOPs, the textbook
// pipeline bubble and a hand-played schedule, and a brute-force search over every stage cut.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "comm/plan/cost_model.h"
#include "comm/plan/search.h"

namespace gearbox::comm::plan {
namespace {

Hardware test_hardware() {
  Hardware hw;
  hw.peak_flops = 100e12;
  hw.memory_bandwidth = 1e12;
  hw.matmul_efficiency = 0.6;
  hw.devices_per_node = 4;
  hw.intra_node = {50e9, 5e-6};
  hw.inter_node = {10e9, 30e-6};
  return hw;
}

TEST(Plan, ParameterCountsMatchTheGpt3Paper) {
  // Brown et al. 2020, table 2.1: 1.3B, 13.0B and 175.0B parameters.
  for (auto [name, published, tolerance] : {std::tuple{"gpt-1.3b", 1.3e9, 0.02}, std::tuple{"gpt-13b", 13.0e9, 0.02},
                                            std::tuple{"gpt-175b", 175.0e9, 0.01}}) {
    auto spec = builtin_network(name);
    ASSERT_TRUE(spec.ok()) << spec.status().to_string();
    EXPECT_NEAR(double(spec->total_params()) / published, 1.0, tolerance) << name << ": " << spec->total_params();
  }
}

TEST(Plan, TrainingFlopsMatchNarayanansClosedForm) {
  // Forward + backward = 3 x forward = 72 B s L h^2 (1 + s/(6h) + V/(12 L h)) (Narayanan et al.
  // 2021, eq. 3 without recomputation).
  for (const char* name : {"gpt-tiny", "gpt-1.3b", "gpt-13b", "gpt-175b"}) {
    TransformerSpec sp = builtin_network(name).value();
    const double B = 3, s = double(sp.seq), L = double(sp.layers), h = double(sp.hidden), V = double(sp.vocab);
    const double expected = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
    EXPECT_NEAR(3 * forward_flops(sp, 3) / expected, 1.0, 1e-12) << name;
  }
}

TEST(Plan, UniformPipelineHasTheTextbookMakespan) {
  // (m + p - 1) stage-times for GPipe and for 1F1B (Huang et al. 2019; Narayanan et al. 2021).
  for (int pp : {1, 2, 3, 4, 8})
    for (int64_t m : {1, 2, 5, 8, 32})
      for (Schedule s : {Schedule::kGPipe, Schedule::k1F1B}) {
        std::vector<double> f(size_t(pp), 1.0), b(size_t(pp), 2.0);
        EXPECT_DOUBLE_EQ(simulate_pipeline(f, b, 0, m, s), double(m + pp - 1) * 3.0)
            << "pp " << pp << " m " << m << " " << schedule_name(s);
      }
}

TEST(Plan, UnevenPipelineMatchesAHandPlayedTimeline) {
  // Two stages, forward 1 and 2, backward 2 and 4, 0.5 per crossing, 2 micro-batches. Played by
  // hand (GPipe): stage 1 runs F0 1.5-3.5, F1 3.5-5.5, B0 5.5-9.5, B1 9.5-13.5; stage 0 runs
  // B0 10-12 and B1 14-16. 1F1B: stage 1 runs F0 1.5-3.5, B0 3.5-7.5, F1 7.5-9.5, B1 9.5-13.5;
  // stage 0's B1 ends at 16 as well.
  EXPECT_DOUBLE_EQ(simulate_pipeline({1, 2}, {2, 4}, 0.5, 2, Schedule::kGPipe), 16.0);
  EXPECT_DOUBLE_EQ(simulate_pipeline({1, 2}, {2, 4}, 0.5, 2, Schedule::k1F1B), 16.0);
  // One micro-batch: F0 0-1, F1 1.5-3.5, B1 3.5-7.5, B0 8-10.
  EXPECT_DOUBLE_EQ(simulate_pipeline({1, 2}, {2, 4}, 0.5, 1, Schedule::k1F1B), 10.0);
}

TEST(Plan, OneF1BKeepsFewerMicroBatchesInFlight) {
  EXPECT_EQ(in_flight(Schedule::kGPipe, 0, 4, 16), 16);
  EXPECT_EQ(in_flight(Schedule::k1F1B, 0, 4, 16), 4);
  EXPECT_EQ(in_flight(Schedule::k1F1B, 3, 4, 16), 1);
  EXPECT_EQ(in_flight(Schedule::k1F1B, 0, 4, 2), 2);
}

// Every layout of the search's space with every contiguous stage cut, costed by estimate():
// the fastest that fits must be what search() returns (the search picks its cut by bisection).
TEST(Plan, SearchFindsTheBruteForceOptimum) {
  TransformerSpec sp{"brute", 4, 256, 8, 0, 1000, 64, 32, 2};
  const Hardware hw = test_hardware();
  const int n_units = int(sp.layers) + 2;
  for (int devices : {4, 8}) {
    for (double limit : {1e12, 30e6, 12e6}) {
      double brute = std::numeric_limits<double>::infinity();
      for (int tp : {1, 2, 4, 8})
        for (int pp : {1, 2, 4, 8}) {
          if (devices % (tp * pp) != 0 || sp.heads % tp != 0 || pp > n_units) continue;
          int dp = devices / (tp * pp);
          if (sp.global_batch % dp != 0) continue;
          for (int64_t m = 1; m <= sp.global_batch / dp; ++m) {
            if ((sp.global_batch / dp) % m != 0 || (pp > 1 && m > 8 * pp)) continue;
            for (Schedule sched : {Schedule::k1F1B, Schedule::kGPipe})
              for (int zero = 0; zero <= (dp > 1 ? 2 : 0); ++zero)
                for (bool rc : {false, true}) {
                  if (pp == 1 && sched == Schedule::kGPipe) continue;
                  // Every composition of n_units into pp positive parts.
                  std::vector<int> parts;
                  std::function<void(int, int)> cut = [&](int left, int stages) {
                    if (stages == 1) {
                      parts.push_back(left);
                      Layout l;
                      l.dp = dp, l.tp = tp, l.pp = pp, l.micro_batches = m, l.schedule = sched, l.zero = zero;
                      l.recompute = rc, l.stage_units = parts;
                      auto e = estimate(sp, hw, l);
                      ASSERT_TRUE(e.ok()) << e.status().to_string();
                      if (e->memory.total() <= limit) brute = std::min(brute, e->step_s);
                      parts.pop_back();
                      return;
                    }
                    for (int k = 1; k <= left - (stages - 1); ++k) {
                      parts.push_back(k);
                      cut(left - k, stages - 1);
                      parts.pop_back();
                    }
                  };
                  cut(n_units, pp);
                }
          }
        }
      SearchOptions o;
      o.memory_limit = limit;
      o.allow_replication = false;  // the enumeration splits every unit
      auto r = search(sp, devices, hw, o);
      if (std::isinf(brute)) {
        ASSERT_FALSE(r.ok()) << devices << " devices, limit " << limit;
        EXPECT_EQ(r.status().code(), ErrorCode::PLAN_INFEASIBLE);
        continue;
      }
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      const Estimate& got = r->best.front().estimate;
      EXPECT_LE(got.memory.total(), limit);
      // The search cannot beat the exhaustive optimum; its min-max cut may miss it only by what
      // the makespan's dependence on the other stages allows.
      EXPECT_GE(got.step_s, brute * (1 - 1e-12)) << devices << " devices, limit " << limit;
      EXPECT_LE(got.step_s, brute * (1 + 1e-3)) << devices << " devices, limit " << limit;
    }
  }
}

TEST(Plan, LargeSearchStaysWithinTheMemoryLimit) {
  TransformerSpec sp = builtin_network("gpt-175b").value();
  Hardware hw = test_hardware();
  hw.devices_per_node = 8;
  SearchOptions o;
  o.memory_limit = 80.0 * (1 << 30);
  o.keep = 20;
  auto r = search(sp, 1024, hw, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_GT(r->evaluated, 100);
  for (const Candidate& c : r->best) {
    EXPECT_LE(c.estimate.memory.total(), o.memory_limit);
    EXPECT_EQ(c.layout.devices(), 1024);
  }
  // 175B parameters at 16 bytes each do not fit one 80 GiB device: the model must be split.
  EXPECT_GT(r->best.front().layout.tp * r->best.front().layout.pp, 1);
}

TEST(Plan, SmallClusterAvoidsPlainDataParallelismThatDoesNotFit) {
  TransformerSpec sp = builtin_network("gpt-1b").value();
  SearchOptions o;
  o.memory_limit = 16.0 * (1 << 30);
  auto r = search(sp, 8, test_hardware(), o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_TRUE(r->has_data_parallel);
  EXPECT_GT(r->data_parallel.estimate.memory.total(), o.memory_limit);
  const Layout& l = r->best.front().layout;
  EXPECT_FALSE(l.dp == 8 && l.zero == 0 && !l.recompute && l.micro_batches == 1)
      << "chose plain data parallelism, which needs " << r->data_parallel.estimate.memory.total() << " bytes";
  EXPECT_LE(r->best.front().estimate.memory.total(), o.memory_limit);
}

// The calibrated figures of a host whose ranks are processes (bench/plan/this_machine.json): a
// fixed cost per op, the share of a core each rank gets and measured per-op rates.
TEST(Plan, OpOverheadAndComputeShareCostWhatTheySay) {
  TransformerSpec sp = builtin_network("gpt-tiny").value();
  Hardware hw = test_hardware();
  hw.peak_flops = hw.memory_bandwidth = 1e30;  // arithmetic free: only the fixed costs remain
  hw.op_overhead = 10e-6;
  Layout l;
  l.micro_batches = 2;
  const std::vector<UnitCost> c = unit_costs(sp, hw, l);
  const std::vector<Unit> u = units(sp, sp.global_batch / 2, 1);
  ASSERT_EQ(c.size(), u.size());
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_NEAR(c[i].forward_s, 10e-6 * double(u[i].ops.size()), 1e-15) << i;
    EXPECT_NEAR(c[i].backward_s, 2 * 10e-6 * double(u[i].ops.size()), 1e-15) << i;
  }
  // Half a core per rank: one process's step (no communication) takes twice as long.
  hw = test_hardware();
  l.stage_units = {int(sp.layers) + 2};
  const double whole = estimate(sp, hw, l).value().step_s;
  hw.compute_share = 0.5;
  EXPECT_NEAR(estimate(sp, hw, l).value().step_s / whole, 2.0, 1e-12);
  // A measured rate for an op replaces its roofline, forward and backward apart: only the MLP's
  // activation changes, by its FLOPs at those rates (the block is unit 1).
  const double before_f = c[1].forward_s, before_b = c[1].backward_s;
  hw = test_hardware();
  hw.peak_flops = hw.memory_bandwidth = 1e30;
  hw.op_overhead = 10e-6;
  hw.op_rates["gelu"] = {2e9, 0.5e9};
  const std::vector<UnitCost> g = unit_costs(sp, hw, l);
  double gelu_flops = 0;
  for (const Op& op : u[1].ops)
    if (op.name == "gelu") gelu_flops = op.flops;
  ASSERT_GT(gelu_flops, 0);
  EXPECT_NEAR(g[1].forward_s - before_f, gelu_flops / 2e9, 1e-12);
  EXPECT_NEAR(g[1].backward_s - before_b, gelu_flops / 0.5e9, 1e-12);
  EXPECT_DOUBLE_EQ(g[0].forward_s, c[0].forward_s);  // the embedding has no GELU
  // From a links file, and refused out of range.
  auto parsed = hardware_from_json({{"device",
                                     {{"op_overhead_us", 12.5},
                                      {"compute_share", 0.25},
                                      {"ops", {{"gelu", {{"forward_gflops", 2}, {"backward_gflops", 0.5}}}}}}}},
                                   "links.json", test_hardware());
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_DOUBLE_EQ(parsed->op_overhead, 12.5e-6);
  EXPECT_DOUBLE_EQ(parsed->compute_share, 0.25);
  ASSERT_EQ(parsed->op_rates.count("gelu"), 1u);
  EXPECT_DOUBLE_EQ(parsed->op_rates.at("gelu").backward, 0.5e9);
  for (auto bad : {nlohmann::json{{"op_overhead_us", -1}}, nlohmann::json{{"compute_share", 2}},
                   nlohmann::json{{"compute_share", 0}}, nlohmann::json{{"ops", {{"gelu", {{"forward_gflops", 1}}}}}},
                   nlohmann::json{{"ops", {{"gelu", 3}}}}})
    EXPECT_EQ(hardware_from_json({{"device", bad}}, "links.json", test_hardware()).status().code(),
              ErrorCode::PLAN_SPEC_INVALID)
        << bad.dump();
}

// Ranks sharing cores compute faster while other stages wait. Played by hand: two stages,
// forward 1 and backward 2 core-seconds, half a core each when both compute (share 0.5).
TEST(Plan, SharedCoresPipelineMatchesAHandPlayedTimeline) {
  const std::vector<double> f{1, 1}, b{2, 2}, none{0, 0};
  // One micro-batch: never two stages at once, each at a whole core: 1 + 1 + 2 + 2.
  EXPECT_DOUBLE_EQ(simulate_shared_pipeline(f, none, b, none, 0, 1, Schedule::kGPipe, 0.5), 6);
  // GPipe, 2 micro-batches: F0 on stage 0 alone (0-1); F1 on stage 0 and F0 on stage 1 together
  // at half speed (1-3); F1 on stage 1 alone (3-4); B0 on stage 1 alone (4-6); B1 on stage 1
  // and B0 on stage 0 together (6-10); B1 on stage 0 alone (10-12).
  EXPECT_DOUBLE_EQ(simulate_shared_pipeline(f, none, b, none, 0, 2, Schedule::kGPipe, 0.5), 12);
  // Communication occupies no core: stage 0's forward ends its allreduce 0.5 later.
  EXPECT_DOUBLE_EQ(simulate_shared_pipeline(f, {0.5, 0}, b, none, 0, 1, Schedule::kGPipe, 0.5), 6.5);
  // With whole cores it is the plain simulation, for uneven stages and both schedules.
  const std::vector<double> uf{1, 2, 0.5}, ub{2, 4, 1}, zero{0, 0, 0};
  for (Schedule s : {Schedule::kGPipe, Schedule::k1F1B})
    for (int64_t m : {1, 3, 8})
      EXPECT_NEAR(simulate_shared_pipeline(uf, zero, ub, zero, 0.25, m, s, 1.0), simulate_pipeline(uf, ub, 0.25, m, s),
                  1e-9)
          << schedule_name(s) << " m " << m;
}

// An untied head (the logits' own vocab x hidden weight) counts those parameters, and a
// pipeline's last stage then keeps no copy of the embedding.
TEST(Plan, UntiedHeadHasItsOwnWeight) {
  nlohmann::json j{{"layers", 2}, {"hidden", 64}, {"heads", 4}, {"vocab", 100}, {"seq", 8}, {"global_batch", 4}};
  const TransformerSpec tied = network_from_json(j, "net.json").value();
  j["tied_embeddings"] = false;
  const TransformerSpec untied = network_from_json(j, "net.json").value();
  EXPECT_EQ(untied.total_params() - tied.total_params(), 100 * 64);
  Layout l;
  l.pp = 2, l.dp = 2;
  l.stage_units = {1, 3};  // the embedding | both blocks and the head: the larger stage
  const Hardware hw = test_hardware();
  // The last stage holds two blocks, the final LayerNorm and a vocab x hidden matrix: the
  // embedding's copy when tied, the head's own weight when not (never both).
  const double last = 2 * double(tied.params_per_block()) + 2 * 64 + 100 * 64;
  const double want = allreduce_s(last * tied.dtype_bytes, 2, group_link(hw, 2, 1));
  EXPECT_DOUBLE_EQ(estimate(tied, hw, l).value().dp_comm_s, want);
  EXPECT_DOUBLE_EQ(estimate(untied, hw, l).value().dp_comm_s, want);
  EXPECT_FALSE(network_from_json({{"layers", 2},
                                  {"hidden", 64},
                                  {"heads", 4},
                                  {"vocab", 100},
                                  {"seq", 8},
                                  {"global_batch", 4},
                                  {"tied_embeddings", "no"}},
                                 "net.json")
                   .ok());
}

// A host like this one (bench/plan/this_machine.json): loopback links whose latency dwarfs a
// small layer's arithmetic, where running a unit whole beats splitting it.
Hardware high_latency_hardware() {
  Hardware hw = test_hardware();
  hw.peak_flops = 170e9, hw.matmul_efficiency = 1, hw.memory_bandwidth = 80e9;
  hw.op_overhead = 13e-6, hw.compute_share = 0.5;
  hw.intra_node = hw.inter_node = {1e9, 650e-6};
  return hw;
}

// A unit run whole on every tensor-parallel rank costs, on each, what it costs without tensor
// parallelism (the tp = 1 layout's figures, no allreduce); the others stay split.
TEST(Plan, ReplicatedUnitCostsWhatItCostsUnsplit) {
  const TransformerSpec sp = builtin_network("gpt-tiny").value();
  const Hardware hw = high_latency_hardware();
  Layout split;
  split.tp = 4, split.dp = 2, split.micro_batches = 2;
  Layout one = split;
  one.tp = 1;
  Layout mixed = split;
  mixed.replicated_units = {0, 2, int(sp.layers) + 1};
  const std::vector<UnitCost> s = unit_costs(sp, hw, split), o = unit_costs(sp, hw, one), m = unit_costs(sp, hw, mixed);
  ASSERT_EQ(m.size(), s.size());
  for (size_t k = 0; k < m.size(); ++k) {
    const UnitCost& want = mixed.replicated(int(k)) ? o[k] : s[k];
    EXPECT_DOUBLE_EQ(m[k].forward_s, want.forward_s) << k;
    EXPECT_DOUBLE_EQ(m[k].backward_s, want.backward_s) << k;
    EXPECT_DOUBLE_EQ(m[k].static_bytes, want.static_bytes) << k;
    EXPECT_DOUBLE_EQ(m[k].activation_bytes, want.activation_bytes) << k;
    if (mixed.replicated(int(k))) EXPECT_EQ(m[k].tp_comm_s, 0.0) << k;
    else EXPECT_GT(m[k].tp_comm_s, 0.0) << k;
  }
  // Tied embeddings: the last stage's copy of the table is whole when the head is.
  Layout piped = mixed;
  piped.pp = 2, piped.dp = 1, piped.stage_units = {3, 3};
  const double table = double(sp.vocab) * sp.hidden;
  EXPECT_DOUBLE_EQ(tied_copy_params(sp, piped), table);
  piped.replicated_units = {2};
  EXPECT_DOUBLE_EQ(tied_copy_params(sp, piped), table / 4);
  EXPECT_TRUE(estimate(sp, hw, piped).ok());
  for (std::vector<int> bad : {std::vector<int>{0}, std::vector<int>{2, 1}, std::vector<int>{6}, std::vector<int>{-1},
                               std::vector<int>{3, 3}}) {
    piped.replicated_units = bad;
    EXPECT_EQ(estimate(sp, hw, piped).status().code(), ErrorCode::INVALID_ARGUMENT) << ::testing::PrintToString(bad);
  }
}

// Without a pipeline and without a memory limit the per-layer choice is the best of every
// subset of units run whole (the tied embedding and head together).
TEST(Plan, ReplicationMatchesEveryChoiceOfUnits) {
  Hardware hw = high_latency_hardware();
  int proper = 0;  // layouts where some units gain and others do not
  // Slow memory makes the optimizer's update of the whole weights count against running whole.
  for (double bandwidth : {80e9, 0.1e9})
    for (bool tied : {true, false}) {
      hw.memory_bandwidth = bandwidth;
      TransformerSpec sp = builtin_network("gpt-tiny").value();
      sp.tied_embeddings = tied;
      const int n = int(sp.layers) + 2;
      for (int tp : {2, 4, 8})
        for (int dp : {1, 2})
          for (int64_t m : {1, 4})
            for (int zero : {0, 1}) {
              if (zero > 0 && dp == 1) continue;
              Layout l;
              l.tp = tp, l.dp = dp, l.micro_batches = m, l.zero = zero, l.stage_units = {n};
              double best = estimate(sp, hw, l).value().step_s;
              for (int mask = 1; mask < (1 << n); ++mask) {
                Layout t = l;
                for (int k = 0; k < n; ++k)
                  if (mask >> k & 1) t.replicated_units.push_back(k);
                if (tied && t.replicated(0) != t.replicated(n - 1)) continue;
                best = std::min(best, estimate(sp, hw, t).value().step_s);
              }
              Layout chosen = l;
              const double inf = std::numeric_limits<double>::infinity();
              const bool any = choose_replication(sp, hw, inf, &chosen);
              const double got = estimate(sp, hw, chosen).value().step_s;
              EXPECT_NEAR(got / best, 1.0, 1e-12)
                  << "bandwidth " << bandwidth << " tied " << tied << " tp " << tp << " dp " << dp << " m " << m;
              proper += any && int(chosen.replicated_units.size()) < n;
            }
    }
  EXPECT_GT(proper, 0) << "no layout where the choice is per layer: the test would not tell";
}

// Under a memory limit between all-split and all-whole, some blocks run whole and the others
// stay split, and the layout fits.
TEST(Plan, ReplicationKeepsToTheMemoryLimit) {
  TransformerSpec sp = builtin_network("gpt-tiny").value();
  sp.layers = 8, sp.global_batch = 4, sp.seq = 32;  // blocks small enough that running whole pays
  const Hardware hw = high_latency_hardware();
  Layout l;
  l.tp = 4, l.micro_batches = 1;
  const double inf = std::numeric_limits<double>::infinity();
  ASSERT_TRUE(choose_stage_cut(sp, hw, inf, &l));
  Layout all = l;
  ASSERT_TRUE(choose_replication(sp, hw, inf, &all));
  const double low = estimate(sp, hw, l).value().memory.total(), high = estimate(sp, hw, all).value().memory.total();
  ASSERT_LT(low, high);
  Layout some = l;
  const double limit = 0.5 * (low + high);
  ASSERT_TRUE(choose_replication(sp, hw, limit, &some));
  EXPECT_GT(some.replicated_units.size(), 0u);
  EXPECT_LT(some.replicated_units.size(), all.replicated_units.size());
  const Estimate e = estimate(sp, hw, some).value();
  EXPECT_LE(e.memory.total(), limit);
  EXPECT_LT(e.step_s, estimate(sp, hw, l).value().step_s);
  EXPECT_GT(e.step_s, estimate(sp, hw, all).value().step_s);
  // The search returns it, and never anything slower than without the choice.
  SearchOptions o;
  o.memory_limit = limit;
  const PlanResult with = search(sp, 4, hw, o).value();
  o.allow_replication = false;
  const PlanResult without = search(sp, 4, hw, o).value();
  EXPECT_LE(with.best.front().estimate.step_s, without.best.front().estimate.step_s);
  for (const Candidate& c : with.best) EXPECT_LE(c.estimate.memory.total(), limit);
}

// nn::parse_parallel_layout reads gearbox plan's layouts back with layout_from_json.
TEST(Plan, LayoutJsonRoundTrips) {
  Layout l;
  l.dp = 2, l.tp = 4, l.pp = 3, l.micro_batches = 6, l.schedule = Schedule::kGPipe, l.zero = 2, l.recompute = true;
  l.stage_units = {2, 3, 1}, l.replicated_units = {0, 4};
  const Layout back = layout_from_json(layout_to_json(l), "layout").value();
  EXPECT_EQ(layout_to_json(back), layout_to_json(l));
  EXPECT_EQ(back.schedule, Schedule::kGPipe);
  EXPECT_TRUE(back.recompute);
  EXPECT_EQ(back.replicated_units, l.replicated_units);
  nlohmann::json bad = layout_to_json(l);
  bad["stage_units"] = {2, 3};
  EXPECT_EQ(layout_from_json(bad, "layout").status().code(), ErrorCode::PLAN_SPEC_INVALID);
}

TEST(Plan, BadSpecsAndImpossibleLimitsSayWhy) {
  auto missing = network_from_json({{"layers", 2}, {"hidden", 64}}, "net.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::PLAN_SPEC_INVALID);
  EXPECT_NE(missing.status().message().find("heads"), std::string::npos);
  nlohmann::json j{{"layers", 2}, {"hidden", 66}, {"heads", 4}, {"vocab", 10}, {"seq", 8}, {"global_batch", 4}};
  auto odd = network_from_json(j, "net.json");
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("divisible"), std::string::npos);
  j["hidden"] = 64;
  j["dtype"] = "int8";
  EXPECT_EQ(network_from_json(j, "net.json").status().code(), ErrorCode::PLAN_SPEC_INVALID);
  j["dtype"] = "fp32";
  j["layers"] = -1;
  EXPECT_EQ(network_from_json(j, "net.json").status().code(), ErrorCode::PLAN_SPEC_INVALID);
  EXPECT_EQ(builtin_network("gpt-5").status().code(), ErrorCode::PLAN_SPEC_INVALID);
  // A key of the wrong type is an error, not an exception out of json::value() that aborts
  // `gearbox plan`: the input fuzz/plan_network.cc found (fuzz/regressions/plan_network/).
  auto named = network_from_json(
      nlohmann::json::parse(R"({"layers": 2, "hids": 2,"name":6, "kamevocab8, #dtype": "fp32"})"), "net.json");
  ASSERT_FALSE(named.ok());
  EXPECT_EQ(named.status().code(), ErrorCode::PLAN_SPEC_INVALID);
  EXPECT_NE(named.status().message().find("\"name\" must be a string"), std::string::npos) << named.status().message();
  auto link = hardware_from_json({{"intra_node", {{"bandwidth_gbs", 0}}}}, "links.json", test_hardware());
  EXPECT_EQ(link.status().code(), ErrorCode::PLAN_SPEC_INVALID);
  auto eff = hardware_from_json({{"device", {{"matmul_efficiency", 2}}}}, "links.json", test_hardware());
  EXPECT_EQ(eff.status().code(), ErrorCode::PLAN_SPEC_INVALID);

  SearchOptions o;
  o.memory_limit = 1e6;
  auto none = search(builtin_network("gpt-tiny").value(), 4, test_hardware(), o);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ErrorCode::PLAN_INFEASIBLE);
  EXPECT_NE(none.status().message().find("the least any needs"), std::string::npos) << none.status().message();
}

}  // namespace
}  // namespace gearbox::comm::plan
