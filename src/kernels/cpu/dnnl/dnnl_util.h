// Shared plumbing of the cpu.dnnl engine (kernels on oneDNN): the process's engine and
// streams, memory descriptors from Tensor dims, a keyed primitive cache, a cache of weights
// reordered into a primitive's preferred layout, the mapping of fused activations onto
// oneDNN post-ops, and the fall-back to the reference kernel for configurations the oneDNN
// kernels do not handle (a kernel that returns an error does not fall back by itself).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "base/tensor.h"
#include "kernels/kernel.h"
#include "kernels/supports_util.h"

namespace gearbox {

inline constexpr std::string_view kEngineDnnl = "cpu.dnnl";

namespace dnnl_engine {

// One CPU engine per process.
dnnl::engine& cpu_engine();
// One in-order stream per thread: oneDNN streams are not meant to be shared by threads that
// execute concurrently (a session may run requests in parallel), and creating one is cheap.
dnnl::stream& thread_stream();

dnnl::memory::dims to_dims(const Dims& d);
// Row-major (plain) descriptor of these dims, f32 unless `type` says otherwise.
dnnl::memory::desc plain_md(const dnnl::memory::dims& d, dnnl::memory::data_type type = dnnl::memory::data_type::f32);

// Keyed LRU cache of primitives (with whatever they need at run time: descriptors, the
// reordered weights' descriptor). oneDNN also keeps its own primitive cache (default 1024
// entries), but creating the primitive_desc still runs implementation dispatch each time;
// this cache skips that too, keyed by a shape/attribute signature the kernel builds. Holds at
// most kPrimitiveCacheCapacity entries; thread-safe.
inline constexpr size_t kPrimitiveCacheCapacity = 512;
std::shared_ptr<void> primitive_cache_get(const std::string& key);
void primitive_cache_put(const std::string& key, std::shared_ptr<void> value);

template <typename T, typename Make>
std::shared_ptr<T> cached(const std::string& key, Make&& make) {
  if (auto v = primitive_cache_get(key)) return std::static_pointer_cast<T>(v);
  std::shared_ptr<T> made = make();
  primitive_cache_put(key, made);
  return made;
}

// A float in a cache key: the shortest text that reads back as the same value (std::to_string
// keeps 6 decimals, so 1e-7 and 2e-7 would share a key).
std::string key_float(float v);

// Weights reordered from plain layout into `want` (a primitive's preferred layout). When
// `constant` (the weight is an initializer: KernelContext::input_is_constant) the result is
// cached, keyed by (data pointer, dims, layouts), so repeated runs reorder once; the entry
// keeps a shallow copy of the source tensor, so its buffer cannot be freed and its address
// reused by other data while the entry exists. A weight computed at run time is reordered
// into a private buffer and not cached: it differs every run, and caching it would pin one
// dead buffer per run. LRU with kWeightCacheCapacity entries; thread-safe. When `want` equals
// the plain layout the tensor's own buffer is wrapped, without a copy or cache entry.
inline constexpr size_t kWeightCacheCapacity = 256;
dnnl::memory reordered_weights(const Tensor& w, const dnnl::memory::desc& plain, const dnnl::memory::desc& want,
                               bool constant);
// Reorders reordered_weights has performed, and weights it holds in its cache (for tests).
int64_t weight_reorder_count();
size_t weight_cache_size();
// A oneDNN memory for `md` (a scratchpad, a temporary blocked copy) over a buffer from the
// run's tensor allocator, held by `*holder` while the memory is in use: in a session that is
// the plan's recycled buffer pool, so a run costs no malloc and no fresh page faults (oneDNN's
// own allocation would mmap a large scratchpad anew on every run). Size 0: no buffer.
Result<dnnl::memory> pooled_memory(const dnnl::memory::desc& md, Tensor* holder);
// The same buffer without the memory object (for ExecArgs::Lease::bind); null for size 0.
Result<void*> pooled_buffer(const dnnl::memory::desc& md, Tensor* holder);

// The dnnl::memory arguments of one execution of a primitive, kept for the next execution:
// creating and destroying a dnnl::memory costs ~0.36 us (oneDNN allocates its objects with
// posix_memalign, which bypasses malloc's thread cache), re-pointing one with set_data_handle
// ~26 ns, and a convolution takes four or five. Each execution leases a set of its own (so
// concurrent runs of one primitive never share one) and returns it when the lease ends.
class ExecArgs {
 public:
  using Map = std::unordered_map<int, dnnl::memory>;
  class Lease {
   public:
    Lease(ExecArgs* owner, std::unique_ptr<Map> map) : owner_(owner), map_(std::move(map)) {}
    Lease(Lease&&) = default;
    ~Lease() {
      if (map_) owner_->give_back(std::move(map_));
    }
    // The argument `arg` as a memory of `md` over `data` (oneDNN reads the buffer only
    // where the primitive says so; the const_cast is oneDNN's void* interface).
    void bind(int arg, const dnnl::memory::desc& md, const void* data);
    void set(int arg, const dnnl::memory& m) { (*map_)[arg] = m; }
    const Map& args() const { return *map_; }

