// If (1-17), Loop (1-17), Scan (8, 9-17) and SequenceMap (17) kernels. See control_flow.h.
//
// Bodies run through ctx.run_subgraph with their inputs in the body's declared order and
// return their outputs in order. Every iteration first checks whether the run must stop
// (base/run_options.h): a body the executor would check node by node may be empty, and a
// trip count of 10^12 must still end at a deadline. Loop/Scan stack per-iteration outputs ("scan outputs")
// along a new axis; every iteration must produce the same shape.
#include "runtime/control_flow.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/run_options.h"
#include "graph/ir.h"
#include "kernels/cpu/ref/shape_util.h"
#include "kernels/kernel.h"

namespace gearbox {
namespace {

// The i-th slice of t along axis (that axis removed).
Result<Tensor> slice_axis(const Tensor& t, size_t axis, int64_t i) {
  Dims out;
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < t.rank(); ++d) {
    if (d < axis) outer *= t.dim(d);
    if (d > axis) inner *= t.dim(d);
    if (d != axis) out.push_back(t.dim(d));
  }
  GBX_ASSIGN_OR_RETURN(Tensor s, Tensor::allocate(t.dtype(), out));
  const int64_t len = t.dim(axis);
  const ref::ElemCopier copy(t, s);
  for (int64_t o = 0; o < outer; ++o) copy.run((o * len + i) * inner, o * inner, inner);
  return s;
}

// Stacks equally shaped parts along a new axis; part p lands at index p.
Result<Tensor> stack_axis(const std::vector<Tensor>& parts, size_t axis) {
  const Tensor& f = parts.front();
  for (const Tensor& p : parts)
    if (p.dims() != f.dims() || p.dtype() != f.dtype())
      return make_error(ErrorCode::SHAPE_MISMATCH, "scan output changes between iterations: ", describe(f), " vs ",
                        describe(p));
  if (axis > f.rank())
    return make_error(ErrorCode::INVALID_ARGUMENT, "scan output axis ", axis, " is out of range for ", describe(f));
  Dims out = f.dims();
  const int64_t n = static_cast<int64_t>(parts.size());
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(axis), n);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < f.rank(); ++d) (d < axis ? outer : inner) *= f.dim(d);
  GBX_ASSIGN_OR_RETURN(Tensor s, Tensor::allocate(f.dtype(), out));
  for (int64_t p = 0; p < n; ++p) {
    const ref::ElemCopier copy(parts[static_cast<size_t>(p)], s);
    for (int64_t o = 0; o < outer; ++o) copy.run(o * inner, (o * n + p) * inner, inner);
  }
  return s;
}

// An empty stacked output for a scan output that never ran: [0, dims the body declares].
Result<Tensor> empty_scan_output(const Value* v, size_t axis) {
  DType dt = v && v->type.dtype != DType::Undefined ? v->type.dtype : DType::F32;
  Dims d;
  if (v && v->type.shape.ranked)
    for (const Dim& x : v->type.shape.dims) d.push_back(x.known() ? x.value : 0);
  axis = std::min(axis, d.size());
  d.insert(d.begin() + static_cast<std::ptrdiff_t>(axis), 0);
  return Tensor::allocate(dt, d);
}

const Graph* graph_attr(const KernelContext& ctx, const char* name) {
  const Attribute* a = ctx.attr(name);
  return a && a->type == AttrType::Graph && a->g ? a->g.get() : nullptr;
}

Result<bool> read_bool_scalar(const KernelContext& ctx, const RuntimeValue& v, const char* what) {
  if (!v.is_tensor() || v.tensor().numel() != 1)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, what, " must be a single-element tensor",
                     v.is_tensor() ? ", got " + describe(v.tensor()) : std::string());
  return v.tensor().at_double(0) != 0;
}

Status check_runner(const KernelContext& ctx) {
  if (!ctx.can_run_subgraphs()) return ctx.error(ErrorCode::INTERNAL, "this context cannot run subgraphs");
  return Status::OK();
}

