// Plugin ops: their registration and the kernel, predicate and cost functions that call the
// plugin's C functions. See plugin_ops.h.
#include "kernels/plugin_ops.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>

#include "base/strings.h"
#include "gearbox/plugin.h"
#include "kernels/kernel_support.h"
#include "kernels/op_descriptor.h"
#include "kernels/plugin_crash_guard.h"

namespace gearbox {
namespace {

constexpr int kAnyOpset = 1 << 30;
// Bytes after each output buffer that the kernel must leave as they are: a write there is
// an overrun past the size its shape function promised.
constexpr size_t kGuardBytes = 64;
constexpr uint8_t kGuardByte = 0xA5;

struct PluginOp {
  std::string domain, op_type;  // the KernelDef's and descriptor's views point here
  int since = 1, end = kAnyOpset;
  int num_inputs = 0, num_outputs = 0;
  std::vector<std::vector<DType>> input_dtypes, output_dtypes;  // empty set: any
  gbx_plugin_op fns{};
  size_t plugin = 0;  // index in State::plugins
};

struct State {
  std::mutex mu;
  std::deque<PluginOp> ops;        // stable addresses (KernelDef string views)
  std::deque<PluginInfo> plugins;  // stable addresses (KernelDef engine views)
};

State& state() {
  static State s;
  return s;
}

std::string qualified(std::string_view domain, std::string_view op_type) {
  return domain.empty() ? std::string(op_type) : std::string(domain) + "." + std::string(op_type);
}

std::string opset_range(int since, int end) {
  return end >= kAnyOpset ? std::to_string(since) + "+" : std::to_string(since) + "-" + std::to_string(end);
}

// The op serving (domain, op_type) at opset and its plugin; null when none.
const PluginOp* find_op(std::string_view domain, std::string_view op_type, int opset, PluginInfo* plugin = nullptr) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (domain == "ai.onnx") domain = "";
  for (const PluginOp& op : s.ops)
    if (op.op_type == op_type && op.domain == domain && opset >= op.since && opset <= op.end) {
      if (plugin) *plugin = s.plugins[op.plugin];
      return &op;
    }
  return nullptr;
}

bool valid_dtype(int32_t d) { return d > 0 && d != static_cast<int32_t>(DType::String) && dtype_is_known(d); }

// A 0-terminated dtype list (NULL: any).
Result<std::vector<DType>> dtype_list(const int32_t* list, const std::string& what) {
  std::vector<DType> out;
  if (!list) return out;
  for (int i = 0; list[i] != GBX_PLUGIN_ANY; ++i) {
    if (i >= 64) return make_error(ErrorCode::PLUGIN_LOAD_FAILED, what, "'s dtype list has no 0 at its end");
    if (!valid_dtype(list[i]))
      return make_error(ErrorCode::PLUGIN_LOAD_FAILED, what, " lists dtype ", list[i],
                        ", which is no tensor dtype gearbox has (GBX_PLUGIN_F32, ...)");
    out.push_back(static_cast<DType>(list[i]));
  }
  return out;
}

bool in_set(const std::vector<DType>& set, DType d) {
  return set.empty() || std::find(set.begin(), set.end(), d) != set.end();
}

std::string dtype_names(const std::vector<DType>& set) {
  std::vector<std::string> names;
  for (DType d : set) names.emplace_back(dtype_name(d));
  return join(names);
}

// ---- what a plugin's function sees of the node --------------------------------------

struct Host {
  const OpInfo* op;
  std::string name, domain, op_type;  // NUL-terminated copies for the plugin
  std::string error;
};

const Attribute* find_attr(const gbx_plugin_node* node, const char* name, AttrType type) {
  const Host* h = static_cast<const Host*>(node->host);
  if (!h || !h->op->attrs || !name) return nullptr;
  auto it = h->op->attrs->find(std::string_view(name));
  return it != h->op->attrs->end() && it->second.type == type ? &it->second : nullptr;
}
int32_t attr_int(const gbx_plugin_node* node, const char* name, int64_t* out) {
  const Attribute* a = find_attr(node, name, AttrType::Int);
  if (a && out) *out = a->i;
  return a ? 1 : 0;
}
int32_t attr_float(const gbx_plugin_node* node, const char* name, float* out) {
  const Attribute* a = find_attr(node, name, AttrType::Float);
  if (a && out) *out = a->f;
  return a ? 1 : 0;
}
int32_t attr_string(const gbx_plugin_node* node, const char* name, const char** out) {
  const Attribute* a = find_attr(node, name, AttrType::String);
  if (a && out) *out = a->s.c_str();
  return a ? 1 : 0;
}
void set_error(const gbx_plugin_node* node, const char* message) {
  if (node && node->host && message) static_cast<Host*>(node->host)->error = message;
}

struct NodeView {
  Host host;
  gbx_plugin_node node{};
  NodeView(const OpInfo& op, size_t num_inputs, size_t num_outputs) {
    host.op = &op;
    host.name = std::string(op.name);
    host.domain = std::string(op.domain);
    host.op_type = std::string(op.op_type);
    node.name = host.name.c_str();
    node.domain = host.domain.c_str();
    node.op_type = host.op_type.c_str();
    node.opset = op.opset;
    node.num_inputs = static_cast<int32_t>(num_inputs);
    node.num_outputs = static_cast<int32_t>(num_outputs);
    node.host = &host;
    node.attr_int = attr_int;
    node.attr_float = attr_float;
    node.attr_string = attr_string;
    node.set_error = set_error;
  }
  NodeView(const NodeView&) = delete;
  NodeView& operator=(const NodeView&) = delete;
  std::string message() const { return host.error.empty() ? std::string("(no message)") : host.error; }
};

gbx_plugin_shape shape_of(DType dtype, const Dims& dims) {
  gbx_plugin_shape s{};
  s.dtype = static_cast<int32_t>(dtype);
  s.rank = static_cast<int32_t>(dims.size());
  for (size_t i = 0; i < dims.size() && i < GBX_PLUGIN_MAX_RANK; ++i) s.dims[i] = dims[i];
  return s;
}

std::string plugin_named(const PluginInfo& p) { return "plugin '" + p.name + "' (" + p.path + ")"; }

// ---- the predicate ------------------------------------------------------------------

Verdict plugin_supports(const KernelQuery& q) {
  PluginInfo plugin;
  const PluginOp* op = find_op(q.op().domain, q.op().op_type, q.opset(), &plugin);
  if (!op) return refuse("no plugin op");
  if (q.num_inputs() != static_cast<size_t>(op->num_inputs))
    return refuse(plugin.engine + " takes " + std::to_string(op->num_inputs) + " inputs, the node has " +
                  std::to_string(q.num_inputs()));
  if (q.num_outputs() > static_cast<size_t>(op->num_outputs))
    return refuse(plugin.engine + " gives " + std::to_string(op->num_outputs) + " outputs, the node wants " +
                  std::to_string(q.num_outputs()));
  bool dims_known = true;
  for (size_t i = 0; i < q.num_inputs(); ++i) {
    if (!q.has_input(i)) return refuse(plugin.engine + ": input " + std::to_string(i) + " is missing");
    if (!q.is_tensor(i)) return refuse(plugin.engine + ": input " + std::to_string(i) + " is not a tensor");
    const DType dt = q.dtype(i);
    if (dt != DType::Undefined && !in_set(op->input_dtypes[i], dt))
      return refuse("not for dtype " + std::string(dtype_name(dt)) + " (input " + std::to_string(i) + "; " +
                    plugin.engine + " takes " + dtype_names(op->input_dtypes[i]) + ")");
    if (dt == DType::Undefined || !q.dims(i) || q.dims(i)->size() > GBX_PLUGIN_MAX_RANK) dims_known = false;
  }
  if (!op->fns.supports) return accept();
  if (!dims_known) return later();
  std::vector<gbx_plugin_shape> shapes;
  for (size_t i = 0; i < q.num_inputs(); ++i) shapes.push_back(shape_of(q.dtype(i), *q.dims(i)));
  NodeView view(q.op(), q.num_inputs(), static_cast<size_t>(op->num_outputs));
  if (op->fns.supports(&view.node, shapes.data(), static_cast<int32_t>(shapes.size())) == 1) return accept();
  return refuse(plugin.engine + " refuses: " + view.message());
}

// ---- the cost -----------------------------------------------------------------------

// The plugin's cost for one call; {-1, -1} when it has none.
gbx_plugin_cost plugin_cost(const KernelContext& ctx, const std::vector<RuntimeValue>& outs) {
  gbx_plugin_cost cost{-1, -1};
  const PluginOp* op = find_op(ctx.op().domain, ctx.op().op_type, ctx.opset());
  if (!op || !op->fns.cost) return cost;
  std::vector<gbx_plugin_shape> in, out;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.input_value(i).is_tensor())
      in.push_back(shape_of(ctx.input(i).dtype(), ctx.input(i).dims()));
  for (const RuntimeValue& v : outs)
    if (v.is_tensor()) out.push_back(shape_of(v.tensor().dtype(), v.tensor().dims()));
  NodeView view(ctx.op(), in.size(), out.size());
  op->fns.cost(&view.node, in.data(), static_cast<int32_t>(in.size()), out.data(), static_cast<int32_t>(out.size()),
               &cost);
  return cost;
}

