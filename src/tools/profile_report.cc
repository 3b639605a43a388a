// gearbox profile's outputs: summaries, trace, CSVs, advisor and HTML. See profile_report.h.
#include "tools/profile_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kernels/op_descriptor.h"
#include "runtime/op_cost.h"

namespace gearbox::cli {
namespace {

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

std::string dims_str(const std::vector<Dims>& ds) {
  std::string s;
  for (const Dims& d : ds) {
    if (!s.empty()) s += ' ';
    s += to_string(d);
  }
  return s;
}

// CSV field: quoted when it holds a comma, quote or newline.
std::string csv(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// Ops that typically belong to input preprocessing rather than to the network.
bool is_preprocessing_like(const std::string& op) { return op_descriptor_qualified(op).preprocessing; }

// Convolutions and matrix products: the ops whose roofline matters most.
bool compute_heavy(const std::string& op) { return op_descriptor_qualified(op).kind == OpKind::Contraction; }

}  // namespace

double attainable_gflops(const Roofline& r, double intensity) {
  if (r.peak_gflops <= 0) return 0;
  if (r.bandwidth_gbs <= 0) return r.peak_gflops;
  return std::min(r.peak_gflops, intensity * r.bandwidth_gbs);
}

double total_run_ms(const ProfileData& d) {
  double t = 0;
  for (const RunRecord& r : d.runs) t += ms(r.end_ns - r.begin_ns);
  return t;
}

double total_op_ms(const ProfileData& d) {
  double t = 0;
  for (const OpRecord& o : d.ops)
    if (o.depth == 0) t += ms(o.end_ns - o.begin_ns);
  return t;
}

std::vector<OpSummary> summarize(const ProfileData& d) {
  std::map<std::string, OpSummary> by_type, by_node;
  // Adds one execution to the row `key` of `rows`, creating the row on first use.
  auto add = [](std::map<std::string, OpSummary>& rows, const std::string& key, const char* kind, const OpRecord& o) {
    OpSummary& s = rows[key];
    s.kind = kind;
    s.name = key;
    s.op_type = o.op_type;
    s.engine = o.engine;
    double t = ms(o.end_ns - o.begin_ns);
    if (s.calls == 0 || t < s.min_ms) s.min_ms = t;
    s.max_ms = std::max(s.max_ms, t);
    ++s.calls;
    s.total_ms += t;
    s.flops += o.flops;
    s.bytes += static_cast<double>(o.bytes_read + o.bytes_written);
  };
  for (const OpRecord& o : d.ops) {
    // Time inside an If/Loop body is already part of the control-flow node's slice; count
    // subgraph ops in their own rows but keep op-type totals to the main graph so that
    // they add up to the run.
    add(by_node, o.node, "node", o);
    if (o.depth == 0) add(by_type, o.op_type, "op_type", o);
  }
  auto sorted = [](std::map<std::string, OpSummary>& m) {
    std::vector<OpSummary> v;
    for (auto& [k, s] : m) v.push_back(s);
    std::stable_sort(v.begin(), v.end(),
                     [](const OpSummary& a, const OpSummary& b) { return a.total_ms > b.total_ms; });
    return v;
  };
  std::vector<OpSummary> out = sorted(by_type);
  for (OpSummary& s : sorted(by_node)) out.push_back(std::move(s));
  return out;
}

std::vector<Finding> advise(const ProfileData& d) {
  std::vector<Finding> f;
  const double run_ms = total_run_ms(d), op_ms = total_op_ms(d);
  const std::vector<OpSummary> rows = summarize(d);
  std::vector<OpSummary> types;
  for (const OpSummary& s : rows)
    if (s.kind == "op_type") types.push_back(s);

  // Idle gaps: run time not covered by any main-graph op.
  if (run_ms > 0 && (run_ms - op_ms) / run_ms > 0.10)
    f.push_back({"idle-gaps",
                 fmt::format("{:.1f}% of the run time ({:.3f} of {:.3f} ms) lies between ops",
                             100 * (run_ms - op_ms) / run_ms, run_ms - op_ms, run_ms),
                 "Per-op overhead dominates: keep fusion passes on to cut the op count; for small models use fewer "
                 "threads (--threads) so parallel regions cost less than the work they split"});

  // Copies and reorders among the top ops.
  for (size_t i = 0; i < types.size() && i < 5; ++i) {
    const OpSummary& s = types[i];
    if (op_descriptor_qualified(s.op_type).kind != OpKind::DataMovement || op_ms <= 0 || s.total_ms / op_ms < 0.05)
      continue;
    std::string nodes;
    int listed = 0;
    for (const OpSummary& n : rows)
      if (n.kind == "node" && n.op_type == s.op_type && listed < 5) {
        nodes += (nodes.empty() ? "" : ", ") + n.name;
        ++listed;
      }
    f.push_back({"copies",
                 fmt::format("{} takes {:.1f}% of op time ({} calls), e.g. nodes {}", s.op_type,
                             100 * s.total_ms / op_ms, s.calls, nodes),
                 "A layout or engine boundary: keep these nodes on one engine and layout (sink or cancel the "
                 "transposes, avoid casts between ops), or force the neighbours' engine with --engine"});
  }

  // Compute-heavy op types far below their roofline.
  for (const OpSummary& s : types) {
    if (!compute_heavy(s.op_type) || op_ms <= 0 || s.total_ms / op_ms < 0.10 || d.roofline.peak_gflops <= 0) continue;
    double att = attainable_gflops(d.roofline, s.intensity());
    if (att > 0 && s.gflops_per_s() < 0.2 * att)
      f.push_back({"below-roofline",
                   fmt::format("{} reaches {:.3g} GFLOP/s, {:.3g}% of the {:.1f} GFLOP/s its arithmetic intensity "
                               "({:.1f} FLOP/byte) allows, and takes {:.1f}% of op time",
                               s.op_type, s.gflops_per_s(), 100 * s.gflops_per_s() / att, att, s.intensity(),
                               100 * s.total_ms / op_ms),
                   "The kernel, not the hardware, is the limit: run it on a faster engine (cpu.dnnl/cpu.simd when "
                   "available) or check that the fast kernel was chosen (engine column of op_summary.csv)"});
  }

  // Peak memory near the pool's capacity.
  size_t peak = 0;
  for (const OpRecord& o : d.ops) peak = std::max(peak, o.pool_bytes_in_use);
  if (d.pool_capacity && *d.pool_capacity > 0 && peak > 0.9 * static_cast<double>(*d.pool_capacity))
    f.push_back(
        {"memory-peak",
         fmt::format("peak tensor memory {} bytes is {:.1f}% of the device pool's {} bytes", peak,
                     100.0 * static_cast<double>(peak) / static_cast<double>(*d.pool_capacity), *d.pool_capacity),
         "Out-of-memory risk: use a smaller or fixed batch, keep memory-planning passes on, or raise "
         "GEARBOX_DEVICE_MEMORY"});

  // Fusable patterns left unfused because a pass is off.
  for (const std::string& p : d.unfused_patterns)
    f.push_back({"unfused", p, "Re-enable the pass (drop --disable-pass / GEARBOX_DISABLE_PASSES for it)"});

  // Preprocessing-like ops dominating.
  double pre_ms = 0;
  std::string pre_types;
  for (const OpSummary& s : types)
    if (is_preprocessing_like(s.op_type) && s.total_ms > 0) {
      pre_ms += s.total_ms;
      pre_types += (pre_types.empty() ? "" : ", ") + s.op_type;
    }
  if (op_ms > 0 && pre_ms / op_ms > 0.30)
    f.push_back({"preprocessing",
                 fmt::format("preprocessing-like ops ({}) take {:.1f}% of op time", pre_types, 100 * pre_ms / op_ms),
                 "Do resizing, casting and layout changes once, outside the model (or in the data pipeline), and feed "
                 "the model tensors in its native dtype and layout"});
  return f;
}

std::string trace_json(const ProfileData& d) {
  using nlohmann::json;
  json events = json::array();
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", 0}, {"args", {{"name", "gearbox " + d.model}}}});
  std::set<uint32_t> threads;
  for (const RunRecord& r : d.runs) threads.insert(r.thread);
  for (const OpRecord& o : d.ops) threads.insert(o.thread);
  for (uint32_t t : threads)
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", 0},
                      {"tid", t},
                      {"args", {{"name", t == 0 ? std::string("main") : "thread " + std::to_string(t)}}}});
  for (const RunRecord& r : d.runs)
    events.push_back({{"ph", "X"},
                      {"name", "run " + std::to_string(r.run)},
                      {"cat", "run"},
                      {"pid", 0},
                      {"tid", r.thread},
                      {"ts", static_cast<double>(r.begin_ns) / 1e3},
                      {"dur", static_cast<double>(r.end_ns - r.begin_ns) / 1e3},
                      {"args", {{"run", r.run}}}});
  for (const OpRecord& o : d.ops) {
    events.push_back({{"ph", "X"},
                      {"name", o.node},
                      {"cat", o.op_type},
                      {"pid", 0},
                      {"tid", o.thread},
                      {"ts", static_cast<double>(o.begin_ns) / 1e3},
                      {"dur", static_cast<double>(o.end_ns - o.begin_ns) / 1e3},
                      {"args",
                       {{"op_type", o.op_type},
                        {"engine", o.engine},
                        {"run", o.run},
                        {"depth", o.depth},
                        {"inputs", dims_str(o.input_dims)},
                        {"outputs", dims_str(o.output_dims)},
                        {"flops", o.flops},
                        {"bytes_read", o.bytes_read},
                        {"bytes_written", o.bytes_written}}}});
    events.push_back({{"ph", "C"},
                      {"name", "tensor memory"},
                      {"pid", 0},
                      {"tid", o.thread},
                      {"ts", static_cast<double>(o.end_ns) / 1e3},
                      {"args", {{"bytes_in_use", o.pool_bytes_in_use}}}});
  }
  json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return doc.dump(1) + "\n";
}

