// Data-parallel training for gearbox's framework layer (nn.hpp) on the comm layer's Communicator
// (Gloo or MPI; docs/distributed.md): a process group from the launcher's environment, the
// DistributedDataParallel module wrapper and the DistributedSampler.
//
//   auto pg = nn::ProcessGroup::from_environment();   // gearbox launch -n 2 -- ./train
//   auto ddp = std::make_shared<nn::DistributedDataParallel>(net, pg);  // rank 0's weights
//   nn::SGD opt(ddp->parameters(), {.lr = 0.1, .momentum = 0.9});
//   nn::DistributedSampler sampler(n_train, pg->size(), pg->rank(), {.seed = 0});
//   ... each rank: its B/N rows of the global batch
//   nn::Tensor loss = nn::cross_entropy((*ddp)(x), y);
//   opt.zero_grad();
//   loss.backward();              // gradient buckets start their allreduce as they fill
//   ddp->synchronize_gradients(); // waits, averages (every rank: the global batch's gradient)
//   opt.step();
//
// Like every collective user, all ranks must run the same steps in the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gearbox/nn.hpp"
#include "gearbox/nn_data.hpp"  // index_rows, seeded_permutation (the sampler's shuffle)

namespace gearbox::comm {
class Communicator;
}

namespace gbx::nn {

// The ranks of a job and the communicator between them.
class ProcessGroup {
 public:
  // The job's world group as `gearbox launch`, torchrun-style variables or mpirun set it up
  // (comm::join_job: GEARBOX_RANK/WORLD_SIZE, GEARBOX_STORE or MASTER_ADDR:PORT, backend).
  static std::shared_ptr<ProcessGroup> from_environment();
  // Over a communicator the caller keeps alive (tests, sub-groups).
  explicit ProcessGroup(gearbox::comm::Communicator& comm);

  int rank() const;
  int size() const;
  gearbox::comm::Communicator& communicator() const { return *comm_; }
  // Mean / sum of one number over the ranks (e.g. the global batch's loss from each rank's mean
  // over its equal shard). Collectives: every rank calls them.
  double average(double v) const;
  double sum(double v) const;
  void barrier() const;
  // A group of some of this job's ranks (world ranks, ascending), torch.distributed.new_group's
  // counterpart: its own communicator, so its collectives involve only its members. Every rank of
  // the world calls it, in the same order with the same arguments; a rank outside `ranks` gets
  // nullptr. Only on the world group of from_environment() with the gloo backend (a group needs
  // the job's store); INVALID_ARGUMENT otherwise.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks);

 private:
  std::shared_ptr<void> job_;    // the comm::Job from_environment() joined (keeps it alive)
  std::shared_ptr<void> owned_;  // a new_group's communicator
  int groups_made_ = 0;          // names new_group's store namespaces
  gearbox::comm::Communicator* comm_ = nullptr;
};

// Gradient compression: gradients travel (and are summed) as 16-bit floats, half of fp32's bytes;
// each reduction step rounds to the 16-bit type once, the result is averaged in fp32.
enum class GradCompression { None, BFloat16, Float16 };

struct DDPOptions {
  // Gradients are packed into buckets of at most this many fp32 bytes (a parameter bigger than that
  // gets a bucket of its own); torch's default bucket_cap_mb is 25.
  size_t bucket_bytes = size_t{25} << 20;
  GradCompression compression = GradCompression::None;
  // Start each bucket's allreduce from backward() as soon as its gradients are final (else all of
  // them in synchronize_gradients()).
  bool overlap = true;
  // Broadcast the module's buffers (running statistics) from rank 0 before every forward.
  bool broadcast_buffers = true;
  // Also allreduce the fp32 gradients and record how far the compressed average is from it
  // (stats().compression_error): a diagnostic that costs a full-precision allreduce per step.
  bool measure_compression_error = false;
};

struct DDPStats {
  size_t buckets = 0;                         // gradient buckets per step
  size_t bucket_bytes_on_wire = 0;            // bytes one step allreduces (after compression)
  uint64_t steps = 0;                         // synchronize_gradients() calls
  uint64_t buckets_launched_in_backward = 0;  // of all steps' buckets, those backward started
  double compression_error = 0;               // last step: ||avg16 - avg32|| / ||avg32|| (measure_compression_error)
  double max_compression_error = 0;           // the largest of those over the steps
};

// Wraps a module for data-parallel training: at construction every rank gets rank 0's parameters
// and buffers (and checks that all ranks built the same model: COMM_INVALID_ARGUMENT otherwise);
// after backward(), synchronize_gradients() leaves every rank with the average of the ranks'
// gradients, so a local optimizer step keeps the replicas identical. Parameter names get torch's
// "module." prefix.
class DistributedDataParallel : public Module {
 public:
  DistributedDataParallel(std::shared_ptr<Module> module, std::shared_ptr<ProcessGroup> group, DDPOptions options = {});
  ~DistributedDataParallel() override;
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  Tensor forward(const Tensor& x) override;
  Module& module() { return *module_; }
  ProcessGroup& group() { return *group_; }

