// nn::ZeroRedundancyOptimizer: optimizer state (stage 1) and gradients (stage 2) sharded over the
// ranks of a process group.
//
// The two stages partition differently, each the way its collective wants:
//  - Stage 1 owns whole parameters (torch's ZeroRedundancyOptimizer): the local optimizer then
//    steps the real parameter tensors with the gradients DDP already averaged, nothing is copied,
//    and any optimizer works unchanged. The updated parameters travel by one broadcast per owner
//    (its parameters packed), so the partition need not be contiguous; greedy by size keeps the
//    ranks' state within one parameter of total/N.
//  - Stage 2 reduce-scatters the gradients, and reduce_scatter hands rank r the r-th of N equal
//    chunks of one buffer. Owning whole parameters would need each owner's group padded to the
//    largest group (on the 4-parameter digits MLP one rank would own 2,048 of 2,410 elements, so
//    on 4 ranks the chunks would be 3.4x the data); a flat partition of all gradients, concatenated in
//    parameter order and padded to a multiple of N, makes the chunks exactly balanced (DeepSpeed's
//    choice). A parameter may then be split between ranks, so the local optimizer steps 1-d copies
//    of the owned slices ("shard tensors"); every optimizer in nn.hpp is elementwise, so stepping
//    slices is stepping the whole parameter. The updated slices come back by one allgather of the
//    same flat layout.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "comm/communicator.h"
#include "frontend/tensor_impl.h"
#include "gearbox/nn_distributed.hpp"

