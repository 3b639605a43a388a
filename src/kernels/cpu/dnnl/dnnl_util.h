// Shared plumbing of the cpu.dnnl engine (kernels on oneDNN): the process's engine and
// streams, memory descriptors from Tensor dims, a keyed primitive cache, a cache of weights
// reordered into a primitive's preferred layout, the mapping of fused activations onto
// oneDNN post-ops, and the fall-back to the reference kernel for configurations the oneDNN
// kernels do not handle (a kernel that returns an error does not fall back by itself).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <oneapi/dnnl/dnnl.hpp>

#include "base/tensor.h"
#include "kernels/kernel.h"

namespace gearbox {

inline constexpr std::string_view kEngineDnnl = "cpu.dnnl";

namespace dnnl_engine {

// One CPU engine per process.
dnnl::engine& cpu_engine();
// One in-order stream per thread: oneDNN streams are not meant to be shared by threads that
// execute concurrently (a session may run requests in parallel), and creating one is cheap.
dnnl::stream& thread_stream();

dnnl::memory::dims to_dims(const Dims& d);
// f32 row-major (plain) descriptor of these dims.
dnnl::memory::desc plain_md(const dnnl::memory::dims& d);

// Keyed LRU cache of primitives (with whatever they need at run time: descriptors, the
// reordered weights' descriptor). oneDNN also keeps its own primitive cache (default 1024
// entries), but creating the primitive_desc still runs implementation dispatch each time;
// this cache skips that too, keyed by a shape/attribute signature the kernel builds. Holds at
// most kPrimitiveCacheCapacity entries; thread-safe.
inline constexpr size_t kPrimitiveCacheCapacity = 512;
std::shared_ptr<void> primitive_cache_get(const std::string& key);
void primitive_cache_put(const std::string& key, std::shared_ptr<void> value);

template <typename T>
std::shared_ptr<T> cached(const std::string& key, const std::function<std::shared_ptr<T>()>& make) {
  if (auto v = primitive_cache_get(key)) return std::static_pointer_cast<T>(v);
  std::shared_ptr<T> made = make();
  primitive_cache_put(key, made);
  return made;
}

// Weights reordered from plain layout into `want` (a primitive's preferred layout). Keyed by
// (data pointer, dims, layout of `want`): initializers are stable tensors, so repeated runs
// reorder once. The entry keeps a shallow copy of the source tensor, so its buffer cannot be
// freed and its address reused by other data while the entry exists. Assumes the weight
// buffer is not rewritten in place between runs (true for initializers and for every tensor
// a kernel produces; a caller that mutates a borrowed buffer in place would see stale
// weights). LRU with kWeightCacheCapacity entries; thread-safe. When `want` equals the plain
// layout the tensor's own buffer is wrapped, without a copy or cache entry.
inline constexpr size_t kWeightCacheCapacity = 256;
dnnl::memory reordered_weights(const Tensor& w, const dnnl::memory::desc& plain, const dnnl::memory::desc& want);
// Number of reorders reordered_weights has performed (for tests: repeats must not add).
int64_t weight_reorder_count();
void clear_caches();

// Appends the fused activation named by the node's "activation"/"activation_params"
// attributes (see kernels/cpu/ref/fused_util.h) as eltwise post-ops. False when the name
// has no oneDNN equivalent (the caller falls back to the reference kernel).
bool append_activation(const KernelContext& ctx, dnnl::post_ops& po, std::string* sig);

// Runs the cpu.ref kernel of the node's own op on the same context.
Status run_ref(KernelContext& ctx);

}  // namespace dnnl_engine
}  // namespace gearbox