// ---- If -------------------------------------------------------------------------------
Status if_kernel(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(check_runner(ctx));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_ASSIGN_OR_RETURN(bool cond, read_bool_scalar(ctx, ctx.input_value(0), "cond"));
  const Graph* branch = graph_attr(ctx, cond ? "then_branch" : "else_branch");
  if (!branch)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "missing graph attribute ", cond ? "then_branch" : "else_branch");
  GBX_ASSIGN_OR_RETURN(std::vector<RuntimeValue> outs, ctx.run_subgraph(*branch, {}));
  if (outs.size() != ctx.num_outputs())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "the ", cond ? "then" : "else", " branch returns ", outs.size(),
                     " outputs but the node has ", ctx.num_outputs());
  for (size_t i = 0; i < outs.size(); ++i) ctx.set_output_value(i, std::move(outs[i]));
  return Status::OK();
}

// ---- Loop -----------------------------------------------------------------------------
Status loop_kernel(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(check_runner(ctx));
  const Graph* body = graph_attr(ctx, "body");
  if (!body) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "missing graph attribute body");
  if (ctx.num_inputs() < 2)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "Loop needs at least 2 inputs (M, cond), got ", ctx.num_inputs());
  const size_t n_carried = ctx.num_inputs() - 2;
  if (body->inputs.size() != n_carried + 2 || body->outputs.size() < n_carried + 1)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "body has ", body->inputs.size(), " inputs and ", body->outputs.size(),
                     " outputs; the node carries ", n_carried, " values");
  const size_t n_scan = body->outputs.size() - 1 - n_carried;
  if (ctx.num_outputs() > n_carried + n_scan)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "node has ", ctx.num_outputs(), " outputs, body gives ",
                     n_carried + n_scan);

  int64_t max_trip = INT64_MAX;
  if (ctx.has_input(0)) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
    if (ctx.input(0).numel() != 1)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "M must be a scalar, got ", describe(ctx.input(0)));
    max_trip = static_cast<int64_t>(ctx.input(0).at_double(0));
  }
  bool cond = true;
  const bool has_cond = ctx.has_input(1);
  if (has_cond) {
    GBX_ASSIGN_OR_RETURN(cond, read_bool_scalar(ctx, ctx.input_value(1), "cond"));
  }
  // With M given and no cond the body's condition output is ignored (a plain for loop).
  const bool use_cond_out = has_cond || !ctx.has_input(0);

  std::vector<RuntimeValue> carried;
  for (size_t i = 0; i < n_carried; ++i) carried.push_back(ctx.input_value(2 + i));
  std::vector<std::vector<Tensor>> scans(n_scan);
  int64_t it = 0;
  for (; it < max_trip && cond; ++it) {
    if (Status stop = check_run_stop(); !stop.ok()) return stop.with_context("iteration " + std::to_string(it) + ": ");
    std::vector<RuntimeValue> in;
    in.reserve(n_carried + 2);
    in.emplace_back(Tensor::scalar<int64_t>(it));
    in.emplace_back(Tensor::scalar<bool>(cond));
    for (auto& v : carried) in.push_back(v);
    GBX_ASSIGN_OR_RETURN(std::vector<RuntimeValue> out, ctx.run_subgraph(*body, std::move(in)));
    if (out.size() != body->outputs.size())
      return ctx.error(ErrorCode::INTERNAL, "body returned ", out.size(), " values, expected ", body->outputs.size());
    if (use_cond_out) {
      GBX_ASSIGN_OR_RETURN(cond, read_bool_scalar(ctx, out[0], "body condition output"));
    }
    for (size_t i = 0; i < n_carried; ++i) carried[i] = std::move(out[1 + i]);
    for (size_t k = 0; k < n_scan; ++k) {
      RuntimeValue& v = out[1 + n_carried + k];
      if (!v.is_tensor())
        return ctx.error(ErrorCode::INVALID_ARGUMENT, "scan output ", k, " of iteration ", it, " is not a tensor");
      scans[k].push_back(std::move(v.tensor()));
    }
  }
  for (size_t i = 0; i < n_carried && i < ctx.num_outputs(); ++i) ctx.set_output_value(i, std::move(carried[i]));
  for (size_t k = 0; k < n_scan && n_carried + k < ctx.num_outputs(); ++k) {
    if (!ctx.wants_output(n_carried + k)) continue;
    if (scans[k].empty()) {
      GBX_ASSIGN_OR_RETURN(Tensor e, empty_scan_output(body->outputs[1 + n_carried + k], 0));
      ctx.set_output(n_carried + k, std::move(e));
      continue;
    }
    auto st = stack_axis(scans[k], 0);
    if (!st.ok()) return ctx.error(st.status().code(), st.status().message());
    ctx.set_output(n_carried + k, std::move(st).value());
  }
  return Status::OK();
}

