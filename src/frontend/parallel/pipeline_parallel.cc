// nn::PipelineParallel: one stage of a pipelined network per rank. A step plays the schedule's
// ops in order (the same order comm/plan's simulate_pipeline costs): a forward receives the
// micro-batch's activation from the previous rank (a leaf that requires a gradient), runs the
// stage and sends its output on; a backward receives the gradient of that output from the next
// rank, runs backward() through the stage (adding to the parameters' grad()) and sends the
// input's gradient back. Sends are asynchronous and waited at the end of the step, so no rank
// blocks on a peer that is itself sending: both schedules are deadlock-free.
//
// Tags per micro-batch j: 3j the activation's header (dtype, rank, dims), 3j+1 the activation,
// 3j+2 its gradient (whose shape the sender of the activation already knows).
#include <chrono>
#include <cstring>
#include <deque>

#include "comm/communicator.h"
#include "frontend/tensor_impl.h"
#include "gearbox/nn_distributed.hpp"

namespace gbx::nn {

namespace gc = gearbox::comm;
using gearbox::ErrorCode;

namespace {

constexpr int kMaxRank = 8;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Each stage's ops in schedule order: j >= 0 is micro-batch j's forward, -(j+1) its backward.
std::vector<int64_t> schedule_order(PipelineSchedule s, int stage, int stages, int64_t m) {
  std::vector<int64_t> o;
  if (s == PipelineSchedule::GPipe) {
    for (int64_t j = 0; j < m; ++j) o.push_back(j);
    for (int64_t j = 0; j < m; ++j) o.push_back(-(j + 1));
    return o;
  }
  const int64_t warm = std::min<int64_t>(stages - stage - 1, m);
  for (int64_t j = 0; j < warm; ++j) o.push_back(j);
  for (int64_t j = 0; j + warm < m; ++j) {
    o.push_back(j + warm);
    o.push_back(-(j + 1));
  }
  for (int64_t j = m - warm; j < m; ++j) o.push_back(-(j + 1));
  return o;
}

}  // namespace

PipelineParallel::PipelineParallel(std::shared_ptr<Module> stage, std::shared_ptr<ProcessGroup> group,
                                   PipelineOptions options)
    : stage_(std::move(stage)), group_(std::move(group)), opt_(options) {
  if (!stage_ || !group_)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "PipelineParallel needs a stage and a group"));
  if (opt_.micro_batches < 1)
    throw_status(
        gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "micro_batches must be >= 1, not ", opt_.micro_batches));
  const double p = group_->size(), m = double(opt_.micro_batches);
  stats_.ideal_bubble = (p - 1) / (m + p - 1);
}

