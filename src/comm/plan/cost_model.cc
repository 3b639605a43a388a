#include "comm/plan/cost_model.h"

#include <algorithm>
#include <deque>
#include <fstream>
#include <limits>
#include <sstream>

namespace gearbox::comm::plan {

namespace {

Status invalid(const std::string& where, const std::string& what) {
  return make_error(ErrorCode::PLAN_SPEC_INVALID, where, ": ", what);
}

// A positive number under `key` of `obj`, scaled; absent keeps *out.
Status positive(const nlohmann::json& obj, const char* key, double scale, const std::string& where, double* out) {
  if (!obj.contains(key)) return Status::OK();
  const auto& v = obj.at(key);
  if (!v.is_number() || !(v.get<double>() > 0) || !(v.get<double>() < 1e30))
    return invalid(where, std::string("\"") + key + "\" must be a number > 0, not " + v.dump());
  *out = v.get<double>() * scale;
  return Status::OK();
}

Status link_from_json(const nlohmann::json& j, const char* key, const std::string& where, Link* link) {
  if (!j.contains(key)) return Status::OK();
  const auto& l = j.at(key);
  if (!l.is_object()) return invalid(where, std::string("\"") + key + "\" must be an object");
  GBX_RETURN_IF_ERROR(positive(l, "bandwidth_gbs", 1e9, where + " " + key, &link->bandwidth));
  GBX_RETURN_IF_ERROR(positive(l, "latency_us", 1e-6, where + " " + key, &link->latency));
  return Status::OK();
}

// The op's forward and backward time on the device's share of its compute: its fixed cost (one
// in the forward pass, two in the backward) plus its FLOPs at the rate measured for that op
// when the links file has one (a profile of this device's kernels), else its roofline with the
// backward twice the forward.
struct OpTime {
  double forward = 0, backward = 0;
};
OpTime op_time(const Op& op, const Hardware& hw) {
  OpTime t;
  if (auto it = hw.op_rates.find(op.name); it != hw.op_rates.end()) {
    t.forward = op.flops / it->second.forward;
    t.backward = op.flops / it->second.backward;
  } else {
    double rate = hw.peak_flops * (op.matmul ? hw.matmul_efficiency : 1.0);
    t.forward = std::max(op.flops / rate, op.bytes / hw.memory_bandwidth);
    t.backward = 2 * t.forward;
  }
  t.forward = (t.forward + hw.op_overhead) / hw.compute_share;
  t.backward = (t.backward + 2 * hw.op_overhead) / hw.compute_share;
  return t;
}

}  // namespace

Result<Hardware> hardware_from_json(const nlohmann::json& j, const std::string& where, Hardware hw) {
  if (!j.is_object()) return invalid(where, "the links file must be a JSON object");
  if (j.contains("devices_per_node")) {
    const auto& v = j["devices_per_node"];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1 << 20)
      return invalid(where, "\"devices_per_node\" must be an integer >= 1, not " + v.dump());
    hw.devices_per_node = v.get<int>();
  }
  GBX_RETURN_IF_ERROR(link_from_json(j, "intra_node", where, &hw.intra_node));
  GBX_RETURN_IF_ERROR(link_from_json(j, "inter_node", where, &hw.inter_node));
  if (j.contains("device")) {
    const auto& d = j["device"];
    if (!d.is_object()) return invalid(where, "\"device\" must be an object");
    GBX_RETURN_IF_ERROR(positive(d, "peak_tflops", 1e12, where + " device", &hw.peak_flops));
    GBX_RETURN_IF_ERROR(positive(d, "memory_bandwidth_gbs", 1e9, where + " device", &hw.memory_bandwidth));
    GBX_RETURN_IF_ERROR(positive(d, "matmul_efficiency", 1, where + " device", &hw.matmul_efficiency));
    GBX_RETURN_IF_ERROR(positive(d, "memory_gb", double(1 << 30), where + " device", &hw.memory_bytes));
    GBX_RETURN_IF_ERROR(positive(d, "compute_share", 1, where + " device", &hw.compute_share));
    if (d.contains("op_overhead_us")) {  // 0 is a fine overhead (the default)
      const auto& v = d["op_overhead_us"];
      if (!v.is_number() || !(v.get<double>() >= 0) || !(v.get<double>() < 1e9))
        return invalid(where, "\"op_overhead_us\" must be a number >= 0, not " + v.dump());
      hw.op_overhead = v.get<double>() * 1e-6;
    }
    if (d.contains("ops")) {
      const auto& ops = d["ops"];
      if (!ops.is_object()) return invalid(where, "\"device\".\"ops\" must be an object of op names");
      for (const auto& [name, r] : ops.items()) {
        if (!r.is_object()) return invalid(where, "\"ops\".\"" + name + "\" must be an object");
        OpRate rate;
        GBX_RETURN_IF_ERROR(positive(r, "forward_gflops", 1e9, where + " ops " + name, &rate.forward));
        GBX_RETURN_IF_ERROR(positive(r, "backward_gflops", 1e9, where + " ops " + name, &rate.backward));
        if (rate.forward <= 0 || rate.backward <= 0)
          return invalid(where, "\"ops\".\"" + name + "\" needs \"forward_gflops\" and \"backward_gflops\"");
        hw.op_rates[name] = rate;
      }
    }
    if (hw.matmul_efficiency > 1) return invalid(where, "\"matmul_efficiency\" must be in (0, 1]");
    if (hw.compute_share > 1) return invalid(where, "\"compute_share\" must be in (0, 1]");
  }
  hw.source = where;
  return hw;
}