  // Finishes the step's gradient averaging: starts the buckets backward did not start (parameters
  // no gradient reached count as zeros), waits for all, writes the averages into grad(). Call it
  // after backward() and before clipping or the optimizer step. Throws the Communicator's error
  // (COMM_TIMEOUT, COMM_RANK_FAILED ...) when a collective fails.
  void synchronize_gradients();
  // Off: backward() starts nothing and gradients accumulate locally (several backward passes per
  // step); call synchronize_gradients() after the last one as usual.
  void set_overlap(bool on) { overlap_enabled_ = on; }

  const DDPStats& stats() const;
  // The parameters of each bucket, in launch order (torch's rule: reverse registration order).
  std::vector<std::vector<std::string>> bucket_parameter_names() const;

  struct State;  // src/frontend/parallel/distributed_data_parallel.cc

 private:
  std::shared_ptr<Module> module_;
  std::shared_ptr<ProcessGroup> group_;
  std::shared_ptr<State> state_;
  bool overlap_enabled_ = true;
};

struct SamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;  // the same on every rank; the permutation of epoch e uses seed + e
  // true: drop the tail that does not divide evenly; false: pad with the first indices again
  // (torch.utils.data.DistributedSampler's two modes).
  bool drop_last = false;
};

// torch.utils.data.DistributedSampler's contract on indices 0..dataset_size-1: every rank draws the
// same permutation (seeded; not torch's generator), pads or drops it to a multiple of num_replicas,
// and takes every num_replicas-th index from its rank on; so the ranks' shards do not overlap
// (except padded repeats) and rank r's k-th batch of b rows together with the other ranks' k-th
// batches is exactly rows [k*b*N, (k+1)*b*N) of the permutation: the same global batch a single
// process with num_replicas = 1 draws.
class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, SamplerOptions options = {});
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  // This rank's indices for the current epoch (num_samples() of them).
  std::vector<int64_t> indices() const;
  int64_t num_samples() const { return num_samples_; }
  int64_t total_size() const { return num_samples_ * num_replicas_; }

 private:
  int64_t dataset_size_;
  int num_replicas_, rank_;
  SamplerOptions opt_;
  uint64_t epoch_ = 0;
  int64_t num_samples_;
};

// nn::index_rows(x, indices) (gearbox/nn_data.hpp) makes a sampler's indices a batch of x.

// ---- tensor parallelism ------------------------------------------------------------------
// Megatron-LM's layers: every rank of `group` sees the same input and holds a slice of each
// weight. A column-parallel Linear splits the output features, a row-parallel one the input
// features; a column layer followed by a row layer (an MLP block) needs one allreduce in the
// forward pass (after the row layer) and one in the backward pass (before the column layer).
// Each layer draws its full weight as nn::Linear would, from the same generator state on every
// rank (call manual_seed alike), and keeps its slice: so a tensor-parallel network starts from
// exactly the weights of its one-process twin.
//
//   auto pg = nn::ProcessGroup::from_environment();
//   nn::Sequential mlp({std::make_shared<nn::ColumnParallelLinear>(1024, 4096, pg),
//                       std::make_shared<nn::ReLU>(),
//                       std::make_shared<nn::RowParallelLinear>(4096, 1024, pg)});

