// nn::DistributedDataParallel: replicas start from rank 0's weights; gradients are averaged over
// the ranks in buckets whose allreduce starts from backward() (post-accumulate-grad hooks on the
// parameters) as soon as every gradient in the bucket is final.
//
// Buckets follow torch's rule: parameters in reverse registration order (the order backward
// finishes them in a feed-forward network), cut at bucket_bytes. Buckets are launched strictly in
// index order — a bucket that fills early waits for the ones before it — because every rank must
// issue its collectives in the same order, whatever order its tape finishes gradients in.
#include <cmath>
#include <cstring>
#include <functional>

#include "base/half.h"
#include "comm/communicator.h"
#include "frontend/autodiff/tape.h"
#include "frontend/tensor_impl.h"
#include "gearbox/nn_distributed.hpp"

namespace gbx::nn {

namespace gc = gearbox::comm;
using GDType = gearbox::DType;
using gearbox::ErrorCode;

struct DistributedDataParallel::State {
  struct Bucket {
    std::vector<size_t> params;  // indices into State::params
    int64_t numel = 0;
    size_t ready = 0;
    gearbox::Tensor flat;   // the gradients on the wire (fp32 or 16-bit)
    gearbox::Tensor exact;  // fp32 twin when measuring the compression error
    gc::WorkPtr work, exact_work;
  };
  gc::Communicator* comm = nullptr;
  DDPOptions opt;
  std::vector<Tensor> params;
  std::vector<std::string> names;
  std::vector<size_t> bucket_of;
  std::vector<bool> ready;
  std::vector<Bucket> buckets;
  size_t next_launch = 0;
  std::vector<std::pair<Tensor, uint64_t>> hooks;
  DDPStats stats;

  GDType wire_dtype() const {
    switch (opt.compression) {
      case GradCompression::BFloat16:
        return GDType::BF16;
      case GradCompression::Float16:
        return GDType::F16;
      case GradCompression::None:
        break;
    }
    return GDType::F32;
  }

  // Packs bucket b's gradients (zeros for a parameter no gradient reached) and starts its
  // allreduce.
  void launch(Bucket& b) {
    const GDType wire = wire_dtype();
    b.flat = gearbox::Tensor(wire, {b.numel});
    const bool measure = opt.measure_compression_error && wire != GDType::F32;
    if (measure) b.exact = gearbox::Tensor(GDType::F32, {b.numel});
    int64_t off = 0;
    for (size_t p : b.params) {
      const gearbox::Tensor& g = params[p].impl()->grad;
      const int64_t n = params[p].numel();
      if (g.defined()) {
        const float* src = g.data<float>();
        if (wire == GDType::F32) {
          std::memcpy(b.flat.data<float>() + off, src, static_cast<size_t>(n) * sizeof(float));
        } else if (wire == GDType::BF16) {
          auto* dst = b.flat.data<uint16_t>() + off;
          for (int64_t i = 0; i < n; ++i) dst[i] = gearbox::BFloat16::from_float(src[i]);
        } else {
          auto* dst = b.flat.data<uint16_t>() + off;
          for (int64_t i = 0; i < n; ++i) dst[i] = gearbox::Half::from_float(src[i]);
        }
        if (measure) std::memcpy(b.exact.data<float>() + off, src, static_cast<size_t>(n) * sizeof(float));
      }
      off += n;
    }
    b.work = comm->allreduce_async(b.flat, gc::ReduceOp::Sum);
    if (measure) b.exact_work = comm->allreduce_async(b.exact, gc::ReduceOp::Sum);
  }

  // Starts the buckets that are full, in order, stopping at the first that is not.
  void launch_ready(bool in_backward) {
    while (next_launch < buckets.size() && buckets[next_launch].ready == buckets[next_launch].params.size()) {
      launch(buckets[next_launch++]);
      if (in_backward) ++stats.buckets_launched_in_backward;
    }
  }

  void on_gradient_final(size_t p) {
    if (ready[p])
      throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "DistributedDataParallel: parameter '", names[p],
                                       "' got a second gradient before synchronize_gradients(): its "
                                       "bucket's allreduce already started. Call "
                                       "synchronize_gradients() after every backward(), or "
                                       "set_overlap(false) while accumulating gradients "
                                       "over several backward passes"));
    ready[p] = true;
    ++buckets[bucket_of[p]].ready;
    launch_ready(true);
  }
};