std::string op_summary_csv(const ProfileData& d) {
  const double run_ms = total_run_ms(d);
  std::ostringstream o;
  o << "kind,name,op_type,engine,calls,total_ms,mean_ms,min_ms,max_ms,pct_of_total,flops,bytes,gflops_per_s,gb_per_s,"
       "arithmetic_intensity,pct_of_peak,bound\n";
  for (const OpSummary& s : summarize(d)) {
    const double att = attainable_gflops(d.roofline, s.intensity());
    const std::string bound = d.roofline.ridge() <= 0              ? "unknown"
                              : s.intensity() < d.roofline.ridge() ? "memory"
                                                                   : "compute";
    o << csv(s.kind) << ',' << csv(s.name) << ',' << csv(s.op_type) << ',' << csv(s.engine) << ',' << s.calls << ','
      << fmt::format("{:.6f},{:.6f},{:.6f},{:.6f},{:.3f},{:.0f},{:.0f},{:.3f},{:.3f},{:.4f},{:.2f},", s.total_ms,
                     s.mean_ms(), s.min_ms, s.max_ms, run_ms > 0 ? 100 * s.total_ms / run_ms : 0, s.flops, s.bytes,
                     s.gflops_per_s(), s.gb_per_s(), s.intensity(), att > 0 ? 100 * s.gflops_per_s() / att : 0)
      << bound << '\n';
  }
  return o.str();
}