namespace gbx::nn {

namespace gc = gearbox::comm;
using GDType = gearbox::DType;
using gearbox::ErrorCode;

struct ZeroRedundancyOptimizer::State {
  // Stage 2: a slice [offset, offset + length) of parameter `param`, stepped on this rank through
  // `shard` (a 1-d leaf tensor); chunk_offset is where the slice starts in this rank's chunk.
  struct Slice {
    size_t param = 0;
    int64_t offset = 0, length = 0, chunk_offset = 0;
    Tensor shard;
  };
  gc::Communicator* comm = nullptr;
  ZeroOptions opt;
  std::vector<int> owner;            // per parameter (stage 2: the owner of its first element)
  std::vector<int64_t> flat_offset;  // per parameter, in the concatenation of all of them
  int64_t total = 0, chunk = 0;      // stage 2: elements, and the padded chunk per rank
  std::vector<Slice> slices;         // stage 2, this rank's
  std::unique_ptr<Optimizer> local;
  ZeroStats stats;
};

namespace {

// Every rank's parameter list (count, then per parameter its rank and dims) against rank 0's:
// a different list would hang the collectives or silently misalign the shards.
void check_same_parameters(gc::Communicator& comm, const std::vector<Tensor>& params) {
  std::vector<int64_t> sig{static_cast<int64_t>(params.size())};
  for (const Tensor& p : params) {
    sig.push_back(static_cast<int64_t>(p.rank()));
    for (int64_t d : p.shape()) sig.push_back(d);
  }
  gearbox::Tensor len = gearbox::Tensor::from_vector<int64_t>({static_cast<int64_t>(sig.size())}), lens;
  throw_if_error(comm.allgather(len, lens));
  int64_t longest = 0;
  for (int r = 0; r < comm.size(); ++r) longest = std::max(longest, lens.data<int64_t>()[r]);
  sig.resize(static_cast<size_t>(longest), -1);
  gearbox::Tensor mine = gearbox::Tensor::from_vector<int64_t>(sig), all;
  throw_if_error(comm.allgather(mine, all));
  const int64_t* first = all.data<int64_t>();
  for (int r = 1; r < comm.size(); ++r) {
    const int64_t* other = first + static_cast<ptrdiff_t>(r) * longest;
    if (std::memcmp(first, other, static_cast<size_t>(longest) * sizeof(int64_t)) == 0) continue;
    std::string what;
    if (first[0] != other[0]) {
      what = "rank 0 passes " + std::to_string(first[0]) + " parameters, rank " + std::to_string(r) + " passes " +
             std::to_string(other[0]);
    } else {
      int64_t i = 1;
      for (size_t k = 0; k < params.size(); ++k) {
        const int64_t n = 1 + static_cast<int64_t>(params[k].rank());
        if (std::memcmp(first + i, other + i, static_cast<size_t>(n) * sizeof(int64_t)) != 0) {
          what = "parameter " + std::to_string(k) + " differs between rank 0 and rank " + std::to_string(r) +
                 " (this rank has " + params[k].describe() + ")";
          break;
        }
        i += n;
      }
      if (what.empty()) what = "rank " + std::to_string(r) + " differs from rank 0";
    }
    throw_status(gearbox::make_error(ErrorCode::DDP_MODEL_MISMATCH,
                                     "ZeroRedundancyOptimizer: the ranks passed different parameters: ", what,
                                     ". Build the same network on every rank and pass its parameters in the same "
                                     "order"));
  }
}

float* value_data(const Tensor& t) { return t.impl()->value.data<float>(); }

}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<Tensor> params, std::shared_ptr<ProcessGroup> group,
                                                 const OptimizerFactory& make_optimizer, ZeroOptions options)
    : Optimizer(std::move(params)), group_(std::move(group)), state_(std::make_shared<State>()) {
  if (!group_ || !make_optimizer)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT,
                                     "ZeroRedundancyOptimizer: the process group and the optimizer factory must "
                                     "be given"));
  if (options.stage != 1 && options.stage != 2)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "ZeroRedundancyOptimizer: stage ", options.stage,
                                     " is not built; use 1 (optimizer state sharded) or 2 (and gradients)"));
  if (params_.empty())
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "ZeroRedundancyOptimizer: no parameters"));
  State& s = *state_;
  s.comm = &group_->communicator();
  s.opt = options;
  const int n = s.comm->size(), me = s.comm->rank();
  check_same_parameters(*s.comm, params_);

  s.flat_offset.resize(params_.size());
  for (size_t k = 0; k < params_.size(); ++k) {
    s.flat_offset[k] = s.total;
    s.total += params_[k].numel();
  }
  // Every replica starts from rank 0's values (one packed broadcast), as DDP's do.
  {
    gearbox::Tensor flat(GDType::F32, {s.total});
    for (size_t k = 0; k < params_.size(); ++k)
      std::memcpy(flat.data<float>() + s.flat_offset[k], value_data(params_[k]),
                  static_cast<size_t>(params_[k].numel()) * sizeof(float));
    throw_if_error(s.comm->broadcast(flat, 0));
    for (size_t k = 0; k < params_.size(); ++k)
      std::memcpy(value_data(params_[k]), flat.data<float>() + s.flat_offset[k],
                  static_cast<size_t>(params_[k].numel()) * sizeof(float));
  }

  s.owner.assign(params_.size(), 0);
  std::vector<Tensor> mine;
  if (options.stage == 1) {
    // Greedy by size: the largest parameters first, each to the rank holding the fewest elements
    // so far (the lowest rank on ties). Only sizes and indices decide, so every rank computes the
    // same assignment.
    std::vector<size_t> order(params_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return params_[a].numel() > params_[b].numel(); });
    std::vector<int64_t> load(static_cast<size_t>(n), 0);
    for (size_t k : order) {
      const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
      s.owner[k] = r;
      load[static_cast<size_t>(r)] += params_[k].numel();
    }
    for (size_t k = 0; k < params_.size(); ++k)
      if (s.owner[k] == me) {
        mine.push_back(params_[k]);
        s.stats.owned_elements += params_[k].numel();
      }
    s.stats.owned_parameters = mine.size();
    s.stats.bytes_communicated_per_step = static_cast<size_t>(s.total) * sizeof(float);
  } else {
    s.chunk = (s.total + n - 1) / n;
    const int64_t begin = me * s.chunk, end = std::min(s.total, begin + s.chunk);
    for (size_t k = 0; k < params_.size(); ++k) {
      s.owner[k] = static_cast<int>(s.flat_offset[k] / s.chunk);
      const int64_t lo = std::max(begin, s.flat_offset[k]);
      const int64_t hi = std::min(end, s.flat_offset[k] + params_[k].numel());
      if (lo >= hi) continue;
      State::Slice sl;
      sl.param = k;
      sl.offset = lo - s.flat_offset[k];
      sl.length = hi - lo;
      sl.chunk_offset = lo - begin;
      std::vector<float> v(value_data(params_[k]) + sl.offset, value_data(params_[k]) + sl.offset + sl.length);
      sl.shard = Tensor::from_vector(v);
      sl.shard.set_requires_grad();
      mine.push_back(sl.shard);
      s.stats.owned_elements += sl.length;
      s.slices.push_back(std::move(sl));
    }
    s.stats.owned_parameters = s.slices.size();
    s.stats.bytes_communicated_per_step = 2 * static_cast<size_t>(s.chunk * n) * sizeof(float);
  }
  s.stats.stage = options.stage;
  s.stats.total_elements = s.total;
  s.local = make_optimizer(std::move(mine));
  if (!s.local)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT,
                                     "ZeroRedundancyOptimizer: the optimizer factory returned no optimizer"));
}