Result<Hardware> load_hardware(const std::string& path, Hardware base) {
  std::ifstream in(path);
  if (!in) return make_error(ErrorCode::FILE_NOT_FOUND, "links file '", path, "' cannot be opened");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid(path, "not valid JSON");
  return hardware_from_json(j, path, base);
}

nlohmann::json hardware_to_json(const Hardware& hw) {
  auto link = [](const Link& l) {
    return nlohmann::json{{"bandwidth_gbs", l.bandwidth / 1e9}, {"latency_us", l.latency * 1e6}};
  };
  nlohmann::json ops = nlohmann::json::object();
  for (const auto& [name, r] : hw.op_rates)
    ops[name] = {{"forward_gflops", r.forward / 1e9}, {"backward_gflops", r.backward / 1e9}};
  return {{"devices_per_node", hw.devices_per_node},
          {"intra_node", link(hw.intra_node)},
          {"inter_node", link(hw.inter_node)},
          {"device",
           {{"peak_tflops", hw.peak_flops / 1e12},
            {"memory_bandwidth_gbs", hw.memory_bandwidth / 1e9},
            {"matmul_efficiency", hw.matmul_efficiency},
            {"memory_gb", hw.memory_bytes / double(1 << 30)},
            {"op_overhead_us", hw.op_overhead * 1e6},
            {"compute_share", hw.compute_share},
            {"ops", ops}}},
          {"source", hw.source}};
}

const char* schedule_name(Schedule s) { return s == Schedule::kGPipe ? "gpipe" : "1f1b"; }

double allreduce_s(double bytes, int n, const Link& link) {
  if (n <= 1 || bytes <= 0) return 0;
  return 2.0 * (n - 1) * link.latency + 2.0 * (n - 1) / n * bytes / link.bandwidth;
}

double p2p_s(double bytes, const Link& link) { return link.latency + bytes / link.bandwidth; }

const Link& group_link(const Hardware& hw, int size, int stride) {
  // The group's ranks span size x stride consecutive ranks, aligned to that span in rank order:
  // one node holds them all when the span fits in it.
  return int64_t(size) * stride <= hw.devices_per_node ? hw.intra_node : hw.inter_node;
}

bool Layout::replicated(int unit) const {
  return std::binary_search(replicated_units.begin(), replicated_units.end(), unit);
}

double tied_copy_params(const TransformerSpec& spec, const Layout& l) {
  if (!spec.tied_embeddings) return 0;  // the head's own weight is in its unit's parameters
  const bool whole = l.tp == 1 || l.replicated(int(spec.layers) + 1);
  return double(spec.vocab) * spec.hidden / (whole ? 1 : l.tp);
}

