#include "comm/plan/search.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gearbox::comm::plan {

namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i * i <= n; ++i)
    if (n % i == 0) {
      d.push_back(i);
      if (i != n / i) d.push_back(n / i);
    }
  std::sort(d.begin(), d.end());
  return d;
}

// Packs units into stages in order, each as full as `max_time` and the memory limit allow,
// leaving one unit for every later stage. Returns the stage sizes, or empty when they do not
// all fit in layout.pp stages.
std::vector<int> pack(const std::vector<UnitCost>& costs, const Layout& l, double tied_bytes, double memory_limit,
                      double max_time) {
  const int n = int(costs.size());
  std::vector<int> sizes;
  int start = 0;
  for (int s = 0; s < l.pp; ++s) {
    const bool last = s == l.pp - 1;
    const int max_end = last ? n : n - (l.pp - s - 1);
    const double flight = double(in_flight(l.schedule, s, l.pp, l.micro_batches));
    double time = 0, fixed = last && l.pp > 1 ? tied_bytes : 0, acts = 0, working = 0;
    int end = start;
    while (end < max_end) {
      const UnitCost& c = costs[size_t(end)];
      double t = time + c.forward_s + c.backward_s;
      double f = fixed + c.static_bytes, a = acts + c.activation_bytes, w = std::max(working, c.working_bytes);
      if (t > max_time || f + flight * a + w > memory_limit) break;
      time = t, fixed = f, acts = a, working = w;
      ++end;
    }
    if (end == start || (last && end != n)) return {};
    sizes.push_back(end - start);
    start = end;
  }
  return sizes;
}

double tied_copy_bytes(const TransformerSpec& spec, const Layout& l) {
  const double tied = tied_copy_params(spec, l);
  return tied * spec.dtype_bytes * (1 + 1.0 / (l.zero >= 2 ? l.dp : 1)) +
         tied * spec.optimizer_bytes_per_param() / (l.zero >= 1 ? l.dp : 1);
}

// The per-layer split choice (Layout::replicated_units) of a layout with tp > 1: the groups of
// units (one unit each, or the embedding with the head when their weight is tied) whose whole
// computation on every tensor-parallel rank costs less than their split (its compute plus its
// allreduces), counting what their whole weights add to the data-parallel reduction and the
// optimizer's update, ordered by time saved per byte of memory added, most first. Without a
// pipeline and without a memory limit the step time is a sum over units plus terms linear in
// the parameters, so taking every group that saves time is the optimum over all subsets
// (Plan.ReplicationMatchesEveryChoiceOfUnits enumerates them).
std::vector<std::vector<int>> replication_groups(const TransformerSpec& spec, const Hardware& hw, const Layout& l) {
  const int n = int(spec.layers) + 2;
  Layout whole = l;
  whole.replicated_units.resize(size_t(n));
  for (int k = 0; k < n; ++k) whole.replicated_units[size_t(k)] = k;
  const std::vector<UnitCost> split = unit_costs(spec, hw, l), all = unit_costs(spec, hw, whole);
  // Per parameter a rank holds more: the data-parallel allreduce's bandwidth term and the
  // optimizer's memory traffic (estimate()'s terms, linear in the parameters).
  const double dp_per_byte = l.dp > 1 ? 2.0 * (l.dp - 1) / l.dp / group_link(hw, l.dp, l.tp).bandwidth : 0;
  const double update_per_param = (2.0 * spec.dtype_bytes + 2.0 * spec.optimizer_bytes_per_param()) /
                                  hw.memory_bandwidth / hw.compute_share / (l.zero >= 1 ? l.dp : 1);
  struct Group {
    std::vector<int> units;
    double saved = 0, added_bytes = 0;
  };
  std::vector<Group> groups;
  auto add = [&](std::vector<int> members) {
    Group g{std::move(members)};
    for (int k : g.units) {
      const UnitCost &a = split[size_t(k)], &b = all[size_t(k)];
      const double more_params = (b.fixed.weights - a.fixed.weights) / spec.dtype_bytes;
      g.saved += (a.forward_s + a.backward_s - b.forward_s - b.backward_s) * double(l.micro_batches) -
                 more_params * (spec.dtype_bytes * dp_per_byte + update_per_param);
      g.added_bytes += b.static_bytes - a.static_bytes + b.activation_bytes - a.activation_bytes;
    }
    if (g.saved > 0) groups.push_back(std::move(g));
  };
  const bool tied = spec.tied_embeddings;
  if (tied) add({0, n - 1});
  for (int k = tied ? 1 : 0; k < (tied ? n - 1 : n); ++k) add({k});
  // Most time per byte first; among equals the later units, whose stages keep fewer
  // micro-batches in flight under 1F1B.
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    const double ra = a.saved / std::max(a.added_bytes, 1.0), rb = b.saved / std::max(b.added_bytes, 1.0);
    if (ra != rb) return ra > rb;
    return a.units.front() > b.units.front();
  });
  std::vector<std::vector<int>> out;
  for (Group& g : groups) out.push_back(std::move(g.units));
  return out;
}

