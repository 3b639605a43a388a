// Memory planning: lifetimes, in-place reuse, greedy-by-size best-fit offsets.
#include "graph/memory_plan.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "base/logging.h"
#include "kernels/kernel.h"
#include "kernels/op_descriptor.h"

namespace gearbox {

namespace {

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
        continue;
      }
      const int end = outputs.count(v) ? n_nodes : (last.count(v) ? std::max(last[v], i) : i);
      plan.naive_bytes += *bytes;
      spans.push_back({i, end});
      span_bytes.push_back(*bytes);
      // In place: an input of the same size whose last reader is this node and that this
      // graph produced (inputs and initializers are not ours to overwrite).
      std::optional<size_t> reuse;
      // The op descriptor says which inputs an output may overwrite element by element.
      const size_t out_index = static_cast<size_t>(std::find(n.outputs.begin(), n.outputs.end(), v) - n.outputs.begin());
      if (options.in_place) {
        for (const InPlacePair& pair : op_descriptor(n.domain, n.op_type).in_place) {
          if (static_cast<size_t>(pair.output) != out_index || static_cast<size_t>(pair.input) >= n.inputs.size()) continue;
          const Value* in = n.inputs[static_cast<size_t>(pair.input)];
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
  std::vector<size_t> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
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
  GBX_LOG_INFO("MEM_ALLOC",
               "graph '{}': {} intermediates, naive {} B, planned {} B, lower bound {} B, {} in place, {} unsized",
               g.name, plan.placements.size(), plan.naive_bytes, plan.planned_bytes, plan.lower_bound_bytes,
               plan.in_place_reuses, plan.unsized_values);
  return plan;
}

nlohmann::json MemoryPlan::summary() const {
  nlohmann::json j{{"naive_bytes", naive_bytes},
                   {"planned_bytes", planned_bytes},
                   {"lower_bound_bytes", lower_bound_bytes},
                   {"in_place_reuses", in_place_reuses},
                   {"unsized_values", unsized_values},
                   {"values", placements.size()}};
  return j;
}

}  // namespace gearbox
