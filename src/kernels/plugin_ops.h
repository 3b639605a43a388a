// The ops that custom-op plugins (include/gearbox/plugin.h) add, and the one kernel that runs
// them all: the bridge between gearbox's KernelContext and a plugin's plain-C functions.
//
// runtime/plugin_loader.cc loads a library and calls register_plugin_ops; from then on the op
// has a KernelDef on the engine "plugin.<name>", a KernelSupport (dtype lists and the plugin's
// supports predicate) and an op descriptor (kind Opaque, the plugin's cost). Every plugin op
// shares the kernel function plugin_kernel, which finds its op by the node's (domain, op type,
// opset): a plugin op is registered once, so that key names one.
//
// What plugin_kernel checks, so that a faulty plugin is reported as that plugin's fault rather
// than corrupting gearbox: the shape function's answer (rank, dims, dtype in the declared
// list), its error (PLUGIN_SHAPE_FAILED), the kernel's error (PLUGIN_KERNEL_FAILED), and after
// the kernel that the outputs keep the promised dims and that nothing was written past their
// end (a guard zone after each output buffer; PLUGIN_OUTPUT_MISMATCH). A plugin that crashes
// the process cannot be caught here.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/kernel.h"

// include/gearbox/plugin.h's descriptor (included by the .cc files that read it).
struct gbx_plugin;

namespace gearbox {

// One library's plugin, as loaded.
struct PluginInfo {
  std::string name;              // gbx_plugin::name
  std::string version;           // gbx_plugin::version
  std::string path;              // the library's canonical path
  std::string engine;            // "plugin.<name>"
  std::vector<std::string> ops;  // qualified op types with their opsets ("com.example.SwiGLU (opset 1+)")
};

// The most ops one plugin may list.
inline constexpr int kMaxPluginOps = 4096;

// Checks `plugin`'s descriptor on its own (name, version, op count, each op's names, opsets,
// input/output counts, dtype lists and functions, no op listed twice), as register_plugin_ops
// does first: PLUGIN_LOAD_FAILED or PLUGIN_OP_DUPLICATE naming what is wrong. Registers
// nothing. (The fuzz target fuzz/plugin_descriptor.cc drives it.)
Status check_plugin_descriptor(const gbx_plugin& plugin, const std::string& path);

// Registers every op of `plugin` (loaded from `info.path`): PLUGIN_OP_DUPLICATE when an op
// with an overlapping opset range is already registered by a plugin (both libraries named),
// PLUGIN_LOAD_FAILED for a malformed descriptor. All or nothing: on an error no op is registered.
// `info.engine` and `info.ops` are filled. Not safe concurrently with kernel look-ups of other
// threads: called while sessions are created (runtime/plugin_loader.h).
Status register_plugin_ops(const gbx_plugin& plugin, PluginInfo* info);

// The plugins whose ops are registered, in load order.
std::vector<PluginInfo> registered_plugins();

// The kernel of every plugin op.
Status plugin_kernel(KernelContext& ctx);

}  // namespace gearbox