// The region functions the layers are built from (usable for layers of one's own):
// forward identity, backward allreduce-sum of the gradient over the group (Megatron's f).
Tensor copy_to_tensor_parallel_region(const Tensor& x, const std::shared_ptr<ProcessGroup>& group);
// forward allreduce-sum over the group, backward identity (Megatron's g).
Tensor reduce_from_tensor_parallel_region(const Tensor& x, const std::shared_ptr<ProcessGroup>& group);
// forward: the ranks' tensors concatenated on the last axis in rank order; backward: this rank's
// slice of the gradient.
Tensor gather_from_tensor_parallel_region(const Tensor& x, const std::shared_ptr<ProcessGroup>& group);
// forward: this rank's equal slice of the last axis; backward: the slices' gradients gathered.
Tensor scatter_to_tensor_parallel_region(const Tensor& x, const std::shared_ptr<ProcessGroup>& group);

// Sequence parallelism (Megatron-SP): between tensor-parallel blocks, activations are split
// on the sequence axis (axis 1 of [batch, seq, features]) instead of replicated, so the
// LayerNorms, dropouts and residual adds there work on 1/N of the tokens and their activation
// memory falls by N. A sequence-parallel column layer gathers the sequence where a plain one
// copies its input; a sequence-parallel row layer reduce-scatters where a plain one allreduces:
// the same bytes, so SP costs no extra communication.
// forward: this rank's slice of axis 1; backward: the slices' gradients gathered.
Tensor scatter_to_sequence_parallel_region(const Tensor& x, const std::shared_ptr<ProcessGroup>& group);
// forward: the ranks' slices concatenated on axis 1. backward, when the consumer is tensor-
// parallel (each rank computes a different part from the whole sequence, as a column layer
// does): the gradient summed over the ranks, this rank's slice kept (a reduce_scatter); when
// the consumer is replicated (every rank computes the same thing, e.g. a pooled head at the
// end): this rank's slice of the gradient, no collective. (Megatron's
// tensor_parallel_output_grad.)
Tensor gather_from_sequence_parallel_region(const Tensor& x, const std::shared_ptr<ProcessGroup>& group,
                                            bool consumer_is_tensor_parallel = true);
// forward: x summed over the ranks, this rank's slice of axis 1 kept (a reduce_scatter);
// backward: the slices' gradients gathered.
Tensor reduce_scatter_to_sequence_parallel_region(const Tensor& x, const std::shared_ptr<ProcessGroup>& group);
// After backward() and before the optimizer step: sums over the group the gradients of the
// parameters used inside sequence-parallel regions (LayerNorm weights and biases there, and a
// sequence-parallel RowParallelLinear's bias), since each rank's gradient covers its own tokens
// only. A collective.
void allreduce_sequence_parallel_gradients(const std::vector<Tensor>& params,
                                           const std::shared_ptr<ProcessGroup>& group);

struct ColumnParallelLinearOptions {
  bool bias = true;
  bool gather_output = false;      // true: every rank gets the full output (an allgather)
  bool sequence_parallel = false;  // the input is this rank's slice of the sequence (axis 1)
};
// y = x W^T + b with W's rows (output features) split over the ranks: rank r holds rows
// [r out/N, (r+1) out/N) of weight and bias, and outputs those features unless gather_output.
// out_features must be divisible by the group size (else INVALID_ARGUMENT).
class ColumnParallelLinear : public Module {
 public:
  ColumnParallelLinear(int64_t in_features, int64_t out_features, std::shared_ptr<ProcessGroup> group,
                       ColumnParallelLinearOptions options = {});
  Tensor forward(const Tensor& x) override;
  const Tensor& weight() const { return weight_; }  // [out/N, in]
  const Tensor& bias() const { return bias_; }      // [out/N]

 private:
  std::shared_ptr<ProcessGroup> group_;
  ColumnParallelLinearOptions opt_;
  Tensor weight_, bias_;
};