// ---- Scan -----------------------------------------------------------------------------
// One Scan over states + scan inputs (no batch axis): the opset-9 semantics. `seq_len`
// limits the iterations (opset 8's sequence_lens); -1 means the full length.
Status scan_once(KernelContext& ctx, const Graph& body, std::vector<RuntimeValue> states, const std::vector<Tensor>& xs,
                 const std::vector<int64_t>& in_axes, const std::vector<int64_t>& in_dirs,
                 const std::vector<int64_t>& out_axes, const std::vector<int64_t>& out_dirs, int64_t seq_len,
                 std::vector<RuntimeValue>& states_out, std::vector<Tensor>& scan_out) {
  const size_t n_state = states.size(), m = xs.size();
  const size_t k_out = body.outputs.size() - n_state;
  int64_t len = -1;
  for (size_t j = 0; j < m; ++j) {
    int64_t l = xs[j].dim(static_cast<size_t>(in_axes[j]));
    if (len >= 0 && l != len)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "scan inputs have different lengths along their scan axes: ", len,
                       " vs ", l, " (input ", describe(xs[j]), ")");
    len = l;
  }
  if (len < 0) len = 0;
  const int64_t iters = seq_len >= 0 ? std::min(seq_len, len) : len;
  std::vector<std::vector<Tensor>> parts(k_out);
  for (int64_t t = 0; t < iters; ++t) {
    if (Status stop = check_run_stop(); !stop.ok()) return stop.with_context("iteration " + std::to_string(t) + ": ");
    std::vector<RuntimeValue> in = states;
    for (size_t j = 0; j < m; ++j) {
      int64_t idx = in_dirs[j] ? len - 1 - t : t;
      GBX_ASSIGN_OR_RETURN(Tensor s, slice_axis(xs[j], static_cast<size_t>(in_axes[j]), idx));
      in.emplace_back(std::move(s));
    }
    GBX_ASSIGN_OR_RETURN(std::vector<RuntimeValue> out, ctx.run_subgraph(body, std::move(in)));
    if (out.size() != body.outputs.size())
      return ctx.error(ErrorCode::INTERNAL, "body returned ", out.size(), " values, expected ", body.outputs.size());
    for (size_t i = 0; i < n_state; ++i) states[i] = std::move(out[i]);
    for (size_t k = 0; k < k_out; ++k) {
      if (!out[n_state + k].is_tensor())
        return ctx.error(ErrorCode::INVALID_ARGUMENT, "scan output ", k, " is not a tensor");
      parts[k].push_back(std::move(out[n_state + k].tensor()));
    }
  }
  states_out = std::move(states);
  scan_out.clear();
  for (size_t k = 0; k < k_out; ++k) {
    const size_t axis = static_cast<size_t>(out_axes[k]);
    if (parts[k].empty()) {
      GBX_ASSIGN_OR_RETURN(Tensor e, empty_scan_output(body.outputs[n_state + k], axis));
      scan_out.push_back(std::move(e));
      continue;
    }
    if (out_dirs[k]) std::reverse(parts[k].begin(), parts[k].end());
    auto st = stack_axis(parts[k], axis);
    if (!st.ok()) return ctx.error(st.status().code(), st.status().message());
    scan_out.push_back(std::move(st).value());
  }
  return Status::OK();
}

// Reads a per-input axis/direction attribute, normalizing negative axes against ranks.
Result<std::vector<int64_t>> axes_attr(const KernelContext& ctx, const char* name, size_t n,
                                       const std::vector<int64_t>& ranks, bool is_axis) {
  std::vector<int64_t> v = ctx.attr_ints(name, std::vector<int64_t>(n, 0));
  if (v.size() != n) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, name, " has ", v.size(), " values, expected ", n);
  for (size_t i = 0; i < n; ++i) {
    if (!is_axis) {
      if (v[i] != 0 && v[i] != 1)
        return ctx.error(ErrorCode::ATTRIBUTE_INVALID, name, "[", i, "] = ", v[i], " must be 0 or 1");
      continue;
    }
    int64_t r = ranks[i];
    if (v[i] < 0) v[i] += r;
    if (v[i] < 0 || v[i] >= std::max<int64_t>(r, 1))
      return ctx.error(ErrorCode::ATTRIBUTE_INVALID, name, "[", i, "] is out of range for rank ", r);
  }
  return v;
}