double plugin_flops(const KernelContext& ctx, const std::vector<RuntimeValue>& outs) {
  const double f = plugin_cost(ctx, outs).flops;
  if (f >= 0) return f;
  double n = 0;  // the default: one FLOP per output element
  for (const RuntimeValue& v : outs)
    if (v.is_tensor()) n += static_cast<double>(v.tensor().numel());
  return n;
}

double plugin_bytes(const KernelContext& ctx, const std::vector<RuntimeValue>& outs) {
  return plugin_cost(ctx, outs).bytes;
}

// ---- registration -------------------------------------------------------------------

bool valid_plugin_name(const char* name) {
  if (!name || !*name) return false;
  for (const char* c = name; *c; ++c)
    if (!std::isalnum(static_cast<unsigned char>(*c)) && *c != '_' && *c != '-') return false;
  return true;
}

// The op entry `i` of `plugin` checked and converted; PLUGIN_LOAD_FAILED naming what is wrong.
Result<PluginOp> convert_op(const gbx_plugin& plugin, int32_t i, const std::string& where) {
  const gbx_plugin_op& c = plugin.ops[i];
  const std::string what = where + ": op " + std::to_string(i);
  if (!c.op_type || !*c.op_type) return make_error(ErrorCode::PLUGIN_LOAD_FAILED, what, " has no op_type");
  PluginOp op;
  op.domain = c.domain ? c.domain : "";
  if (op.domain == "ai.onnx") op.domain = "";
  op.op_type = c.op_type;
  const std::string name = where + ": op " + qualified(op.domain, op.op_type);
  if (c.since_version < 1 || (c.end_version != 0 && c.end_version < c.since_version))
    return make_error(ErrorCode::PLUGIN_LOAD_FAILED, name, " has opset range [", c.since_version, ", ", c.end_version,
                      "]: since_version must be >= 1 and end_version 0 (every later opset) or >= since_version");
  if (c.num_inputs < 0 || c.num_inputs > 64 || c.num_outputs < 1 || c.num_outputs > 64)
    return make_error(ErrorCode::PLUGIN_LOAD_FAILED, name, " declares ", c.num_inputs, " inputs and ", c.num_outputs,
                      " outputs: 0-64 inputs and 1-64 outputs");
  if (!c.shape || !c.kernel)
    return make_error(ErrorCode::PLUGIN_LOAD_FAILED, name, " lacks its ", !c.shape ? "shape" : "kernel",
                      " function (both are required)");
  op.since = c.since_version;
  op.end = c.end_version == 0 ? kAnyOpset : c.end_version;
  op.num_inputs = c.num_inputs;
  op.num_outputs = c.num_outputs;
  for (int32_t k = 0; k < c.num_inputs; ++k) {
    GBX_ASSIGN_OR_RETURN(std::vector<DType> set, dtype_list(c.input_dtypes ? c.input_dtypes[k] : nullptr,
                                                            name + " input " + std::to_string(k)));
    op.input_dtypes.push_back(std::move(set));
  }
  for (int32_t k = 0; k < c.num_outputs; ++k) {
    GBX_ASSIGN_OR_RETURN(std::vector<DType> set, dtype_list(c.output_dtypes ? c.output_dtypes[k] : nullptr,
                                                            name + " output " + std::to_string(k)));
    op.output_dtypes.push_back(std::move(set));
  }
  op.fns = c;
  return op;
}