   private:
    ExecArgs* owner_;
    std::unique_ptr<Map> map_;
  };

  Lease lease();

 private:
  void give_back(std::unique_ptr<Map> map);
  std::mutex mu_;
  std::vector<std::unique_ptr<Map>> free_;
};

// The layouts of a convolution-like primitive (Conv, ConvTranspose): as the tensors lie
// (plain: NCHW, NHWC, ONNX's weight order; in their stored dtype, bf16 for a value the
// precision pass stores in bf16) and as the primitive wants them; and its execution
// arguments, kept between runs.
struct ConvLayouts {
  dnnl::memory::desc src_plain, wei_plain, dst_plain, bias_plain;
  dnnl::memory::desc src_md, wei_md, dst_md, scratch_md;
  // Z (the sum post-op's addend) as it lies, where its dtype differs from Y's; zero: as Y.
  dnnl::memory::desc z_plain;
  mutable ExecArgs exec_args;
};
// Runs such a primitive into y: X reordered into the primitive's source layout where it
// differs (in layout or dtype: a conversion), W through reordered_weights (`w_constant`:
// cached), the optional bias, Z (the sum post-op's addend; null: none) placed in the
// destination first unless `z_in_y` (y already is Z's buffer), the result reordered out into
// y. Scratchpad and temporaries: pooled_buffer; the argument memory objects: io.exec_args.
// oneDNN errors are thrown (dnnl::error), allocation errors returned.
Status execute_conv_like(const dnnl::primitive& prim, const ConvLayouts& io, const Tensor& x, const Tensor& w,
                         bool w_constant, const Tensor* b, const Tensor* z, bool z_in_y, Tensor& y);
// The same with W already in the primitive's layout (io.wei_md).
Status execute_conv_like(const dnnl::primitive& prim, const ConvLayouts& io, const Tensor& x, const dnnl::memory& wei,
                         const Tensor* b, const Tensor* z, bool z_in_y, Tensor& y);

// Times a convolution ran as oneDNN's Winograd algorithm (conv.cc), for the same purpose.
int64_t winograd_conv_runs();
// Whether oneDNN has a Winograd convolution on this CPU (AVX-512 in oneDNN 2.x); when it has
// none, every Winograd candidate runs the direct convolution.
bool winograd_available();
// Times a convolution reused what its node kept from an earlier run (conv.cc ConvNodeState).
int64_t conv_state_reuses();
// Times a strided 1x1 NhwcConv ran at unit stride on its gathered pixels (conv.cc strided_1x1).
int64_t strided_1x1_subsamples();

// True when the node was lowered to bf16 (KernelContext::compute_dtype) and the session's
// CPU computes bf16 (KernelOptions::bf16_arithmetic): the kernel then runs a bf16 primitive
// with fp32 accumulation; otherwise it computes in fp32.
bool computes_bf16(const KernelContext& ctx);

// Appends the fused activation named by the node's "activation"/"activation_params"
// attributes (see kernels/cpu/ref/fused_util.h) as eltwise post-ops. False when the name
// has no oneDNN equivalent (the kernels' supports() refuse such a node: has_dnnl_activation).
bool append_activation(const KernelContext& ctx, dnnl::post_ops& po, std::string* sig);
// Whether append_activation takes the node's activation attributes, for supports() predicates.
bool has_dnnl_activation(const KernelQuery& q);

// The error for a primitive oneDNN refused to create or run (a case the kernel's supports()
// did not foresee): INTERNAL with oneDNN's message and the way round it (another engine).
Status dnnl_refused(const KernelContext& ctx, const dnnl::error& e);

}  // namespace dnnl_engine
}  // namespace gearbox