Status scan_kernel(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(check_runner(ctx));
  const Graph* body = graph_attr(ctx, "body");
  if (!body) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "missing graph attribute body");
  const bool v8 = ctx.opset() < 9;
  const size_t first = v8 ? 1 : 0;  // opset 8 starts with sequence_lens
  const int64_t m_attr = ctx.attr_int("num_scan_inputs", -1);
  if (m_attr < 1 || static_cast<size_t>(m_attr) + first > ctx.num_inputs())
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "num_scan_inputs = ", m_attr, " does not fit ", ctx.num_inputs(),
                     " inputs");
  const size_t m = static_cast<size_t>(m_attr);
  const size_t n_state = ctx.num_inputs() - first - m;
  if (body->inputs.size() != n_state + m || body->outputs.size() < n_state)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "body has ", body->inputs.size(), " inputs and ", body->outputs.size(),
                     " outputs for ", n_state, " states and ", m, " scan inputs");
  const size_t k_out = body->outputs.size() - n_state;
  for (size_t i = first; i < ctx.num_inputs(); ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  std::vector<Tensor> xs;
  for (size_t j = 0; j < m; ++j) xs.push_back(ctx.input(first + n_state + j));

  if (!v8) {
    std::vector<int64_t> in_ranks, out_ranks;
    for (auto& x : xs) in_ranks.push_back(static_cast<int64_t>(x.rank()));
    for (size_t k = 0; k < k_out; ++k) {
      const Value* v = body->outputs[n_state + k];
      out_ranks.push_back(v && v->type.shape.ranked ? static_cast<int64_t>(v->type.shape.rank()) + 1 : 1 << 20);
    }
    GBX_ASSIGN_OR_RETURN(auto in_axes, axes_attr(ctx, "scan_input_axes", m, in_ranks, true));
    GBX_ASSIGN_OR_RETURN(auto in_dirs, axes_attr(ctx, "scan_input_directions", m, in_ranks, false));
    GBX_ASSIGN_OR_RETURN(auto out_axes, axes_attr(ctx, "scan_output_axes", k_out, out_ranks, true));
    GBX_ASSIGN_OR_RETURN(auto out_dirs, axes_attr(ctx, "scan_output_directions", k_out, out_ranks, false));
    std::vector<RuntimeValue> states;
    for (size_t i = 0; i < n_state; ++i) states.push_back(ctx.input_value(i));
    std::vector<RuntimeValue> states_out;
    std::vector<Tensor> scan_out;
    GBX_RETURN_IF_ERROR(
        scan_once(ctx, *body, states, xs, in_axes, in_dirs, out_axes, out_dirs, -1, states_out, scan_out));
    for (size_t i = 0; i < n_state; ++i) ctx.set_output_value(i, std::move(states_out[i]));
    for (size_t k = 0; k < k_out; ++k) ctx.set_output(n_state + k, std::move(scan_out[k]));
    return Status::OK();
  }

  // Opset 8: every state and scan input has a leading batch axis; scan inputs scan axis 1.
  const std::vector<int64_t> in_dirs = ctx.attr_ints("directions", std::vector<int64_t>(m, 0));
  if (in_dirs.size() != m) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "directions needs ", m, " values");
  int64_t batch = -1;
  for (size_t i = first; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    if (t.rank() < 1 || (batch >= 0 && t.dim(0) != batch) || (i >= first + n_state && t.rank() < 2))
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "input ", i, " ", describe(t), " does not have the batch axis");
    batch = t.dim(0);
  }
  std::vector<int64_t> seq_lens;
  if (ctx.has_input(0)) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
    for (int64_t b = 0; b < ctx.input(0).numel(); ++b)
      seq_lens.push_back(static_cast<int64_t>(ctx.input(0).at_double(b)));
    if (static_cast<int64_t>(seq_lens.size()) != batch)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "sequence_lens has ", seq_lens.size(), " values for batch ", batch);
  }
  std::vector<std::vector<Tensor>> per_out(n_state + k_out);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<RuntimeValue> states;
    for (size_t i = 0; i < n_state; ++i) {
      GBX_ASSIGN_OR_RETURN(Tensor s, slice_axis(ctx.input(first + i), 0, b));
      states.emplace_back(std::move(s));
    }
    std::vector<Tensor> bx;
    for (auto& x : xs) {
      GBX_ASSIGN_OR_RETURN(Tensor s, slice_axis(x, 0, b));
      bx.push_back(std::move(s));
    }
    std::vector<RuntimeValue> states_out;
    std::vector<Tensor> scan_out;
    GBX_RETURN_IF_ERROR(scan_once(ctx, *body, states, bx, std::vector<int64_t>(m, 0), in_dirs,
                                  std::vector<int64_t>(k_out, 0), std::vector<int64_t>(k_out, 0),
                                  seq_lens.empty() ? -1 : seq_lens[static_cast<size_t>(b)], states_out, scan_out));
    for (size_t i = 0; i < n_state; ++i) {
      if (!states_out[i].is_tensor()) return ctx.error(ErrorCode::INVALID_ARGUMENT, "state ", i, " is not a tensor");
      per_out[i].push_back(states_out[i].tensor());
    }
    for (size_t k = 0; k < k_out; ++k) per_out[n_state + k].push_back(std::move(scan_out[k]));
  }
  for (size_t o = 0; o < per_out.size(); ++o) {
    if (per_out[o].empty()) continue;
    auto st = stack_axis(per_out[o], 0);
    if (!st.ok()) return ctx.error(st.status().code(), st.status().message());
    ctx.set_output(o, std::move(st).value());
  }
  return Status::OK();
}