struct RowParallelLinearOptions {
  bool bias = true;
  bool input_is_parallel = true;  // the input is already this rank's slice (a column layer's output)
  // The output is summed and split on the sequence (axis 1) instead of summed whole; the bias,
  // then added to this rank's tokens only, belongs in allreduce_sequence_parallel_gradients.
  bool sequence_parallel = false;
};
// y = x W^T + b with W's columns (input features) split: rank r holds columns
// [r in/N, (r+1) in/N) of weight; the partial products are summed over the ranks (an
// allreduce) and the bias, whole on every rank, is added after. in_features must be divisible
// by the group size.
class RowParallelLinear : public Module {
 public:
  RowParallelLinear(int64_t in_features, int64_t out_features, std::shared_ptr<ProcessGroup> group,
                    RowParallelLinearOptions options = {});
  Tensor forward(const Tensor& x) override;
  const Tensor& weight() const { return weight_; }  // [out, in/N]
  const Tensor& bias() const { return bias_; }      // [out], replicated

 private:
  std::shared_ptr<ProcessGroup> group_;
  RowParallelLinearOptions opt_;
  Tensor weight_, bias_;
};

// Megatron's parallel attention: the heads split over the ranks (num_heads divisible by the
// group size). Rank r holds heads [r H/N, (r+1) H/N): their rows of the stacked q, k and v
// projections (column-parallel) and their columns of out_proj (a RowParallelLinear whose bias
// is whole). One allreduce in the forward pass (after out_proj) and one in the backward pass
// (of the input's gradient). Parameter names, initialization and arithmetic are
// MultiheadAttention's, so a network made after manual_seed(s) on every rank starts from its
// one-process twin's weights. The head-averaged attention weights are not returned.
class ParallelMultiheadAttention : public Module {
 public:
  // sequence_parallel: inputs and output are this rank's slice of the sequence (gathered
  // before the projections, reduce-scattered after out_proj, whose bias then belongs in
  // allreduce_sequence_parallel_gradients).
  ParallelMultiheadAttention(int64_t embed_dim, int64_t num_heads, std::shared_ptr<ProcessGroup> group,
                             MultiheadAttentionOptions options = {}, bool sequence_parallel = false);
  Tensor attend(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask = Tensor());
  Tensor forward(const Tensor& x) override { return attend(x, x, x); }  // self-attention

 private:
  std::shared_ptr<ProcessGroup> group_;
  int64_t embed_dim_, local_heads_;
  MultiheadAttentionOptions opt_;
  bool sequence_parallel_;
  Tensor in_proj_weight_, in_proj_bias_;
  std::shared_ptr<RowParallelLinear> out_proj_;
};

// Megatron's vocabulary-parallel embedding: rank r holds rows [r V/N, (r+1) V/N) of the table
// (V divisible by the group size), looks up the ids that fall there (zeros for the others)
// and the ranks' lookups are summed (an allreduce). Drawn as nn::Embedding draws its table.
class VocabParallelEmbedding : public Module {
 public:
  VocabParallelEmbedding(int64_t num_embeddings, int64_t embedding_dim, std::shared_ptr<ProcessGroup> group);
  Tensor forward(const Tensor& ids) override;       // int64 ids in [0, V) of any shape
  const Tensor& weight() const { return weight_; }  // [V/N, dim]

 private:
  std::shared_ptr<ProcessGroup> group_;
  int64_t num_embeddings_, first_ = 0;
  Tensor weight_;
};

// The mean cross-entropy of logits split over the group on the class axis (rank r holds classes
// [r C/N, (r+1) C/N) of [rows, C], as a ColumnParallelLinear without gather_output makes them)
// against int64 targets [rows] in [0, C), the same on every rank: torch's F.cross_entropy
// without gathering the logits (three allreduces of one value per row: the max, the sum of
// exponentials, the target's logit). Returns the loss on every rank; its backward gives each
// rank the gradient of its own logits.
Tensor vocab_parallel_cross_entropy(const Tensor& local_logits, const Tensor& targets,
                                    const std::shared_ptr<ProcessGroup>& group);