bool overlaps(const PluginOp& a, const PluginOp& b) {
  return a.domain == b.domain && a.op_type == b.op_type && a.since <= b.end && b.since <= a.end;
}

// Everything about the descriptor that does not depend on what is loaded already: its name,
// version and op count, each op (convert_op), and no op listed twice for overlapping opsets.
Result<std::vector<PluginOp>> read_descriptor(const gbx_plugin& plugin, const std::string& where) {
  if (!valid_plugin_name(plugin.name))
    return make_error(ErrorCode::PLUGIN_LOAD_FAILED, where, ": its name '", plugin.name ? plugin.name : "(null)",
                      "' is not [A-Za-z0-9_-]+");
  if (!plugin.version)
    return make_error(ErrorCode::PLUGIN_LOAD_FAILED, where, ": its version is NULL (give a string such as \"1.0\")");
  if (plugin.num_ops < 1 || plugin.num_ops > kMaxPluginOps || !plugin.ops)
    return make_error(ErrorCode::PLUGIN_LOAD_FAILED, where, " lists ", plugin.num_ops, " ops",
                      plugin.ops ? "" : " (ops is NULL)", ": a plugin has 1 to ", kMaxPluginOps, " ops");
  std::vector<PluginOp> ops;
  for (int32_t i = 0; i < plugin.num_ops; ++i) {
    GBX_ASSIGN_OR_RETURN(PluginOp op, convert_op(plugin, i, where));
    ops.push_back(std::move(op));
  }
  for (size_t i = 0; i < ops.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (overlaps(ops[i], ops[j]))
        return make_error(ErrorCode::PLUGIN_OP_DUPLICATE, where, " lists op ", qualified(ops[i].domain, ops[i].op_type),
                          " twice for overlapping opsets");
  return ops;
}

}  // namespace

