// Memory planning: lifetimes, in-place reuse, greedy-by-size best-fit offsets.
#include "graph/memory_plan.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "base/logging.h"
#include "kernels/kernel.h"
#include "kernels/op_descriptor.h"

namespace gearbox {

namespace {

// The symbolic dims of v that `o` does not bind, for the reason a plan was not made.
void unbound_symbols(const Value* v, const MemoryPlanOptions& o, std::set<std::string>* out) {
  if (!v || !v->type.shape.ranked) return;
  for (const Dim& d : v->type.shape.dims)
    if (!d.known() && !d.symbol.empty() && !o.dim_values.count(d.symbol)) out->insert(d.symbol);
}

std::optional<size_t> value_bytes(const Value* v, const MemoryPlanOptions& o) {
  if (!v || v->type.kind != ValueType::Kind::Tensor || !v->type.shape.ranked) return std::nullopt;
  const size_t es = dtype_size(v->type.dtype);
  if (es == 0) return std::nullopt;
  size_t n = 1;
  for (const Dim& d : v->type.shape.dims) {
    int64_t x = d.value;
    if (!d.known()) {
      auto it = o.dim_values.find(d.symbol);
      if (d.symbol.empty() || it == o.dim_values.end()) return std::nullopt;
      x = it->second;
    }
    n *= static_cast<size_t>(x);
  }
  const size_t bytes = n * es;
  const size_t a = std::max<size_t>(1, o.alignment);
  return (bytes + a - 1) / a * a;
}

}  // namespace

MemoryPlan plan_memory(const Graph& g, const MemoryPlanOptions& options) {
  MemoryPlan plan;
  const int n_nodes = static_cast<int>(g.nodes.size());
  std::unordered_map<const Value*, int> def, last;
  std::unordered_set<const Value*> outputs(g.outputs.begin(), g.outputs.end());
  for (int i = 0; i < n_nodes; ++i) {
    const Node& n = *g.nodes[i];
    for (const Value* v : n.inputs)
      if (v) last[v] = i;
    std::unordered_set<const Value*> sub;
    for_each_subgraph(n, [&](const Graph& sg) { collect_reads(sg, sub); });
    for (const Value* v : sub) last[v] = i;
    for (const Value* v : n.outputs)
      if (v) def[v] = i;
  }
  // One buffer per value, or shared with an input for in-place element-wise nodes.
  struct Buffer {
    size_t bytes = 0;
    int first = 0, last = 0;
    std::vector<const Value*> values;
  };
  std::vector<Buffer> buffers;
  std::unordered_map<const Value*, size_t> buffer_of;
  std::set<std::string> symbols;  // unbound symbolic dims of the unsized values
  std::unordered_map<const Value*, const Value*> in_place_of;
  // Lower bound and naive size use one buffer per value.
  std::vector<std::pair<int, int>> spans;
  std::vector<size_t> span_bytes;
  for (int i = 0; i < n_nodes; ++i) {
    const Node& n = *g.nodes[i];
    for (const Value* v : n.outputs) {
      if (!v) continue;
      auto bytes = value_bytes(v, options);
      if (!bytes) {
        ++plan.unsized_values;
        unbound_symbols(v, options, &symbols);
        continue;
      }
      const int end = outputs.count(v) ? n_nodes : (last.count(v) ? std::max(last[v], i) : i);
      if (options.as_executed && op_descriptor(n.domain, n.op_type).output_views_input0 && v == n.outputs[0] && !n.inputs.empty()) {
        // The view shares its input's buffer (or memory outside the arena: an input, an
        // initializer) for as long as either lives.
        auto it = buffer_of.find(n.inputs[0]);
        if (it != buffer_of.end() && buffers[it->second].bytes == *bytes) {
          buffers[it->second].last = std::max(buffers[it->second].last, end);
          buffers[it->second].values.push_back(v);
          buffer_of[v] = it->second;
          in_place_of[v] = n.inputs[0];
          continue;
        }
        if (it == buffer_of.end() && n.inputs[0] && !n.inputs[0]->producer) continue;  // a view of an input or weight
      }
      plan.naive_bytes += *bytes;
      spans.push_back({i, end});
      span_bytes.push_back(*bytes);
      // In place: an input of the same size whose last reader is this node and that this
      // graph produced (inputs and initializers are not ours to overwrite).
      std::optional<size_t> reuse;
      // Which inputs output `v` may overwrite: as planned for the executor, where a kernel
      // really writes over an input (OpDescriptor::kernel_overwrites_input); otherwise what the op descriptor
      // says an output may overwrite element by element.
      std::vector<size_t> candidates;
      if (options.in_place) {
        if (options.as_executed) {
          const int k = op_descriptor(n.domain, n.op_type).kernel_overwrites_input;
          if (v == n.outputs[0] && k >= 0) candidates.push_back(static_cast<size_t>(k));
        } else {
          const size_t out_index =
              static_cast<size_t>(std::find(n.outputs.begin(), n.outputs.end(), v) - n.outputs.begin());
          for (const InPlacePair& pair : op_descriptor(n.domain, n.op_type).in_place)
            if (static_cast<size_t>(pair.output) == out_index) candidates.push_back(static_cast<size_t>(pair.input));
        }
      }
      {
        for (size_t k : candidates) {
          if (k >= n.inputs.size()) continue;
          const Value* in = n.inputs[k];
          auto it = buffer_of.find(in);
          if (!in || it == buffer_of.end() || outputs.count(in) || last[in] != i) continue;
          if (buffers[it->second].bytes != *bytes || buffers[it->second].last != i) continue;
          reuse = it->second;
          in_place_of[v] = in;
          break;
        }
      }
      if (reuse) {
        buffers[*reuse].last = end;
        buffers[*reuse].values.push_back(v);
        buffer_of[v] = *reuse;
        ++plan.in_place_reuses;
      } else {
        buffers.push_back({*bytes, i, end, {v}});
        buffer_of[v] = buffers.size() - 1;
      }
    }
  }
  // Lower bound: the most bytes live at one node.
  std::vector<long long> delta(static_cast<size_t>(n_nodes) + 2, 0);
  for (size_t k = 0; k < spans.size(); ++k) {
    delta[static_cast<size_t>(spans[k].first)] += static_cast<long long>(span_bytes[k]);
    delta[static_cast<size_t>(spans[k].second) + 1] -= static_cast<long long>(span_bytes[k]);
  }
  long long live = 0;
  for (long long d : delta) {
    live += d;
    plan.lower_bound_bytes = std::max(plan.lower_bound_bytes, static_cast<size_t>(std::max(0LL, live)));
  }
  // Greedy by size, best fit among the gaps of overlapping, already placed buffers.
  // as_executed: a buffer holding a graph output goes to the caller, who may keep it past the
  // run (and the next run would write over it): it is not the arena's.
  std::vector<bool> escapes(buffers.size(), false);
  if (options.as_executed)
    for (size_t bi = 0; bi < buffers.size(); ++bi)
      for (const Value* v : buffers[bi].values)
        if (outputs.count(v)) escapes[bi] = true;
  std::vector<size_t> order;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (!escapes[i]) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> offset(buffers.size(), 0);
  std::vector<size_t> placed;
  for (size_t bi : order) {
    const Buffer& b = buffers[bi];
    std::vector<size_t> overlap;
    for (size_t pj : placed)
      if (buffers[pj].first <= b.last && b.first <= buffers[pj].last) overlap.push_back(pj);
    std::sort(overlap.begin(), overlap.end(), [&](size_t x, size_t y) { return offset[x] < offset[y]; });
    size_t prev_end = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
    for (size_t pj : overlap) {
      if (offset[pj] >= prev_end) {
        const size_t gap = offset[pj] - prev_end;
        if (gap >= b.bytes && gap < best_gap) {
          best = prev_end;
          best_gap = gap;
        }
      }
      prev_end = std::max(prev_end, offset[pj] + buffers[pj].bytes);
    }
    offset[bi] = best != SIZE_MAX ? best : prev_end;
    plan.planned_bytes = std::max(plan.planned_bytes, offset[bi] + b.bytes);
    placed.push_back(bi);
  }
  for (size_t bi = 0; bi < buffers.size(); ++bi)
    for (const Value* v : buffers[bi].values) {
      if (escapes[bi]) {
        ++plan.escaping_values;
        continue;
      }
      BufferPlacement p;
      p.value = v;
      p.offset = offset[bi];
      p.bytes = buffers[bi].bytes;
      p.first = def[v];
      p.last = outputs.count(v) ? n_nodes : std::max(def[v], last.count(v) ? last[v] : def[v]);
      auto it = in_place_of.find(v);
      p.in_place_of = it == in_place_of.end() ? nullptr : it->second;
      plan.placements.push_back(p);
    }
  if (plan.placements.empty() && plan.unsized_values > 0) {
    std::string why = "no intermediate of graph '" + g.name + "' has a static size (" +
                      std::to_string(plan.unsized_values) + " have none)";
    if (!symbols.empty()) {
      std::string list;
      for (const std::string& sym : symbols) list += (list.empty() ? "" : ", ") + sym;
      why += ": the symbolic dims " + list + " are not fixed (gearbox compile --input-shape NAME:D1,D2,...; profile "
             "and run plan at the shapes they are given)";
    } else {
      why += ": their dims are computed at run time";
    }
    plan.not_made = why;
    GBX_LOG_INFO("MEM_ALLOC", "graph '{}': no memory plan: {}", g.name, why);
    return plan;
  }
  GBX_LOG_INFO("MEM_ALLOC",
               "graph '{}': {} intermediates, naive {} B, planned {} B, lower bound {} B, {} in place, {} unsized",
               g.name, plan.placements.size(), plan.naive_bytes, plan.planned_bytes, plan.lower_bound_bytes,
               plan.in_place_reuses, plan.unsized_values);
  return plan;
}

nlohmann::json MemoryPlan::summary() const {
  nlohmann::json j{{"made", made()},
                   {"naive_bytes", naive_bytes},
                   {"planned_bytes", planned_bytes},
                   {"lower_bound_bytes", lower_bound_bytes},
                   {"in_place_reuses", in_place_reuses},
                   {"unsized_values", unsized_values},
                   {"values", placements.size()}};
  if (!made()) j["not_made"] = not_made;
  if (escaping_values) j["escaping_values"] = escaping_values;
  return j;
}

}  // namespace gearbox