int64_t in_flight(Schedule s, int stage, int pp, int64_t m) {
  return s == Schedule::kGPipe ? m : std::min<int64_t>(m, pp - stage);
}

std::vector<UnitCost> unit_costs(const TransformerSpec& spec, const Hardware& hw, const Layout& l) {
  const int64_t b = spec.global_batch / (int64_t(l.dp) * l.micro_batches);
  const Link& tp_link = group_link(hw, l.tp, 1);
  const double act = double(spec.dtype_bytes) * b * spec.seq * spec.hidden;  // one activation
  const double tp_allreduce = allreduce_s(act, l.tp, tp_link);
  const double tp_token_allreduce = allreduce_s(4.0 * b * spec.seq, l.tp, tp_link);  // fp32 per token
  const std::vector<Unit> split = units(spec, b, l.tp);
  const std::vector<Unit> whole = l.replicated_units.empty() ? std::vector<Unit>{} : units(spec, b, 1);
  std::vector<UnitCost> out;
  for (size_t k = 0; k < split.size(); ++k) {
    // A replicated unit costs on each rank what it costs without tensor parallelism.
    const bool replicated = l.tp > 1 && l.replicated(int(k));
    const Unit& u = replicated ? whole[k] : split[k];
    const int ways = replicated ? 1 : l.tp;
    UnitCost c;
    double fwd = 0, bwd = 0;
    for (const Op& op : u.ops) {
      const OpTime t = op_time(op, hw);
      fwd += t.forward, bwd += t.backward;
    }
    const double comm_f = u.tp_allreduces_forward * tp_allreduce + u.tp_token_allreduces * tp_token_allreduce;
    const double comm_b = u.tp_allreduces_backward * tp_allreduce;
    c.tp_comm_s = comm_f + comm_b;
    c.forward_comm_s = comm_f;
    c.backward_comm_s = comm_b + (l.recompute ? comm_f : 0);
    c.forward_s = fwd + comm_f;
    // Recomputation replays the forward, its allreduces included.
    c.backward_s = bwd + comm_b + (l.recompute ? fwd + comm_f : 0);
    const double params = double(u.params) / ways;
    c.fixed.weights = params * spec.dtype_bytes;
    c.fixed.gradients = params * spec.dtype_bytes / (l.zero >= 2 ? l.dp : 1);
    c.fixed.optimizer = params * spec.optimizer_bytes_per_param() / (l.zero >= 1 ? l.dp : 1);
    c.static_bytes = c.fixed.weights + c.fixed.gradients + c.fixed.optimizer;
    c.activation_bytes = l.recompute ? u.input_bytes : u.activation_bytes;
    c.working_bytes = l.recompute ? u.activation_bytes : 0;
    out.push_back(c);
  }
  return out;
}

namespace {

// Each stage's ops in order: +j is micro-batch j's forward, -(j+1) its backward.
std::vector<std::vector<int64_t>> schedule_orders(int pp, int64_t m, Schedule schedule) {
  std::vector<std::vector<int64_t>> order(static_cast<size_t>(pp));
  for (int i = 0; i < pp; ++i) {
    auto& o = order[size_t(i)];
    o.reserve(size_t(2 * m));
    if (schedule == Schedule::kGPipe) {
      for (int64_t j = 0; j < m; ++j) o.push_back(j);
      for (int64_t j = 0; j < m; ++j) o.push_back(-(j + 1));
    } else {
      const int64_t warm = std::min<int64_t>(pp - i - 1, m);
      for (int64_t j = 0; j < warm; ++j) o.push_back(j);
      for (int64_t j = 0; j + warm < m; ++j) {
        o.push_back(j + warm);
        o.push_back(-(j + 1));
      }
      for (int64_t j = m - warm; j < m; ++j) o.push_back(-(j + 1));
    }
  }
  return order;
}

}  // namespace