// ---- pipeline parallelism ----------------------------------------------------------------
// A network cut into stages, one per rank of `group` (rank k runs stage k): each training step
// splits the global batch into micro-batches, sends each micro-batch's activations forward
// (rank k -> k+1) and their gradients backward with send/recv, and accumulates the parameters'
// gradients over the micro-batches, so that after train_step() each stage holds the gradient of
// the global batch's mean loss for its own parameters and a local optimizer step trains exactly
// what a single process would (up to float reassociation).
//
//   auto stage = std::make_shared<nn::Sequential>(my_layers);        // this rank's part
//   nn::PipelineParallel pipe(stage, pg, {.micro_batches = 8});
//   nn::SGD opt(stage->parameters(), {.lr = 0.1});
//   opt.zero_grad();
//   auto ce = [](const nn::Tensor& out, const nn::Tensor& t) { return nn::cross_entropy(out, t); };
//   double loss = pipe.train_step(x, y, ce);  // x read by stage 0, y by the last
//   opt.step();
enum class PipelineSchedule {
  GPipe,     // every micro-batch's forward, then every backward (all activations kept)
  OneFOneB,  // after a warm-up, one forward and one backward in turn (stage k keeps <= size-k)
};

struct PipelineOptions {
  int64_t micro_batches = 4;  // must divide the batch
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
};

struct PipelineStats {
  uint64_t steps = 0;
  double last_step_s = 0;  // wall time of the last train_step on this rank
  double last_busy_s = 0;  // of which this stage computed (forward + backward)
  // 1 - busy / wall of the last step on this rank: the measured bubble (plus communication).
  double last_idle_fraction = 0;
  // (size - 1) / (micro_batches + size - 1): the schedule's ideal bubble.
  double ideal_bubble = 0;
  int64_t max_in_flight = 0;  // the most micro-batches whose activations this stage held at once
};

using LossFunction = std::function<Tensor(const Tensor& output, const Tensor& target)>;

class PipelineParallel {
 public:
  PipelineParallel(std::shared_ptr<Module> stage, std::shared_ptr<ProcessGroup> group, PipelineOptions options = {});
  // One step's forward and backward over a batch (rows on axis 0): the first stage reads `input`,
  // the last reads `target` and applies `loss` (a mean over the micro-batch's rows); other ranks'
  // arguments are ignored (pass undefined tensors). Gradients are added to the stage's
  // parameters' grad() (zero them before, as usual). Returns the batch's mean loss on every rank.
  // A collective: all ranks call it together. Throws nn::Error (INVALID_ARGUMENT for a batch the
  // micro-batches do not divide; the communicator's codes when a rank fails).
  double train_step(const Tensor& input, const Tensor& target, const LossFunction& loss);
  const PipelineStats& stats() const { return stats_; }
  Module& stage() { return *stage_; }

 private:
  std::shared_ptr<Module> stage_;
  std::shared_ptr<ProcessGroup> group_;
  PipelineOptions opt_;
  PipelineStats stats_;
};

// Data parallelism for what DistributedDataParallel cannot wrap, such as a pipeline stage (whose
// forward PipelineParallel runs per micro-batch): after backward (or train_step) and before the
// optimizer step, averages each parameter's gradient over `group` (zeros for a gradient a rank
// did not get), in buckets of at most bucket_bytes. With a pipeline per data-parallel replica and
// `group` the ranks holding the same stage, every replica then steps with the gradient of the
// whole global batch. A collective: every rank of `group` calls it with the same parameters.
void average_gradients(const std::vector<Tensor>& params, const std::shared_ptr<ProcessGroup>& group,
                       size_t bucket_bytes = size_t{25} << 20);