double PipelineParallel::train_step(const Tensor& input, const Tensor& target, const LossFunction& loss) {
  gc::Communicator& comm = group_->communicator();
  const int k = group_->rank(), p = group_->size();
  const bool first = k == 0, last = k == p - 1;
  const int64_t m = opt_.micro_batches;
  const auto t_step = std::chrono::steady_clock::now();

  // Every rank learns whether the batch splits before any send, so a bad batch on one rank
  // fails all of them at once instead of leaving the others waiting on a receive.
  std::string why;
  if (first && (!input.defined() || input.rank() < 1 || input.dim(0) % m != 0))
    why = "the first stage's input must have rows (axis 0) divisible by the " + std::to_string(m) + " micro-batches";
  if (last && (!target.defined() || target.rank() < 1 || target.dim(0) % m != 0))
    why = "the last stage's target must have rows (axis 0) divisible by the " + std::to_string(m) + " micro-batches";
  if (group_->sum(why.empty() ? 0 : 1) > 0)
    throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "pipeline step refused",
                                     why.empty() ? " on another rank" : ": " + why));

  std::vector<Tensor> inputs(static_cast<size_t>(m)), outputs(static_cast<size_t>(m));
  std::vector<double> losses(size_t(m), 0.0);
  std::deque<gearbox::Tensor> keep;  // buffers of sends in flight
  std::vector<gc::WorkPtr> sends;
  int64_t held = 0;
  double busy = 0;
  for (int64_t op : schedule_order(opt_.schedule, k, p, m)) {
    if (op >= 0) {
      const int64_t j = op;
      Tensor in;
      if (first) {
        const int64_t rows = input.dim(0) / m;
        in = slice(input, 0, j * rows, (j + 1) * rows);
      } else {
        gearbox::Tensor header(gearbox::DType::I64, {2 + kMaxRank});
        throw_if_error(comm.recv(header, k - 1, uint32_t(3 * j)));
        const int64_t* h = header.data<int64_t>();
        gearbox::Dims dims(h + 2, h + 2 + h[1]);
        gearbox::Tensor act(static_cast<gearbox::DType>(h[0]), dims);
        throw_if_error(comm.recv(act, k - 1, uint32_t(3 * j + 1)));
        in = wrap(std::move(act), /*requires_grad=*/true);
      }
      auto t0 = std::chrono::steady_clock::now();
      Tensor out = (*stage_)(in);
      if (last) {
        out = loss(out, slice(target, 0, j * (target.dim(0) / m), (j + 1) * (target.dim(0) / m)));
        losses[size_t(j)] = out.item();
      }
      busy += seconds_since(t0);
      if (!last) {
        const gearbox::Tensor& v = value_of(out, "a stage's output");
        if (v.rank() > size_t(kMaxRank))
          throw_status(gearbox::make_error(ErrorCode::INVALID_ARGUMENT, "a stage's output has rank ", v.rank(),
                                           "; pipelines pass activations of rank <= ", kMaxRank));
        gearbox::Tensor& header = keep.emplace_back(gearbox::DType::I64, gearbox::Dims{2 + kMaxRank});
        int64_t* h = header.data<int64_t>();
        std::memset(h, 0, sizeof(int64_t) * (2 + kMaxRank));
        h[0] = static_cast<int64_t>(v.dtype());
        h[1] = int64_t(v.rank());
        for (size_t d = 0; d < v.rank(); ++d) h[2 + d] = v.dims()[d];
        sends.push_back(comm.send_async(header, k + 1, uint32_t(3 * j)));
        sends.push_back(comm.send_async(keep.emplace_back(v), k + 1, uint32_t(3 * j + 1)));
      }
      inputs[size_t(j)] = in;
      outputs[size_t(j)] = out;
      stats_.max_in_flight = std::max(stats_.max_in_flight, ++held);
    } else {
      const int64_t j = -op - 1;
      auto t0 = std::chrono::steady_clock::now();
      if (last) {
        (outputs[size_t(j)] * (1.0 / double(m))).backward();
        busy += seconds_since(t0);
      } else {
        const gearbox::Tensor& v = value_of(outputs[size_t(j)], "a stage's output");
        gearbox::Tensor g(v.dtype(), v.dims());
        throw_if_error(comm.recv(g, k + 1, uint32_t(3 * j + 2)));
        t0 = std::chrono::steady_clock::now();
        outputs[size_t(j)].backward(wrap(std::move(g)));
        busy += seconds_since(t0);
      }
      if (!first) {
        Tensor g = inputs[size_t(j)].grad();
        gearbox::Tensor& buf = g.defined() ? keep.emplace_back(value_of(g, "an input's gradient"))
                                           : keep.emplace_back(value_of(inputs[size_t(j)], "an input").dtype(),
                                                               value_of(inputs[size_t(j)], "an input").dims());
        if (!g.defined()) std::memset(buf.mutable_raw(), 0, buf.nbytes());  // the stage ignores its input
        sends.push_back(comm.send_async(buf, k - 1, uint32_t(3 * j + 2)));
      }
      inputs[size_t(j)] = Tensor();
      outputs[size_t(j)] = Tensor();
      --held;
    }
  }
  for (auto& w : sends) throw_if_error(w->wait());

  // The batch's mean loss (equal micro-batches: the mean of their means), from the last rank.
  // Collectives take no float64: the double travels as the 8 bytes of an int64.
  gearbox::Tensor mean(gearbox::DType::I64, {1});
  double sum = 0, result = 0;
  for (double l : losses) sum += l;
  if (last) result = sum / double(m);
  std::memcpy(mean.data<int64_t>(), &result, sizeof result);
  throw_if_error(comm.broadcast(mean, p - 1));
  std::memcpy(&result, mean.data<int64_t>(), sizeof result);

  ++stats_.steps;
  stats_.last_step_s = seconds_since(t_step);
  stats_.last_busy_s = busy;
  stats_.last_idle_fraction = stats_.last_step_s > 0 ? 1 - busy / stats_.last_step_s : 0;
  return result;
}

}  // namespace gbx::nn