// The layout with the first `count` replication groups replicated.
Layout with_replicated(Layout l, const std::vector<std::vector<int>>& groups, size_t count) {
  l.replicated_units.clear();
  for (size_t i = 0; i < count; ++i)
    l.replicated_units.insert(l.replicated_units.end(), groups[i].begin(), groups[i].end());
  std::sort(l.replicated_units.begin(), l.replicated_units.end());
  return l;
}

}  // namespace

bool choose_replication(const TransformerSpec& spec, const Hardware& hw, double memory_limit, Layout* l) {
  if (l->tp == 1) return false;
  const std::vector<std::vector<int>> groups = replication_groups(spec, hw, *l);
  // The most groups that still fit: memory only grows with each group, so bisect on the count.
  size_t lo = 0, hi = groups.size();
  Layout best;
  while (lo < hi) {
    const size_t mid = (lo + hi + 1) / 2;
    Layout t = with_replicated(*l, groups, mid);
    if (choose_stage_cut(spec, hw, memory_limit, &t)) lo = mid, best = std::move(t);
    else hi = mid - 1;
  }
  if (lo == 0) return false;
  *l = std::move(best);
  return true;
}

bool choose_stage_cut(const TransformerSpec& spec, const Hardware& hw, double memory_limit, Layout* l) {
  const std::vector<UnitCost> costs = unit_costs(spec, hw, *l);
  if (int64_t(costs.size()) < l->pp) return false;
  const double tied = tied_copy_bytes(spec, *l);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<int> sizes = pack(costs, *l, tied, memory_limit, inf);
  if (sizes.empty()) return false;
  double lo = 0, hi = 0;
  for (const UnitCost& c : costs) {
    lo = std::max(lo, c.forward_s + c.backward_s);
    hi += c.forward_s + c.backward_s;
  }
  // The slowest stage takes at least the slowest unit and at most everything.
  if (std::vector<int> at_lo = pack(costs, *l, tied, memory_limit, lo); !at_lo.empty()) {
    l->stage_units = at_lo;
    return true;
  }
  for (int i = 0; i < 200 && hi - lo > 1e-9 * hi; ++i) {
    double mid = 0.5 * (lo + hi);
    std::vector<int> s = pack(costs, *l, tied, memory_limit, mid);
    if (s.empty()) lo = mid;
    else hi = mid, sizes = std::move(s);
  }
  l->stage_units = sizes;
  return true;
}