double simulate_pipeline(const std::vector<double>& fwd, const std::vector<double>& bwd, double p2p, int64_t m,
                         Schedule schedule) {
  const int pp = int(fwd.size());
  const std::vector<std::vector<int64_t>> order = schedule_orders(pp, m, schedule);
  const double unknown = -1;
  std::vector<std::vector<double>> end_f(pp, std::vector<double>(size_t(m), unknown)),
      end_b(pp, std::vector<double>(size_t(m), unknown));
  std::vector<size_t> next(pp, 0);
  std::vector<double> free_at(pp, 0);
  std::deque<int> work;
  for (int i = 0; i < pp; ++i) work.push_back(i);
  while (!work.empty()) {
    int i = work.front();
    work.pop_front();
    while (next[i] < order[i].size()) {
      int64_t op = order[i][next[i]];
      double ready = 0;
      if (op >= 0) {
        if (i > 0) {
          if (end_f[i - 1][op] == unknown) break;
          ready = end_f[i - 1][op] + p2p;
        }
      } else {
        int64_t j = -op - 1;
        if (i + 1 < pp) {
          if (end_b[i + 1][j] == unknown) break;
          ready = end_b[i + 1][j] + p2p;
        } else {
          ready = end_f[i][j];  // the last stage's own forward (earlier in its order)
        }
      }
      double start = std::max(ready, free_at[i]);
      if (op >= 0) {
        end_f[i][op] = free_at[i] = start + fwd[i];
        if (i + 1 < pp) work.push_back(i + 1);
      } else {
        end_b[i][-op - 1] = free_at[i] = start + bwd[i];
        if (i > 0) work.push_back(i - 1);
      }
      ++next[i];
    }
  }
  double makespan = 0;
  for (int i = 0; i < pp; ++i) {
    if (next[i] != order[i].size()) return std::numeric_limits<double>::infinity();  // cannot happen
    makespan = std::max(makespan, free_at[i]);
  }
  return makespan;
}

double simulate_shared_pipeline(const std::vector<double>& fw, const std::vector<double>& fc,
                                const std::vector<double>& bw, const std::vector<double>& bc, double p2p, int64_t m,
                                Schedule schedule, double share) {
  const int pp = int(fw.size());
  const std::vector<std::vector<int64_t>> order = schedule_orders(pp, m, schedule);
  const double unknown = -1, inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> end_f(size_t(pp), std::vector<double>(size_t(m), unknown)),
      end_b(size_t(pp), std::vector<double>(size_t(m), unknown));
  // Per stage: the op in progress (next[i] indexes order[i]), its remaining work (core-seconds)
  // and, once computed, when its communication ends.
  enum class Phase { kWaiting, kComputing, kCommunicating, kDone };
  std::vector<Phase> phase(size_t(pp), Phase::kWaiting);
  std::vector<size_t> next(size_t(pp), 0);
  std::vector<double> work(size_t(pp), 0), comm_end(size_t(pp), 0);
  double now = 0;
  auto ready_at = [&](int i) {  // when stage i's next op may start; unknown while a dependency runs
    const int64_t op = order[size_t(i)][next[size_t(i)]];
    if (op >= 0) {
      if (i == 0) return 0.0;
      const double e = end_f[size_t(i - 1)][size_t(op)];
      return e == unknown ? unknown : e + p2p;
    }
    const int64_t j = -op - 1;
    if (i + 1 == pp) return end_f[size_t(i)][size_t(j)];
    const double e = end_b[size_t(i + 1)][size_t(j)];
    return e == unknown ? unknown : e + p2p;
  };
  for (;;) {
    // Start what may start now.
    for (int i = 0; i < pp; ++i) {
      if (phase[size_t(i)] != Phase::kWaiting) continue;
      if (next[size_t(i)] == order[size_t(i)].size()) {
        phase[size_t(i)] = Phase::kDone;
        continue;
      }
      const double r = ready_at(i);
      if (r != unknown && r <= now) {
        const int64_t op = order[size_t(i)][next[size_t(i)]];
        phase[size_t(i)] = Phase::kComputing;
        work[size_t(i)] = op >= 0 ? fw[size_t(i)] : bw[size_t(i)];
      }
    }
    int computing = 0;
    bool all_done = true;
    for (int i = 0; i < pp; ++i) {
      computing += phase[size_t(i)] == Phase::kComputing;
      all_done = all_done && phase[size_t(i)] == Phase::kDone;
    }
    if (all_done) break;
    const double rate = computing > 0 ? std::min(1.0, share * pp / computing) : 1.0;
    // The next event: a computation or a communication ends, or a waiting op becomes ready.
    double t = inf;
    for (int i = 0; i < pp; ++i) {
      if (phase[size_t(i)] == Phase::kComputing) t = std::min(t, now + work[size_t(i)] / rate);
      else if (phase[size_t(i)] == Phase::kCommunicating) t = std::min(t, comm_end[size_t(i)]);
      else if (phase[size_t(i)] == Phase::kWaiting) {
        const double r = ready_at(i);
        if (r != unknown) t = std::min(t, std::max(r, now));
      }
    }
    if (t == inf) return inf;  // cannot happen: the schedules are deadlock-free
    for (int i = 0; i < pp; ++i) {
      const size_t k = size_t(i);
      if (phase[k] == Phase::kComputing) {
        work[k] -= (t - now) * rate;
        if (work[k] <= 1e-12 * (1 + t)) {
          const int64_t op = order[k][next[k]];
          phase[k] = Phase::kCommunicating;
          comm_end[k] = t + (op >= 0 ? fc[k] : bc[k]);
        }
      }
    }
    now = t;
    for (int i = 0; i < pp; ++i) {
      const size_t k = size_t(i);
      if (phase[k] == Phase::kCommunicating && comm_end[k] <= now) {
        const int64_t op = order[k][next[k]];
        if (op >= 0) end_f[k][size_t(op)] = now;
        else end_b[k][size_t(-op - 1)] = now;
        ++next[k];
        phase[k] = Phase::kWaiting;
      }
    }
  }
  return now;
}