namespace {

// The float64 parameters and buffers the comm layer has no type for travel as their int64 bit
// patterns (a broadcast moves bytes; it does not add).
gearbox::Status broadcast_tensor(gc::Communicator& comm, gearbox::Tensor& t) {
  if (t.dtype() != GDType::F64) return comm.broadcast(t, 0);
  gearbox::Tensor bits(GDType::I64, t.dims());
  std::memcpy(bits.mutable_raw(), t.raw(), t.nbytes());
  GBX_RETURN_IF_ERROR(comm.broadcast(bits, 0));
  std::memcpy(t.mutable_raw(), bits.raw(), t.nbytes());
  return gearbox::Status();
}

// Every rank's (count, then per tensor dtype and dims) against rank 0's: a different model on some
// rank would otherwise hang the broadcasts or train on misaligned buckets.
void check_same_model(gc::Communicator& comm, const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::vector<int64_t> sig{static_cast<int64_t>(tensors.size())};
  for (const auto& [name, t] : tensors) {
    sig.push_back(static_cast<int64_t>(t.dtype()));
    sig.push_back(static_cast<int64_t>(t.rank()));
    for (int64_t d : t.shape()) sig.push_back(d);
  }
  // Lengths first: the signatures are allgathered, which needs one size on every rank.
  gearbox::Tensor len = gearbox::Tensor::from_vector<int64_t>({static_cast<int64_t>(sig.size())});
  gearbox::Tensor lens;
  throw_if_error(comm.allgather(len, lens));
  int64_t longest = 0;
  for (int r = 0; r < comm.size(); ++r) longest = std::max(longest, lens.data<int64_t>()[r]);
  sig.resize(static_cast<size_t>(longest), -1);
  gearbox::Tensor mine = gearbox::Tensor::from_vector<int64_t>(sig), all;
  throw_if_error(comm.allgather(mine, all));
  const int64_t* first = all.data<int64_t>();
  for (int r = 1; r < comm.size(); ++r) {
    const int64_t* other = first + r * longest;
    if (std::memcmp(first, other, static_cast<size_t>(longest) * sizeof(int64_t)) == 0) continue;
    std::string what;
    if (first[0] != other[0]) {
      what = "rank 0 has " + std::to_string(first[0]) + " parameters and buffers, rank " + std::to_string(r) + " has " +
             std::to_string(other[0]);
    } else {
      // Walk both signatures to the first tensor that differs.
      int64_t i = 1;
      for (const auto& [name, t] : tensors) {
        const int64_t n = 2 + static_cast<int64_t>(t.rank());
        if (std::memcmp(first + i, other + i, static_cast<size_t>(n) * sizeof(int64_t)) != 0) {
          what = "'" + name + "' differs between rank 0 and rank " + std::to_string(r) + " (this rank has " +
                 t.describe() + ")";
          break;
        }
        i += n;
      }
      if (what.empty()) what = "rank " + std::to_string(r) + " differs from rank 0";
    }
    throw_status(gearbox::make_error(ErrorCode::DDP_MODEL_MISMATCH,
                                     "DistributedDataParallel: the ranks built different models: ", what,
                                     ". Build the same network (layers, sizes, order) on every rank"));
  }
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module, std::shared_ptr<ProcessGroup> group,
                                                 DDPOptions options)
    : module_(std::move(module)), group_(std::move(group)), state_(std::make_shared<State>()) {
  if (!module_ || !group_)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT,
                                     "DistributedDataParallel: the module and "
                                     "the process group must be given"));
  if (options.bucket_bytes == 0)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "DistributedDataParallel: bucket_bytes is 0"));
  register_module("module", module_);
  State& s = *state_;
  s.comm = &group_->communicator();
  s.opt = options;
  overlap_enabled_ = options.overlap;

  auto named = module_->named_parameters();
  auto buffers = module_->named_buffers();
  std::vector<std::pair<std::string, Tensor>> all = named;
  all.insert(all.end(), buffers.begin(), buffers.end());
  check_same_model(*s.comm, all);
  for (auto& [name, t] : all) throw_if_error(broadcast_tensor(*s.comm, t.impl()->value));

  for (auto& [name, p] : named) {
    if (!p.requires_grad()) continue;
    if (p.dtype() != DType::Float32)
      throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "DistributedDataParallel: parameter '", name,
                                       "' is ", p.describe(), "; gradients are averaged in float32 only"));
    s.params.push_back(p);
    s.names.push_back(name);
  }
  // Reverse registration order, cut at bucket_bytes (fp32 bytes, before compression).
  s.bucket_of.assign(s.params.size(), 0);
  s.ready.assign(s.params.size(), false);
  size_t bytes = 0;
  for (size_t k = s.params.size(); k-- > 0;) {
    const size_t nb = static_cast<size_t>(s.params[k].numel()) * sizeof(float);
    if (s.buckets.empty() || bytes + nb > s.opt.bucket_bytes) {
      if (s.buckets.empty() || !s.buckets.back().params.empty()) s.buckets.emplace_back();
      bytes = 0;
    }
    s.buckets.back().params.push_back(k);
    s.buckets.back().numel += s.params[k].numel();
    s.bucket_of[k] = s.buckets.size() - 1;
    bytes += nb;
  }
  s.stats.buckets = s.buckets.size();
  for (const auto& b : s.buckets)
    s.stats.bucket_bytes_on_wire += static_cast<size_t>(b.numel) * gearbox::dtype_size(s.wire_dtype());

  // The hooks hold the state weakly: a parameter may outlive this wrapper.
  std::weak_ptr<State> weak = state_;
  for (size_t k = 0; k < s.params.size(); ++k) {
    uint64_t id = add_post_accumulate_grad_hook(s.params[k], [weak, k, this_overlap = &overlap_enabled_]() {
      if (auto st = weak.lock(); st && *this_overlap) st->on_gradient_final(k);
    });
    s.hooks.emplace_back(s.params[k], id);
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  for (auto& [p, id] : state_->hooks) remove_post_accumulate_grad_hook(p, id);
  // Collectives still in flight write into the buckets this state owns: wait for them.
  for (auto& b : state_->buckets) {
    if (b.work) (void)b.work->wait();
    if (b.exact_work) (void)b.exact_work->wait();
  }
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  if (state_->opt.broadcast_buffers)
    for (auto& [name, t] : module_->named_buffers()) throw_if_error(broadcast_tensor(*state_->comm, t.impl()->value));
  return module_->forward(x);
}