Result<PlanResult> search(const TransformerSpec& spec, int devices, const Hardware& hw, const SearchOptions& o) {
  if (devices < 1) return make_error(ErrorCode::INVALID_ARGUMENT, "the device count must be >= 1, not ", devices);
  PlanResult r;
  r.smallest_memory = std::numeric_limits<double>::infinity();
  const double inf = std::numeric_limits<double>::infinity();
  const int64_t n_units = spec.layers + 2;
  std::vector<Candidate> fitting;
  for (int64_t tp : divisors(devices)) {
    if (spec.heads % tp != 0 || spec.ffn() % tp != 0) continue;
    for (int64_t pp : divisors(devices / tp)) {
      if (pp > n_units) continue;
      const int64_t dp = devices / (tp * pp);
      if (spec.global_batch % dp != 0) continue;
      PlanResult::PerDegrees summary;
      bool any = false;
      for (int64_t m : divisors(spec.global_batch / dp)) {
        if (pp > 1 && m > 8 * pp) break;  // past 8 x pp the bubble is under 11%: smaller micro-batches only cost
        for (Schedule sched : {Schedule::k1F1B, Schedule::kGPipe}) {
          if (sched == Schedule::kGPipe && (pp == 1 || !o.allow_gpipe)) continue;
          for (int zero = 0; zero <= (o.allow_zero && dp > 1 ? 2 : 0); ++zero)
            for (bool recompute : {false, true}) {
              if (recompute && !o.allow_recompute) continue;
              Layout l;
              l.dp = int(dp), l.tp = int(tp), l.pp = int(pp), l.micro_batches = m, l.schedule = sched;
              l.zero = zero, l.recompute = recompute;
              ++r.evaluated;
              bool fits = choose_stage_cut(spec, hw, o.memory_limit, &l);
              if (!fits && !choose_stage_cut(spec, hw, inf, &l)) continue;
              std::vector<Layout> tries{l};
              // The same degrees with some units whole on every tensor-parallel rank.
              if (fits && o.allow_replication && choose_replication(spec, hw, o.memory_limit, &l)) {
                tries.push_back(l);
                ++r.evaluated;
              }
              for (const Layout& t : tries) {
                auto e = estimate(spec, hw, t);
                if (!e.ok()) return e.status();
                r.smallest_memory = std::min(r.smallest_memory, e->memory.total());
                if (fits) fitting.push_back({t, *e});
                const Estimate& b = summary.best.estimate;
                if (!any || (fits && (!summary.fits || e->step_s < b.step_s)) ||
                    (!fits && !summary.fits && e->memory.total() < b.memory.total()))
                  summary = {{t, *e}, fits}, any = true;
              }
            }
        }
      }
      if (any) r.per_degrees.push_back(summary);
    }
  }
  if (spec.global_batch % devices == 0) {
    Layout l;
    l.dp = devices;
    l.stage_units = {int(n_units)};
    auto e = estimate(spec, hw, l);
    if (e.ok()) r.has_data_parallel = true, r.data_parallel = {l, *e};
  }
  r.fitting = int64_t(fitting.size());
  if (fitting.empty()) {
    if (r.evaluated == 0)
      return make_error(ErrorCode::PLAN_INFEASIBLE, "no split of ", devices, " devices suits the network: the ",
                        spec.heads, " heads, the global batch of ", spec.global_batch, " and the ", n_units,
                        " pipeline units admit no dp x tp x pp = ", devices);
    return make_error(ErrorCode::PLAN_INFEASIBLE, "none of the ", r.evaluated, " layouts of ", spec.name, " on ",
                      devices, " devices fits ", o.memory_limit / double(1 << 30),
                      " GiB per device; the least any needs is ", r.smallest_memory / double(1 << 30), " GiB");
  }
  std::sort(fitting.begin(), fitting.end(), [](const Candidate& a, const Candidate& b) {
    if (a.estimate.step_s != b.estimate.step_s) return a.estimate.step_s < b.estimate.step_s;
    return a.estimate.memory.total() < b.estimate.memory.total();
  });
  if (int(fitting.size()) > o.keep) fitting.resize(size_t(std::max(o.keep, 1)));
  r.best = std::move(fitting);
  return r;
}

}  // namespace gearbox::comm::plan