Result<Estimate> estimate(const TransformerSpec& spec, const Hardware& hw, const Layout& l) {
  const int64_t n_units = spec.layers + 2;
  if (l.dp < 1 || l.tp < 1 || l.pp < 1 || l.micro_batches < 1)
    return make_error(ErrorCode::INVALID_ARGUMENT, "degrees and micro-batches must be >= 1");
  if (spec.global_batch % (int64_t(l.dp) * l.micro_batches) != 0)
    return make_error(ErrorCode::INVALID_ARGUMENT, "global batch ", spec.global_batch, " is not divisible by dp ", l.dp,
                      " x micro-batches ", l.micro_batches);
  if (spec.heads % l.tp != 0 || spec.ffn() % l.tp != 0)
    return make_error(ErrorCode::INVALID_ARGUMENT, "tensor-parallel degree ", l.tp, " does not divide the ", spec.heads,
                      " heads and the MLP's ", spec.ffn());
  int64_t covered = 0;
  for (int u : l.stage_units) {
    if (u < 1) return make_error(ErrorCode::INVALID_ARGUMENT, "a stage holds no unit");
    covered += u;
  }
  if (int(l.stage_units.size()) != l.pp || covered != n_units)
    return make_error(ErrorCode::INVALID_ARGUMENT, "stages must cover the ", n_units, " units in ", l.pp, " stages");
  for (size_t i = 0; i < l.replicated_units.size(); ++i) {
    const int u = l.replicated_units[i];
    if (u < 0 || u >= n_units || (i > 0 && u <= l.replicated_units[i - 1]))
      return make_error(ErrorCode::INVALID_ARGUMENT, "replicated units must be ascending indices below ", n_units);
  }
  if (spec.tied_embeddings && l.replicated(0) != l.replicated(int(n_units) - 1))
    return make_error(ErrorCode::INVALID_ARGUMENT,
                      "with tied embeddings the embedding and the head share a weight: replicate both or neither");

  const std::vector<UnitCost> costs = unit_costs(spec, hw, l);
  Estimate e;
  e.micro_batch = spec.global_batch / (int64_t(l.dp) * l.micro_batches);
  std::vector<double> fwd(size_t(l.pp)), bwd(size_t(l.pp)), fwd_comm(size_t(l.pp)), bwd_comm(size_t(l.pp));
  double params_max = 0;  // parameters per rank on the stage with the most (gradient reduction)
  double best_memory = -1;
  size_t u = 0;
  for (int s = 0; s < l.pp; ++s) {
    Memory mem;
    double params = 0, acts = 0, working = 0, tp_comm = 0;
    for (int k = 0; k < l.stage_units[size_t(s)]; ++k, ++u) {
      const UnitCost& c = costs[u];
      fwd[size_t(s)] += c.forward_s;
      bwd[size_t(s)] += c.backward_s;
      fwd_comm[size_t(s)] += c.forward_comm_s;
      bwd_comm[size_t(s)] += c.backward_comm_s;
      tp_comm += c.tp_comm_s;
      mem.weights += c.fixed.weights;
      mem.gradients += c.fixed.gradients;
      mem.optimizer += c.fixed.optimizer;
      acts += c.activation_bytes;
      working = std::max(working, c.working_bytes);
      params += c.fixed.weights / spec.dtype_bytes;
    }
    if (s == l.pp - 1 && l.pp > 1 && spec.tied_embeddings) {
      // The logits' weight is the embedding's: the last stage keeps a copy (and its gradient
      // and optimizer state), reduced with the first stage's each step.
      const double tied = tied_copy_params(spec, l);
      mem.weights += tied * spec.dtype_bytes;
      mem.gradients += tied * spec.dtype_bytes / (l.zero >= 2 ? l.dp : 1);
      mem.optimizer += tied * spec.optimizer_bytes_per_param() / (l.zero >= 1 ? l.dp : 1);
      params += tied;
    }
    mem.activations = double(in_flight(l.schedule, s, l.pp, l.micro_batches)) * acts + working;
    if (mem.total() > best_memory) {
      best_memory = mem.total();
      e.memory = mem;
      e.busiest_stage = s;
    }
    params_max = std::max(params_max, params);
    e.tp_comm_s = std::max(e.tp_comm_s, tp_comm * double(l.micro_batches));
  }
  const double act = double(spec.dtype_bytes) * e.micro_batch * spec.seq * spec.hidden;
  e.p2p_s = l.pp > 1 ? p2p_s(act, group_link(hw, 2, l.tp * l.dp)) : 0;
  if (hw.compute_share < 1 && l.pp > 1) {
    // Devices sharing cores: a stage computes faster while others wait (the bubble).
    std::vector<double> fw(size_t(l.pp)), bw(size_t(l.pp));
    for (size_t s = 0; s < size_t(l.pp); ++s) {
      fw[s] = (fwd[s] - fwd_comm[s]) * hw.compute_share;
      bw[s] = (bwd[s] - bwd_comm[s]) * hw.compute_share;
    }
    e.pipeline_s =
        simulate_shared_pipeline(fw, fwd_comm, bw, bwd_comm, e.p2p_s, l.micro_batches, l.schedule, hw.compute_share);
  } else {
    e.pipeline_s = simulate_pipeline(fwd, bwd, e.p2p_s, l.micro_batches, l.schedule);
  }
  double busy = 0;
  for (int s = 0; s < l.pp; ++s) busy += double(l.micro_batches) * (fwd[size_t(s)] + bwd[size_t(s)]);
  e.bubble =
      e.pipeline_s > 0 ? std::max(0.0, 1 - busy / (l.pp * e.pipeline_s)) : 0;  // 0, not -1e-16, without a pipeline
  // ZeRO's reduce-scatter + all-gather moves what one allreduce moves.
  e.dp_comm_s = allreduce_s(params_max * spec.dtype_bytes, l.dp, group_link(hw, l.dp, l.tp));
  // Adam reads the gradient and writes the weight (2 x dtype), and reads and writes its
  // optimizer state (2 x optimizer bytes), for the parameters this rank updates.
  const double updated = params_max / (l.zero >= 1 ? l.dp : 1);
  e.optimizer_s = updated * (2.0 * spec.dtype_bytes + 2.0 * spec.optimizer_bytes_per_param()) / hw.memory_bandwidth /
                  hw.compute_share;
  e.step_s = e.pipeline_s + e.dp_comm_s + e.optimizer_s;
  return e;
}