void DistributedDataParallel::synchronize_gradients() {
  State& s = *state_;
  // Whatever backward did not start (overlap off, or parameters no gradient reached), in order.
  for (size_t i = s.next_launch; i < s.buckets.size(); ++i) s.launch(s.buckets[i]);
  s.next_launch = s.buckets.size();
  const float inv = 1.0f / static_cast<float>(s.comm->size());
  const GDType wire = s.wire_dtype();
  double err_sq = 0, ref_sq = 0;
  gearbox::Status failed;
  for (auto& b : s.buckets) {
    gearbox::Status st = b.work->wait();
    if (b.exact_work) {
      gearbox::Status st2 = b.exact_work->wait();
      if (st.ok()) st = st2;
    }
    if (!st.ok()) {
      if (failed.ok()) failed = st;
      continue;
    }
    int64_t off = 0;
    for (size_t p : b.params) {
      TensorImpl& impl = *s.params[p].impl();
      const int64_t n = s.params[p].numel();
      if (!impl.grad.defined()) impl.grad = gearbox::Tensor(GDType::F32, impl.value.dims());
      float* dst = impl.grad.data<float>();
      // Sum / size in fp32: the same operation torch's DDP does (it divides before summing; either
      // way each rank gets the identical value, as the allreduce result is).
      if (wire == GDType::F32) {
        const float* src = b.flat.data<float>() + off;
        for (int64_t i = 0; i < n; ++i) dst[i] = src[i] * inv;
      } else {
        const uint16_t* src = b.flat.data<uint16_t>() + off;
        for (int64_t i = 0; i < n; ++i) {
          const float v =
              wire == GDType::BF16 ? gearbox::bits_to_float(uint32_t(src[i]) << 16) : gearbox::Half::to_float(src[i]);
          dst[i] = v * inv;
        }
        if (b.exact.defined()) {
          const float* ref = b.exact.data<float>() + off;
          for (int64_t i = 0; i < n; ++i) {
            const double r = static_cast<double>(ref[i]) * inv;
            err_sq += (dst[i] - r) * (dst[i] - r);
            ref_sq += r * r;
          }
        }
      }
      off += n;
    }
    b.work.reset();
    b.exact_work.reset();
    b.exact = gearbox::Tensor();
    b.ready = 0;
  }
  s.next_launch = 0;
  std::fill(s.ready.begin(), s.ready.end(), false);
  ++s.stats.steps;
  if (ref_sq > 0) {
    s.stats.compression_error = std::sqrt(err_sq / ref_sq);
    s.stats.max_compression_error = std::max(s.stats.max_compression_error, s.stats.compression_error);
  }
  throw_if_error(failed);
}

const DDPStats& DistributedDataParallel::stats() const { return state_->stats; }

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> out;
  for (const auto& b : state_->buckets) {
    out.emplace_back();
    for (size_t p : b.params) out.back().push_back(state_->names[p]);
  }
  return out;
}

void average_gradients(const std::vector<Tensor>& params, const std::shared_ptr<ProcessGroup>& group,
                       size_t bucket_bytes) {
  if (!group) throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "average_gradients needs a process group"));
  std::vector<gearbox::Tensor> grads;
  grads.reserve(params.size());
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    grads.push_back(g.defined() ? value_of(g, "a gradient").clone()
                                : value_of(Tensor::zeros(p.shape(), p.dtype()), "zeros").clone());
  }
  throw_if_error(group->communicator().allreduce_bucketed_async(grads, gc::ReduceOp::Avg, bucket_bytes)->wait());
  for (size_t i = 0; i < params.size(); ++i) params[i].impl()->grad = std::move(grads[i]);
}

}  // namespace gbx::nn
