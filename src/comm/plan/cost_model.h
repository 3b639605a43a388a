// The cost model of gearbox plan: predicted step time and memory per rank of one parallel
// layout (data x tensor x pipeline degrees, micro-batches, schedule, ZeRO stage, recomputation,
// which units run whole on every tensor-parallel rank) of a transformer (network.h) on a set of devices joined by
// links.
//
//   computation  each op's time is its FLOPs at the rate measured for that op on the device
//                (a profile, when the links file has one), else its roofline: max(FLOPs /
//                (peak x efficiency), bytes / memory bandwidth) with backward = twice forward;
//                for the op's shapes after the tensor-parallel split, plus the op's fixed
//                overhead, over the device's share of its compute (processes sharing cores);
//                recomputation adds one forward to the backward
//   communication  alpha-beta per link: ring allreduce 2(n-1) alpha + 2 (n-1)/n S / beta;
//                point-to-point alpha + S / beta. Ranks are ordered tensor-parallel innermost,
//                then data-parallel, then pipeline (Megatron-LM's order), so a group whose ranks
//                fit in one node uses the intra-node link, any other the inter-node one
//   pipeline     the stages' forward/backward ops are played out in GPipe or 1F1B order with
//                their dependencies (simulate_pipeline), not a closed form, so uneven stages
//                cost what they cost
//   memory       weights, gradients and optimizer state (ZeRO-1 shards the optimizer state over
//                the data-parallel group, ZeRO-2 the gradients too), plus the activations of
//                the micro-batches in flight on the stage (GPipe: all m; 1F1B: pp - stage)
// Nothing here is overlapped (data-parallel gradients are reduced after the pipeline drains):
// the model predicts an upper bound that ranks layouts, not a promise of wall time.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "comm/plan/network.h"