Status check_plugin_descriptor(const gbx_plugin& plugin, const std::string& path) {
  return read_descriptor(plugin, "plugin library '" + path + "'").status();
}

Status register_plugin_ops(const gbx_plugin& plugin, PluginInfo* info) {
  const std::string where = "plugin library '" + info->path + "'";
  GBX_ASSIGN_OR_RETURN(std::vector<PluginOp> ops, read_descriptor(plugin, where));
  const auto& registry = KernelRegistry::global().all();
  if (registry.capacity() - registry.size() < ops.size())
    return make_error(ErrorCode::PLUGIN_LOAD_FAILED, where, ": its ", ops.size(),
                      " ops do not fit in the kernel registry's room (", registry.capacity() - registry.size(),
                      " left)");

  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  for (size_t i = 0; i < ops.size(); ++i) {
    for (const PluginOp& old : s.ops)
      if (overlaps(ops[i], old))
        return make_error(ErrorCode::PLUGIN_OP_DUPLICATE, "op ", qualified(ops[i].domain, ops[i].op_type), " (opset ",
                          opset_range(ops[i].since, ops[i].end), ") of plugin '", plugin.name, "' (", info->path,
                          ") is already registered by plugin '", s.plugins[old.plugin].name, "' (",
                          s.plugins[old.plugin].path, ", opset ", opset_range(old.since, old.end), ")");
  }
  for (const PluginInfo& p : s.plugins)
    if (p.name == plugin.name)
      return make_error(ErrorCode::PLUGIN_LOAD_FAILED, where, ": a plugin named '", p.name, "' is already loaded from ",
                        p.path, "; plugin names must differ (the engine is plugin.<name>)");

  static const bool support_declared =
      KernelSupportTable::global().add(plugin_kernel, KernelSupport{.supports = plugin_supports});
  (void)support_declared;

  info->engine = "plugin." + std::string(plugin.name);
  info->ops.clear();
  for (const PluginOp& op : ops)
    info->ops.push_back(qualified(op.domain, op.op_type) + " (opset " + opset_range(op.since, op.end) + ")");
  s.plugins.push_back(*info);
  const PluginInfo& stored = s.plugins.back();
  for (PluginOp& op : ops) {
    op.plugin = s.plugins.size() - 1;
    s.ops.push_back(std::move(op));
    const PluginOp& o = s.ops.back();
    KernelRegistry::global().add(KernelDef{o.domain, o.op_type, o.since, o.end, stored.engine, {}, plugin_kernel, 0});
    // A plugin may implement an op gearbox describes already (an ONNX op it lacks a kernel
    // for at some opset): that description stays.
    if (!find_op_descriptor(o.domain, o.op_type)) {
      OpDescriptor d;
      d.domain = o.domain;
      d.op_type = o.op_type;
      d.kind = OpKind::Opaque;
      d.flops = plugin_flops;
      d.bytes = plugin_bytes;
      (void)add_op_descriptor(std::move(d));  // only fails for a described op, excluded above
    }
  }
  return Status::OK();
}