// ---- SequenceMap ----------------------------------------------------------------------
Status sequence_map_kernel(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(check_runner(ctx));
  const Graph* body = graph_attr(ctx, "body");
  if (!body) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "missing graph attribute body");
  if (!ctx.has_input(0) || !ctx.input_value(0).is_sequence())
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "input 0 must be a sequence");
  const size_t n = ctx.input_value(0).sequence().tensors.size();
  for (size_t j = 1; j < ctx.num_inputs(); ++j) {
    const RuntimeValue& v = ctx.input_value(j);
    if (v.is_sequence() && v.sequence().tensors.size() != n)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "sequence input ", j, " has ", v.sequence().tensors.size(),
                       " elements, input 0 has ", n);
    if (v.is_none()) return ctx.error(ErrorCode::INVALID_ARGUMENT, "input ", j, " is missing");
  }
  if (body->inputs.size() != ctx.num_inputs())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "body takes ", body->inputs.size(), " inputs, node has ",
                     ctx.num_inputs());
  std::vector<TensorSequence> outs(body->outputs.size());
  for (size_t k = 0; k < outs.size(); ++k) {
    const Value* v = body->outputs[k];
    outs[k].elem_dtype = v ? v->type.dtype : DType::Undefined;
  }
  for (size_t i = 0; i < n; ++i) {
    GBX_RETURN_IF_ERROR(check_run_stop());
    std::vector<RuntimeValue> in;
    for (size_t j = 0; j < ctx.num_inputs(); ++j) {
      const RuntimeValue& v = ctx.input_value(j);
      in.push_back(v.is_sequence() ? RuntimeValue(v.sequence().tensors[i]) : v);
    }
    GBX_ASSIGN_OR_RETURN(std::vector<RuntimeValue> out, ctx.run_subgraph(*body, std::move(in)));
    if (out.size() != outs.size())
      return ctx.error(ErrorCode::INTERNAL, "body returned ", out.size(), " values, expected ", outs.size());
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!out[k].is_tensor()) return ctx.error(ErrorCode::INVALID_ARGUMENT, "body output ", k, " is not a tensor");
      outs[k].elem_dtype = out[k].tensor().dtype();
      outs[k].tensors.push_back(std::move(out[k].tensor()));
    }
  }
  for (size_t k = 0; k < outs.size() && k < ctx.num_outputs(); ++k) ctx.set_output_value(k, std::move(outs[k]));
  return Status::OK();
}

}  // namespace

void register_control_flow_kernels() {
  static const bool done = [] {
    auto& r = KernelRegistry::global();
    r.add({"", "If", 1, 18, kEngineRef, {}, if_kernel});
    r.add({"", "Loop", 1, 18, kEngineRef, {}, loop_kernel});
    r.add({"", "Scan", 8, 18, kEngineRef, {}, scan_kernel});
    r.add({"", "SequenceMap", 17, 18, kEngineRef, {}, sequence_map_kernel});
    return true;
  }();
  (void)done;
}

}  // namespace gearbox