// One table with a `section` column: "pool" rows (tensor memory after each node, over
// time), a "peak" row, then "arena" rows (the memory planner's placement of each value)
// and "arena_summary" rows (planned, naive and lower-bound bytes, values left unplanned, the
// arena bytes the runs used and their requests that fell back to the buffer pool), and
// "arena_not_made" / "run_arena_not_made" rows with the reason when no plan was made.
std::string memory_csv(const ProfileData& d) {
  std::ostringstream o;
  o << "section,run,time_ms,node,op_type,bytes_in_use,value,offset,bytes,first,last,first_node,last_node,in_place_of\n";
  size_t peak = 0;
  std::string peak_node;
  for (const OpRecord& r : d.ops) {
    o << "pool," << r.run << ',' << fmt::format("{:.6f}", ms(r.end_ns)) << ',' << csv(r.node) << ',' << csv(r.op_type)
      << ',' << r.pool_bytes_in_use << ",,,,,,,,\n";
    if (r.pool_bytes_in_use > peak) {
      peak = r.pool_bytes_in_use;
      peak_node = r.node;
    }
  }
  o << "peak,,," << csv(peak_node) << ",," << peak << ",,,,,,,,\n";
  if (d.arena) {
    for (const ArenaRow& a : d.arena->rows)
      o << "arena,,,,,," << csv(a.value) << ',' << a.offset << ',' << a.bytes << ',' << a.first << ',' << a.last << ','
        << csv(a.first_node) << ',' << csv(a.last_node) << ',' << csv(a.in_place_of) << '\n';
    const std::pair<const char*, size_t> summary[] = {{"planned_bytes", d.arena->planned_bytes},
                                                      {"naive_bytes", d.arena->naive_bytes},
                                                      {"lower_bound_bytes", d.arena->lower_bound_bytes},
                                                      {"unsized_values", static_cast<size_t>(d.arena->unsized_values)}};
    for (const auto& [name, v] : summary) o << "arena_summary,,,,,," << name << ",," << v << ",,,,,\n";
    o << "arena_summary,,,,,,run_arena_bytes,," << d.arena->run_arena_bytes << ",,,,,\n";
    o << "arena_summary,,,,,,run_arena_fallbacks,," << d.arena->run_arena_fallbacks << ",,,,,\n";
    // Why no plan was made (the value column holds the reason).
    if (!d.arena->not_made.empty()) o << "arena_not_made,,,,,," << csv(d.arena->not_made) << ",,,,,,,\n";
    if (!d.arena->run_arena_not_made.empty())
      o << "run_arena_not_made,,,,,," << csv(d.arena->run_arena_not_made) << ",,,,,,,\n";
  }
  return o.str();
}

}  // namespace gearbox::cli