namespace gearbox::comm::plan {

struct Link {
  double bandwidth = 0;  // bytes per second, per direction
  double latency = 0;    // seconds per message
};

// A measured rate of one of the cost model's ops (network.h names them: "qkv", "gelu",
// "cross_entropy" ...), in the FLOPs the model counts for it per second, forward and backward:
// what a profile of the device's kernels at the network's shapes gives.
struct OpRate {
  double forward = 0, backward = 0;  // FLOP/s
};

struct Hardware {
  double peak_flops = 0;           // per device, for matrix products in the training dtype
  double memory_bandwidth = 0;     // bytes per second
  double matmul_efficiency = 0.7;  // the fraction of peak large matrix products reach
  double memory_bytes = 0;         // per device; 0 when the file does not say
  // The fixed cost of one op in the forward pass (dispatch, allocation, the autodiff tape: what
  // an op of no size costs), added to each op's roofline; 0 for a device whose ops are large
  // enough that it vanishes. Measured for this machine by bench/parallel_layouts/calibrate.py.
  double op_overhead = 0;  // seconds
  // The fraction of its compute a device has while every device computes: 1 for dedicated
  // accelerators, cores / processes when processes share a host's cores (4 ranks on 2 cores:
  // 0.5). Divides every op's time and the optimizer's.
  double compute_share = 1;
  // Measured rates by op name; an op without one is costed by its roofline (backward = twice
  // forward).
  std::map<std::string, OpRate> op_rates;
  int devices_per_node = 8;
  Link intra_node, inter_node;
  std::string source;  // where the figures come from, for the report
};

// The figures of a links file (JSON):
//   {"devices_per_node": 8,
//    "intra_node": {"bandwidth_gbs": 25, "latency_us": 5},
//    "inter_node": {"bandwidth_gbs": 12.5, "latency_us": 20},
//    "device": {"peak_tflops": 312, "memory_bandwidth_gbs": 2039, "matmul_efficiency": 0.7,
//               "memory_gb": 80, "op_overhead_us": 0, "compute_share": 1,
//               "ops": {"gelu": {"forward_gflops": 2.1, "backward_gflops": 0.9}, ...}}}
// Every key is optional; what is missing keeps `base`'s value. PLAN_SPEC_INVALID on a bad one.
Result<Hardware> hardware_from_json(const nlohmann::json& j, const std::string& where, Hardware base);
Result<Hardware> load_hardware(const std::string& path, Hardware base);
nlohmann::json hardware_to_json(const Hardware& hw);

enum class Schedule { kGPipe, k1F1B };
const char* schedule_name(Schedule s);

struct Layout {
  int dp = 1, tp = 1, pp = 1;
  int64_t micro_batches = 1;  // per optimizer step, per data-parallel rank
  Schedule schedule = Schedule::k1F1B;
  int zero = 0;  // 0, 1 (optimizer state sharded) or 2 (and gradients)
  bool recompute = false;
  std::vector<int> stage_units;  // units (network.h) per stage, in order; sums to layers + 2
  // The per-layer split choice: units (indices into units(), ascending) that every rank of the
  // tensor-parallel group computes whole instead of splitting: no tensor-parallel allreduce, at
  // tp times the FLOPs and the unit's whole weights on each rank. Pays where a link's latency
  // outweighs a small layer's arithmetic (a small vocabulary's head, narrow blocks). With tied
  // embeddings the embedding and the head share a weight and are chosen together.
  std::vector<int> replicated_units;
  bool replicated(int unit) const;
  int devices() const { return dp * tp * pp; }
};

struct Memory {
  double weights = 0, gradients = 0, optimizer = 0, activations = 0;
  double total() const { return weights + gradients + optimizer + activations; }
};

struct Estimate {
  double step_s = 0;
  double pipeline_s = 0;    // forward + backward of every micro-batch, bubbles included
  double tp_comm_s = 0;     // tensor-parallel allreduces on the slowest stage, per step
  double p2p_s = 0;         // one activation sent between stages
  double dp_comm_s = 0;     // gradient reduction over the data-parallel group
  double optimizer_s = 0;   // the update (memory bound)
  double bubble = 0;        // idle fraction of the stages during the pipeline
  int64_t micro_batch = 0;  // sequences per micro-batch
  Memory memory;            // of the stage that needs the most
  int busiest_stage = 0;
};

// Forward and backward time of each unit on one micro-batch (tensor-parallel allreduces
// included), and its memory, for a layout's tensor-parallel degree and micro-batch.
struct UnitCost {
  double forward_s = 0, backward_s = 0, tp_comm_s = 0;
  double forward_comm_s = 0, backward_comm_s = 0;  // the parts of forward_s, backward_s that are allreduces
  double static_bytes = 0;                         // weights + gradients + optimizer state per rank
  Memory fixed;                                    // the same, split
  double activation_bytes = 0;                     // kept per micro-batch in flight
  double working_bytes = 0;                        // transient (recomputation rebuilds one unit at a time)
};
std::vector<UnitCost> unit_costs(const TransformerSpec& spec, const Hardware& hw, const Layout& layout);

// Parameters per rank of the logits' copy of a tied embedding on the last stage (0 when the
// head has its own weight, which its unit counts).
double tied_copy_params(const TransformerSpec& spec, const Layout& layout);

// Micro-batches in flight on `stage` of `pp` stages.
int64_t in_flight(Schedule s, int stage, int pp, int64_t micro_batches);

// Plays the schedule out: stage i runs each micro-batch's forward in forward_s[i] and its
// backward in backward_s[i]; crossing a stage boundary takes p2p_s. Returns the makespan.
double simulate_pipeline(const std::vector<double>& forward_s, const std::vector<double>& backward_s, double p2p_s,
                         int64_t micro_batches, Schedule schedule);

// The same on devices that share cores (Hardware::compute_share < 1): stage i's ops compute
// `work` seconds at a whole core's speed, then communicate for `comm` seconds (not computing).
// While k of the pp stages compute, each progresses at min(1, share x pp / k) of a core's speed
// (every data- and tensor-parallel replica of a stage computes at the same time), so a stage
// computes at `share` when all do and faster in the pipeline's bubbles, when the others wait.
double simulate_shared_pipeline(const std::vector<double>& forward_work, const std::vector<double>& forward_comm,
                                const std::vector<double>& backward_work, const std::vector<double>& backward_comm,
                                double p2p_s, int64_t micro_batches, Schedule schedule, double share);

// The estimate of a layout whose stage_units are set. INVALID_ARGUMENT when the layout does
// not fit the network (degrees that do not divide, stages that do not cover the units).
Result<Estimate> estimate(const TransformerSpec& spec, const Hardware& hw, const Layout& layout);

// Collective times on a link.
double allreduce_s(double bytes, int ranks, const Link& link);
double p2p_s(double bytes, const Link& link);
// The link a group of `size` ranks, `stride` apart in rank order, communicates over.
const Link& group_link(const Hardware& hw, int size, int stride);

nlohmann::json layout_to_json(const Layout& l);
// The inverse, for a plan read back (nn::parse_parallel_layout): the keys layout_to_json writes;
// dp, tp, pp and stage_units required, the others optional. PLAN_SPEC_INVALID naming a missing or bad key.
Result<Layout> layout_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json estimate_to_json(const Estimate& e);

}  // namespace gearbox::comm::plan