ZeroRedundancyOptimizer::~ZeroRedundancyOptimizer() = default;

void ZeroRedundancyOptimizer::step() {
  State& s = *state_;
  // Checked before any collective: a step() before backward() is a mistake every rank makes alike,
  // so every rank throws here instead of averaging zeros.
  if (std::none_of(params_.begin(), params_.end(), [](const Tensor& p) { return p.grad().defined(); }))
    throw_status(
        gearbox::make_error(ErrorCode::INVALID_ARGUMENT,
                            "ZeroRedundancyOptimizer: step() found no gradient on any parameter; call "
                            "backward() first",
                            s.opt.stage == 1 ? " (and DistributedDataParallel::synchronize_gradients())" : ""));
  const int n = s.comm->size(), me = s.comm->rank();
  if (s.opt.stage == 1) {
    s.local->step();
    // One broadcast per owner, all in flight at once, each carrying that owner's parameters packed
    // in index order.
    std::vector<gearbox::Tensor> packed(static_cast<size_t>(n));
    std::vector<gc::WorkPtr> work(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      int64_t numel = 0;
      for (size_t k = 0; k < params_.size(); ++k)
        if (s.owner[k] == r) numel += params_[k].numel();
      if (numel == 0) continue;  // a rank that owns nothing (more ranks than parameters)
      gearbox::Tensor& buf = packed[static_cast<size_t>(r)];
      buf = gearbox::Tensor(GDType::F32, {numel});
      if (r == me) {
        int64_t off = 0;
        for (size_t k = 0; k < params_.size(); ++k)
          if (s.owner[k] == r) {
            std::memcpy(buf.data<float>() + off, value_data(params_[k]),
                        static_cast<size_t>(params_[k].numel()) * sizeof(float));
            off += params_[k].numel();
          }
      }
      work[static_cast<size_t>(r)] = s.comm->broadcast_async(buf, r);
    }
    gearbox::Status failed;
    for (int r = 0; r < n; ++r) {
      if (!work[static_cast<size_t>(r)]) continue;
      gearbox::Status st = work[static_cast<size_t>(r)]->wait();
      if (!st.ok()) {
        if (failed.ok()) failed = st;
        continue;
      }
      if (r == me) continue;
      int64_t off = 0;
      for (size_t k = 0; k < params_.size(); ++k)
        if (s.owner[k] == r) {
          std::memcpy(value_data(params_[k]), packed[static_cast<size_t>(r)].data<float>() + off,
                      static_cast<size_t>(params_[k].numel()) * sizeof(float));
          off += params_[k].numel();
        }
    }
    throw_if_error(failed);
  } else {
    // The local gradients, concatenated and zero-padded (a parameter no gradient reached counts as
    // zeros, as under DDP), reduce-scattered: this rank receives the sum of its chunk only.
    gearbox::Tensor flat(GDType::F32, {s.chunk * n});
    std::memset(flat.data<float>(), 0, static_cast<size_t>(s.chunk * n) * sizeof(float));
    for (size_t k = 0; k < params_.size(); ++k) {
      const gearbox::Tensor& g = params_[k].impl()->grad;
      if (g.defined())
        std::memcpy(flat.data<float>() + s.flat_offset[k], g.data<float>(),
                    static_cast<size_t>(params_[k].numel()) * sizeof(float));
    }
    gearbox::Tensor reduced;
    throw_if_error(s.comm->reduce_scatter(flat, reduced, gc::ReduceOp::Sum));
    flat = gearbox::Tensor();
    // The full local gradients are no longer needed: only the slice's average is kept.
    for (Tensor& p : params_) p.zero_grad();
    const float inv = 1.0f / static_cast<float>(n);
    for (auto& sl : s.slices) {
      TensorImpl& shard = *sl.shard.impl();
      // The parameter is the truth (a caller may have loaded new values): refresh the slice's copy.
      std::memcpy(shard.value.data<float>(), value_data(params_[sl.param]) + sl.offset,
                  static_cast<size_t>(sl.length) * sizeof(float));
      if (!shard.grad.defined()) shard.grad = gearbox::Tensor(GDType::F32, {sl.length});
      const float* src = reduced.data<float>() + sl.chunk_offset;
      float* dst = shard.grad.data<float>();
      // Sum / size in fp32, as DDP averages.
      for (int64_t i = 0; i < sl.length; ++i) dst[i] = src[i] * inv;
    }
    s.local->step();
    gearbox::Tensor mine(GDType::F32, {s.chunk}), all;
    std::memset(mine.data<float>(), 0, static_cast<size_t>(s.chunk) * sizeof(float));
    for (auto& sl : s.slices)
      std::memcpy(mine.data<float>() + sl.chunk_offset, value_data(sl.shard),
                  static_cast<size_t>(sl.length) * sizeof(float));
    throw_if_error(s.comm->allgather(mine, all));
    for (size_t k = 0; k < params_.size(); ++k)
      std::memcpy(value_data(params_[k]), all.data<float>() + s.flat_offset[k],
                  static_cast<size_t>(params_[k].numel()) * sizeof(float));
  }
  ++s.stats.steps;
  s.stats.optimizer_state_bytes = s.local->state_bytes();
  // What this rank holds now, measured on the tensors themselves.
  size_t grad_bytes = 0;
  for (const Tensor& p : params_)
    if (p.impl()->grad.defined()) grad_bytes += p.impl()->grad.nbytes();
  for (const auto& sl : s.slices)
    if (sl.shard.impl()->grad.defined()) grad_bytes += sl.shard.impl()->grad.nbytes();
  s.stats.gradient_bytes = grad_bytes;
}

double ZeroRedundancyOptimizer::lr() const { return state_->local->lr(); }
void ZeroRedundancyOptimizer::set_lr(double lr) { state_->local->set_lr(lr); }
size_t ZeroRedundancyOptimizer::state_bytes() const { return state_->local->state_bytes(); }
int ZeroRedundancyOptimizer::owner(size_t k) const { return state_->owner.at(k); }
Optimizer& ZeroRedundancyOptimizer::local_optimizer() { return *state_->local; }
const ZeroStats& ZeroRedundancyOptimizer::stats() const { return state_->stats; }

std::map<std::string, Tensor> ZeroRedundancyOptimizer::state_dict() const {
  throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT,
                                   "ZeroRedundancyOptimizer: its state is sharded over the ranks and cannot be "
                                   "checkpointed (no consolidation onto one rank); save the module alone"));
}

void ZeroRedundancyOptimizer::load_state_dict(const std::map<std::string, Tensor>&) {
  throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT,
                                   "ZeroRedundancyOptimizer: loading optimizer state is not supported (its state is "
                                   "sharded); load the module alone"));
}

}  // namespace gbx::nn