// ---- applying a parallel layout (gearbox plan's choice) ----------------------------------
// `gearbox plan --json` chooses a layout (docs/parallel.md): dp x tp x pp degrees, micro-batches,
// schedule, the units (embedding, blocks, head) each pipeline stage holds, and the units run whole
// on every tensor-parallel rank. ParallelMesh makes the process groups of that layout over a job
// and tells each rank its part; the network is then built unit by unit with the group each unit
// splits over:
//
//   nn::ParallelMesh mesh(nn::ProcessGroup::from_environment(), nn::parse_parallel_layout(text));
//   for (int u = mesh.first_unit(); u < mesh.first_unit() + mesh.unit_count(); ++u)
//     stage->push_back(make_unit(u, mesh.tensor_group_for(u)));  // plain layers for nullptr
//   nn::PipelineParallel pipe(stage, mesh.pipeline_group(), mesh.pipeline_options());
//   ... pipe.train_step(...); nn::average_gradients(stage->parameters(), mesh.data_group()); opt.step();
//
// bench/parallel_layouts trains a GPT this way in every layout of 4 ranks (its losses agree).
struct ParallelLayout {
  int dp = 1, tp = 1, pp = 1;
  int64_t micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  std::vector<int> stage_units;       // units per stage, pp entries ({all units} for pp = 1)
  std::vector<int> replicated_units;  // units every tensor-parallel rank runs whole, ascending
  int zero = 0;                       // the ZeRO stage the plan assumed (ZeroRedundancyOptimizer)
  bool runs_whole(int unit) const;
  int devices() const { return dp * tp * pp; }
};

// From gearbox plan's JSON: the whole document (its "chosen" layout), a candidate ({"layout":
// ...}) or a layout object. Throws nn::Error PLAN_SPEC_INVALID naming a missing or bad key.
ParallelLayout parse_parallel_layout(const std::string& json_text);

// The groups of a layout over a job's ranks, numbered tensor-parallel fastest, then data-parallel,
// then pipeline (the planner's and Megatron-LM's order). A collective: every rank of `world`
// constructs it with the same layout. INVALID_ARGUMENT when the degrees do not multiply to the
// world's size or the stage cut does not have pp stages.
class ParallelMesh {
 public:
  ParallelMesh(std::shared_ptr<ProcessGroup> world, ParallelLayout layout);
  const ParallelLayout& layout() const { return layout_; }
  // This rank's groups; nullptr where the degree is 1.
  const std::shared_ptr<ProcessGroup>& tensor_group() const { return tensor_; }
  const std::shared_ptr<ProcessGroup>& data_group() const { return data_; }
  const std::shared_ptr<ProcessGroup>& pipeline_group() const { return pipeline_; }
  int tensor_rank() const { return tensor_rank_; }
  int data_rank() const { return data_rank_; }
  int stage() const { return stage_; }
  // The units this rank's stage holds: [first_unit(), first_unit() + unit_count()).
  int first_unit() const { return first_unit_; }
  int unit_count() const { return unit_count_; }
  // The group a unit's layers split over: nullptr when tp = 1 or the layout runs the unit whole
  // (build the plain layers then).
  std::shared_ptr<ProcessGroup> tensor_group_for(int unit) const;
  PipelineOptions pipeline_options() const;

 private:
  std::shared_ptr<ProcessGroup> world_, tensor_, data_, pipeline_;
  ParallelLayout layout_;
  int tensor_rank_ = 0, data_rank_ = 0, stage_ = 0, first_unit_ = 0, unit_count_ = 0;
};