nlohmann::json layout_to_json(const Layout& l) {
  return {{"dp", l.dp},
          {"tp", l.tp},
          {"pp", l.pp},
          {"micro_batches", l.micro_batches},
          {"schedule", schedule_name(l.schedule)},
          {"zero", l.zero},
          {"recompute", l.recompute},
          {"stage_units", l.stage_units},
          {"replicated_units", l.replicated_units}};
}

Result<Layout> layout_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return invalid(where, "a layout must be a JSON object");
  auto count = [&](const char* key, int64_t min, bool required, int64_t* out) -> Status {
    if (!j.contains(key)) return required ? invalid(where, std::string("missing key \"") + key + "\"") : Status::OK();
    const auto& v = j.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > (int64_t{1} << 30))
      return invalid(where,
                     std::string("\"") + key + "\" must be an integer >= " + std::to_string(min) + ", not " + v.dump());
    *out = v.get<int64_t>();
    return Status::OK();
  };
  auto list = [&](const char* key, int min, std::vector<int>* out) -> Status {
    if (!j.contains(key)) return Status::OK();
    const auto& v = j.at(key);
    if (!v.is_array()) return invalid(where, std::string("\"") + key + "\" must be a list of integers");
    for (const auto& x : v) {
      if (!x.is_number_integer() || x.get<int64_t>() < min || x.get<int64_t>() > (int64_t{1} << 30))
        return invalid(
            where, std::string("\"") + key + "\" must hold integers >= " + std::to_string(min) + ", not " + x.dump());
      out->push_back(x.get<int>());
    }
    return Status::OK();
  };
  int64_t dp = 1, tp = 1, pp = 1, zero = 0;
  Layout l;
  GBX_RETURN_IF_ERROR(count("dp", 1, true, &dp));
  GBX_RETURN_IF_ERROR(count("tp", 1, true, &tp));
  GBX_RETURN_IF_ERROR(count("pp", 1, true, &pp));
  GBX_RETURN_IF_ERROR(count("micro_batches", 1, false, &l.micro_batches));
  GBX_RETURN_IF_ERROR(count("zero", 0, false, &zero));
  l.dp = int(dp), l.tp = int(tp), l.pp = int(pp), l.zero = int(zero);
  if (l.zero > 2) return invalid(where, "\"zero\" must be 0, 1 or 2");
  if (j.contains("schedule")) {
    const auto& s = j["schedule"];
    if (s == "1f1b") l.schedule = Schedule::k1F1B;
    else if (s == "gpipe") l.schedule = Schedule::kGPipe;
    else return invalid(where, "\"schedule\" must be \"1f1b\" or \"gpipe\", not " + s.dump());
  }
  if (j.contains("recompute")) {
    if (!j["recompute"].is_boolean()) return invalid(where, "\"recompute\" must be true or false");
    l.recompute = j["recompute"].get<bool>();
  }
  GBX_RETURN_IF_ERROR(list("stage_units", 1, &l.stage_units));
  GBX_RETURN_IF_ERROR(list("replicated_units", 0, &l.replicated_units));
  if (l.stage_units.size() != size_t(l.pp))
    return invalid(where, "\"stage_units\" must list the units of each of the " + std::to_string(l.pp) + " stages");
  for (size_t i = 1; i < l.replicated_units.size(); ++i)
    if (l.replicated_units[i] <= l.replicated_units[i - 1])
      return invalid(where, "\"replicated_units\" must be ascending");
  return l;
}

nlohmann::json estimate_to_json(const Estimate& e) {
  return {{"step_s", e.step_s},
          {"pipeline_s", e.pipeline_s},
          {"tp_comm_s", e.tp_comm_s},
          {"p2p_s", e.p2p_s},
          {"dp_comm_s", e.dp_comm_s},
          {"optimizer_s", e.optimizer_s},
          {"bubble", e.bubble},
          {"micro_batch", e.micro_batch},
          {"busiest_stage", e.busiest_stage},
          {"memory_bytes",
           {{"total", e.memory.total()},
            {"weights", e.memory.weights},
            {"gradients", e.memory.gradients},
            {"optimizer", e.memory.optimizer},
            {"activations", e.memory.activations}}}};
}

}  // namespace gearbox::comm::plan