std::vector<PluginInfo> registered_plugins() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return {s.plugins.begin(), s.plugins.end()};
}

Status plugin_kernel(KernelContext& ctx) {
  PluginInfo plugin;
  const PluginOp* op = find_op(ctx.op().domain, ctx.op().op_type, ctx.opset(), &plugin);
  if (!op) return ctx.error(ErrorCode::INTERNAL, "no plugin op is registered for this node");
  const size_t n_in = static_cast<size_t>(op->num_inputs), n_out = static_cast<size_t>(op->num_outputs);
  // The predicate (plugin_supports) admitted the node: every input is a tensor of a listed dtype.
  std::vector<gbx_plugin_shape> in_shapes;
  std::vector<gbx_plugin_tensor> inputs;
  for (size_t i = 0; i < n_in; ++i) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
    const Tensor& t = ctx.input(i);
    if (t.rank() > GBX_PLUGIN_MAX_RANK)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "input ", i, " has rank ", t.rank(),
                       "; plugin ops take rank <= ", GBX_PLUGIN_MAX_RANK);
    in_shapes.push_back(shape_of(t.dtype(), t.dims()));
    inputs.push_back(
        {static_cast<int32_t>(t.dtype()), static_cast<int32_t>(t.rank()), t.dims().data(), const_cast<void*>(t.raw())});
  }

  NodeView view(ctx.op(), n_in, n_out);
  std::vector<gbx_plugin_shape> out_shapes(n_out);
  for (gbx_plugin_shape& s : out_shapes) s = gbx_plugin_shape{};
  const int32_t rc = op->fns.shape(&view.node, in_shapes.data(), static_cast<int32_t>(n_in), out_shapes.data(),
                                   static_cast<int32_t>(n_out));
  if (rc != GBX_PLUGIN_OK)
    return ctx.error(ErrorCode::PLUGIN_SHAPE_FAILED, "the shape function of ", plugin_named(plugin), " returned error ",
                     rc, ": ", view.message());

  // Outputs as promised, each followed by a guard zone the kernel must not touch.
  struct Out {
    std::shared_ptr<Tensor> storage;
    Dims dims;
    DType dtype;
    size_t bytes;
  };
  std::vector<Out> outs(n_out);
  std::vector<gbx_plugin_tensor> outputs(n_out);
  for (size_t i = 0; i < n_out; ++i) {
    const gbx_plugin_shape& s = out_shapes[i];
    if (s.rank < 0 || s.rank > GBX_PLUGIN_MAX_RANK)
      return ctx.error(ErrorCode::PLUGIN_SHAPE_FAILED, "the shape function of ", plugin_named(plugin), " gave output ",
                       i, " rank ", s.rank, " (0 to ", GBX_PLUGIN_MAX_RANK, ")");
    if (!valid_dtype(s.dtype) || !in_set(op->output_dtypes[i], static_cast<DType>(s.dtype)))
      return ctx.error(
          ErrorCode::PLUGIN_SHAPE_FAILED, "the shape function of ", plugin_named(plugin), " gave output ", i, " dtype ",
          s.dtype, ", which is not ",
          op->output_dtypes[i].empty() ? std::string("a tensor dtype") : dtype_names(op->output_dtypes[i]));
    Out& o = outs[i];
    o.dtype = static_cast<DType>(s.dtype);
    for (int32_t d = 0; d < s.rank; ++d) {
      if (s.dims[d] < 0)
        return ctx.error(ErrorCode::PLUGIN_SHAPE_FAILED, "the shape function of ", plugin_named(plugin),
                         " gave output ", i, " dim ", d, " = ", s.dims[d], " (dims are >= 0)");
      o.dims.push_back(s.dims[d]);
    }
    const int64_t n = numel(o.dims);
    if (n < 0 || n > (int64_t(1) << 40))
      return ctx.error(ErrorCode::PLUGIN_SHAPE_FAILED, "the shape function of ", plugin_named(plugin), " gave output ",
                       i, " dims ", to_string(o.dims), ", too many elements");
    o.bytes = static_cast<size_t>(n) * dtype_size(o.dtype);
    GBX_ASSIGN_OR_RETURN(Tensor buf,
                         Tensor::allocate_uninitialized(DType::U8, {static_cast<int64_t>(o.bytes + kGuardBytes)}));
    o.storage = std::make_shared<Tensor>(std::move(buf));
    auto* bytes = static_cast<uint8_t*>(o.storage->mutable_raw());
    std::memset(bytes + o.bytes, kGuardByte, kGuardBytes);
    outputs[i] = {s.dtype, s.rank, o.dims.data(), bytes};
  }

  const std::vector<gbx_plugin_tensor> promised = outputs;
  int32_t krc = GBX_PLUGIN_ERROR;
  {
    // A fatal signal in the kernel is reported as this plugin's (PLUGIN_KERNEL_CRASHED).
    const PluginKernelScope crash_scope(view.node.name, view.node.op_type, plugin.name.c_str(), plugin.path.c_str());
    krc = op->fns.kernel(&view.node, inputs.data(), static_cast<int32_t>(n_in), outputs.data(),
                         static_cast<int32_t>(n_out));
  }
  if (krc != GBX_PLUGIN_OK)
    return ctx.error(ErrorCode::PLUGIN_KERNEL_FAILED, "the kernel of ", plugin_named(plugin), " returned error ", krc,
                     ": ", view.message());

  for (size_t i = 0; i < n_out; ++i) {
    const Out& o = outs[i];
    const gbx_plugin_tensor& got = outputs[i];
    const gbx_plugin_tensor& want = promised[i];
    if (got.dtype != want.dtype || got.rank != want.rank || got.dims != want.dims || got.data != want.data ||
        !std::equal(o.dims.begin(), o.dims.end(), got.dims))
      return ctx.error(ErrorCode::PLUGIN_OUTPUT_MISMATCH, "the kernel of ", plugin_named(plugin), " changed output ", i,
                       "'s dtype, rank, dims or buffer; its shape function promised ", dtype_name(o.dtype), " ",
                       to_string(o.dims));
    const auto* guard = static_cast<const uint8_t*>(o.storage->raw()) + o.bytes;
    for (size_t b = 0; b < kGuardBytes; ++b)
      if (guard[b] != kGuardByte)
        return ctx.error(ErrorCode::PLUGIN_OUTPUT_MISMATCH, "the kernel of ", plugin_named(plugin),
                         " wrote past the end of output ", i, " (", dtype_name(o.dtype), " ", to_string(o.dims), ", ",
                         o.bytes, " bytes, as its shape function promised): a buffer overrun in the plugin");
    if (ctx.wants_output(i)) ctx.set_output(i, Tensor::borrow(o.dtype, o.dims, o.storage, o.storage->raw()));
  }
  return Status::OK();
}

}  // namespace gearbox