// ---- sharded optimizer (ZeRO stages 1 and 2) ---------------------------------------------
// ZeroRedundancyOptimizer wraps an optimizer (any of nn.hpp's, built by `make_optimizer` over the
// parameters it is given) so that each rank of `group` keeps the optimizer state (momentum,
// Adam's moments) of only its share of the parameters: per-rank state falls as 1/N.
//
// Stage 1 (torch.distributed.optim.ZeroRedundancyOptimizer): each parameter has one owner rank
// (greedy by size, the same on every rank); gradients are averaged by DistributedDataParallel as
// usual, each rank steps the parameters it owns, then every owner broadcasts its updated
// parameters so the replicas stay identical.
//
//   auto ddp = std::make_shared<nn::DistributedDataParallel>(net, pg);
//   nn::ZeroRedundancyOptimizer opt(ddp->parameters(), pg,
//       [](std::vector<nn::Tensor> p) { return std::make_unique<nn::AdamW>(p, nn::AdamOptions{}); });
//   opt.zero_grad(); loss.backward(); ddp->synchronize_gradients(); opt.step();
//
// Stage 2 (DeepSpeed's): the gradients are sharded too. step() reduce-scatters the ranks' local
// gradients over a flat, padded partition, so that each rank receives (and keeps) the averaged
// gradient of its contiguous slice only, steps that slice, and allgathers the updated
// parameters. The module is NOT wrapped in DistributedDataParallel (that would allreduce the full
// gradient first); step() averages the gradients itself:
//
//   nn::ZeroRedundancyOptimizer opt(net->parameters(), pg, make_adamw, {.stage = 2});
//   opt.zero_grad(); loss.backward(); opt.step();
//
// Construction checks that all ranks pass the same parameter list (DDP_MODEL_MISMATCH otherwise)
// and gives every rank rank 0's values. step() is a collective: all ranks call it together.
using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor> params)>;

struct ZeroOptions {
  int stage = 1;  // 1: optimizer state sharded; 2: optimizer state and gradients
};

struct ZeroStats {
  int stage = 1;
  int64_t total_elements = 0;        // all parameters' elements
  size_t owned_parameters = 0;       // parameters this rank steps: whole (stage 1) or a slice (stage 2)
  int64_t owned_elements = 0;        // their elements on this rank
  size_t optimizer_state_bytes = 0;  // the local optimizer's state_bytes(), after the last step
  // Gradient bytes this rank holds after step(): every parameter's (stage 1: DDP's averaged ones)
  // or only its slice's (stage 2: the full local gradients are released once reduce-scattered).
  size_t gradient_bytes = 0;
  // Bytes this rank hands to the collectives of one step(): stage 1 the broadcasts of the updated
  // parameters (DDP's gradient allreduce is in DDPStats); stage 2 the reduce_scatter's input
  // plus the allgather's output (both the padded flat size). A ring sends (N-1)/N of each.
  size_t bytes_communicated_per_step = 0;
  uint64_t steps = 0;
};

class ZeroRedundancyOptimizer : public Optimizer {
 public:
  ZeroRedundancyOptimizer(std::vector<Tensor> params, std::shared_ptr<ProcessGroup> group,
                          const OptimizerFactory& make_optimizer, ZeroOptions options = {});
  ~ZeroRedundancyOptimizer() override;
  ZeroRedundancyOptimizer(const ZeroRedundancyOptimizer&) = delete;
  ZeroRedundancyOptimizer& operator=(const ZeroRedundancyOptimizer&) = delete;

  // Steps this rank's shard and gives every rank the updated parameters (stage 2: averages the
  // gradients first). Throws INVALID_ARGUMENT when no parameter has a gradient on this rank
  // (step() before backward()), and the communicator's codes when a collective fails.
  void step() override;
  double lr() const override;
  void set_lr(double lr) override;      // applies to the local optimizer (schedulers work as usual)
  size_t state_bytes() const override;  // this rank's share
  std::string kind() const override { return "ZeroRedundancyOptimizer"; }
  // Not supported: the state is sharded over the ranks and is not consolidated onto one
  // (torch's consolidate_state_dict), so there is no full state to write. Both throw
  // INVALID_ARGUMENT; checkpoint a ZeRO run's module alone, or train with a replicated optimizer.
  std::map<std::string, Tensor> state_dict() const override;
  void load_state_dict(const std::map<std::string, Tensor>& state) override;

  // Stage 1: the rank that owns parameter k (index into params()). Stage 2 splits parameters
  // across ranks: the rank that owns element 0 of parameter k.
  int owner(size_t k) const;
  // The optimizer over this rank's shard: stage 1 the owned parameters themselves, stage 2 one
  // 1-d tensor per owned slice.
  Optimizer& local_optimizer();
  const ZeroStats& stats() const;

  struct State;  // src/frontend/parallel/zero_optimizer.cc

 private:
  std::shared_ptr<ProcessGroup> group_;
  std::shared_ptr<State> state_;
};

}  // namespace gbx::nn
