#include "kernels/cpu/dnnl/dnnl_util.h"

#include <atomic>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "base/buffer_version.h"
#include "base/lru_cache.h"
#include "kernels/kernel_options.h"
#include "kernels/op_descriptor.h"

namespace gearbox::dnnl_engine {
namespace {

using Lru = LruCache<void>;

Lru& primitive_lru() {
  static Lru lru(kPrimitiveCacheCapacity);
  return lru;
}
Lru& weight_lru() {
  static Lru lru(kWeightCacheCapacity);
  return lru;
}
std::atomic<int64_t> g_reorders{0};

struct WeightEntry {
  Tensor source;  // keeps the source buffer (and so its address) alive
  dnnl::memory mem;
};

std::string md_bytes(const dnnl::memory::desc& md) {
  return std::string(reinterpret_cast<const char*>(&md.data), sizeof(md.data));
}

}  // namespace

dnnl::engine& cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(cpu_engine());
  return s;
}

dnnl::memory::dims to_dims(const Dims& d) { return dnnl::memory::dims(d.begin(), d.end()); }

dnnl::memory::desc plain_md(const dnnl::memory::dims& d, dnnl::memory::data_type type) {
  dnnl::memory::dims strides(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) strides[i - 1] = strides[i] * d[i];
  return dnnl::memory::desc(d, type, strides);
}

std::shared_ptr<void> primitive_cache_get(const std::string& key) { return primitive_lru().get(key); }
void primitive_cache_put(const std::string& key, std::shared_ptr<void> value) {
  primitive_lru().put(key, std::move(value));
}

std::string key_float(float v) { return fmt::format("{}", v); }

Result<void*> pooled_buffer(const dnnl::memory::desc& md, Tensor* holder) {
  const size_t bytes = md.get_size();
  if (bytes == 0) return static_cast<void*>(nullptr);
  GBX_ASSIGN_OR_RETURN(*holder, Tensor::allocate_uninitialized(DType::U8, {static_cast<int64_t>(bytes)}));
  return holder->mutable_raw();
}

Result<dnnl::memory> pooled_memory(const dnnl::memory::desc& md, Tensor* holder) {
  GBX_ASSIGN_OR_RETURN(void* data, pooled_buffer(md, holder));
  return dnnl::memory(md, cpu_engine(), data);
}

Status execute_conv_like(const dnnl::primitive& prim, const ConvLayouts& io, const Tensor& x, const Tensor& w,
                         bool w_constant, const Tensor* b, const Tensor* z, bool z_in_y, Tensor& y) {
  return execute_conv_like(prim, io, x, reordered_weights(w, io.wei_plain, io.wei_md, w_constant), b, z, z_in_y, y);
}

// A set belongs to one primitive, whose arguments keep their descriptors: only the buffer changes.
void ExecArgs::Lease::bind(int arg, const dnnl::memory::desc& md, const void* data) {
  auto it = map_->find(arg);
  if (it == map_->end()) {
    map_->emplace(arg, dnnl::memory(md, cpu_engine(), const_cast<void*>(data)));
    return;
  }
  it->second.set_data_handle(const_cast<void*>(data));
}

ExecArgs::Lease ExecArgs::lease() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      std::unique_ptr<Map> map = std::move(free_.back());
      free_.pop_back();
      return Lease(this, std::move(map));
    }
  }
  return Lease(this, std::make_unique<Map>());
}

void ExecArgs::give_back(std::unique_ptr<Map> map) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(map));
}

Status execute_conv_like(const dnnl::primitive& prim, const ConvLayouts& io, const Tensor& x, const dnnl::memory& wei,
                         const Tensor* b, const Tensor* z, bool z_in_y, Tensor& y) {
  using dnnl::memory;
  dnnl::engine& eng = cpu_engine();
  dnnl::stream& s = thread_stream();
  Tensor src_buf, dst_buf, scratch_buf;  // pooled buffers, alive until the run ends
  // The layouts the tensors already have need no reorder (the layout passes' NHWC and
  // blocked convolutions); the others go through pooled temporaries.
  const void* src = x.raw();
  if (io.src_md != io.src_plain) {
    GBX_ASSIGN_OR_RETURN(void* blocked, pooled_buffer(io.src_md, &src_buf));
    memory pm(io.src_plain, eng, const_cast<void*>(x.raw())), bm(io.src_md, eng, blocked);
    dnnl::reorder(pm, bm).execute(s, pm, bm);
    src = blocked;
  }
  void* dst = y.mutable_raw();
  if (io.dst_md != io.dst_plain) {
    GBX_ASSIGN_OR_RETURN(dst, pooled_buffer(io.dst_md, &dst_buf));
  }
  if (z && !z_in_y) {
    const dnnl::memory::desc& z_md = io.z_plain == dnnl::memory::desc() ? io.dst_plain : io.z_plain;
    memory zm(z_md, eng, const_cast<void*>(z->raw())), dm(io.dst_md, eng, dst);
    dnnl::reorder(zm, dm).execute(s, zm, dm);
  }
  GBX_ASSIGN_OR_RETURN(void* scratch, pooled_buffer(io.scratch_md, &scratch_buf));
  ExecArgs::Lease args = io.exec_args.lease();
  args.bind(DNNL_ARG_SRC, io.src_md, src);
  args.set(DNNL_ARG_WEIGHTS, wei);
  args.bind(DNNL_ARG_DST, io.dst_md, dst);
  args.bind(DNNL_ARG_SCRATCHPAD, io.scratch_md, scratch);
  if (b) args.bind(DNNL_ARG_BIAS, io.bias_plain, b->raw());
  prim.execute(s, args.args());
  args.set(DNNL_ARG_WEIGHTS, memory());  // the set must not keep a run-time weight's buffer alive
  if (io.dst_md != io.dst_plain) {
    memory dm(io.dst_md, eng, dst), plain(io.dst_plain, eng, y.mutable_raw());
    dnnl::reorder(dm, plain).execute(s, dm, plain);
  }
  s.wait();
  return Status::OK();
}

namespace {
// src into dst. oneDNN has no reorder from a plain bf16 tensor straight into a blocked fp32
// one (a .gbm's bf16 weights on a CPU that computes them in fp32): converted first into a
// plain fp32 copy, then laid out.
void reorder_weights(dnnl::memory src, dnnl::memory dst) {  // handles: copies share the buffer
  dnnl::stream& s = thread_stream();
  const auto sdt = src.get_desc().data_type(), ddt = dst.get_desc().data_type();
  if (sdt == dnnl::memory::data_type::bf16 && ddt == dnnl::memory::data_type::f32) {
    dnnl::memory wide(plain_md(src.get_desc().dims()), cpu_engine());
    dnnl::reorder(src, wide).execute(s, src, wide);
    dnnl::reorder(wide, dst).execute(s, wide, dst);
  } else {
    dnnl::reorder(src, dst).execute(s, src, dst);
  }
  s.wait();
  ++g_reorders;
}
}  // namespace

// The cache key holds the buffer's version too (base/buffer_version.h): a weight updated in
// place (Session::update_weight) is reordered again instead of read from the old entry.
dnnl::memory reordered_weights(const Tensor& w, const dnnl::memory::desc& plain, const dnnl::memory::desc& want,
                               bool constant) {
  void* data = const_cast<void*>(w.raw());  // oneDNN takes void*; the source is only read
  if (want == plain) return dnnl::memory(plain, cpu_engine(), data);
  if (!constant) {
    dnnl::memory src(plain, cpu_engine(), data), dst(want, cpu_engine());
    reorder_weights(src, dst);
    return dst;
  }
  std::string key;
  key.append(std::to_string(reinterpret_cast<uintptr_t>(w.raw()))).append("v").append(std::to_string(buffer_version(w)));
  key.append(to_string(w.dims()));
  key.append(md_bytes(plain)).append(md_bytes(want));
  if (auto v = weight_lru().get(key)) return std::static_pointer_cast<WeightEntry>(v)->mem;
  auto e = std::make_shared<WeightEntry>();
  e->source = w;
  e->mem = dnnl::memory(want, cpu_engine());
  reorder_weights(dnnl::memory(plain, cpu_engine(), data), e->mem);
  weight_lru().put(key, e);
  return e->mem;
}

int64_t weight_reorder_count() { return g_reorders.load(); }
size_t weight_cache_size() { return weight_lru().size(); }

bool computes_bf16(const KernelContext& ctx) {
  return ctx.compute_dtype() == DType::BF16 && current_kernel_options().bf16_arithmetic;
}

bool append_activation(const KernelContext& ctx, dnnl::post_ops& po, std::string* sig) {
  using A = dnnl::algorithm;
  // The one parser of the attributes, defaults applied (kernels/op_descriptor.h).
  const std::optional<FusedActivation> act = fused_activation_of(ctx);
  *sig += "act=" + ctx.attr_string("activation", "");
  if (!act) return false;
  const float a = act->p0, b = act->p1;
  switch (act->kind) {
    case ActivationKind::None: return true;
    case ActivationKind::Relu: po.append_eltwise(1.f, A::eltwise_relu, 0.f, 0.f); break;
    case ActivationKind::LeakyRelu: po.append_eltwise(1.f, A::eltwise_relu, a, 0.f); break;  // negative slope
    case ActivationKind::Sigmoid: po.append_eltwise(1.f, A::eltwise_logistic, 0.f, 0.f); break;
    case ActivationKind::Tanh: po.append_eltwise(1.f, A::eltwise_tanh, 0.f, 0.f); break;
    case ActivationKind::Clip: po.append_eltwise(1.f, A::eltwise_clip, a, b); break;
    case ActivationKind::HardSigmoid:
      // oneDNN 2.6 has no hardsigmoid: clip(alpha x + beta, 0, 1) as linear then clip.
      po.append_eltwise(1.f, A::eltwise_linear, a, b);
      po.append_eltwise(1.f, A::eltwise_clip, 0.f, 1.f);
      break;
    case ActivationKind::HardSwish:
      po.append_eltwise(1.f, A::eltwise_hardswish, 0.f, 0.f);  // x relu6(x + 3) / 6, as ONNX
      break;
    case ActivationKind::Silu: po.append_eltwise(1.f, A::eltwise_swish, 1.f, 0.f); break;  // x sigmoid(x)
    case ActivationKind::Gelu: po.append_eltwise(1.f, A::eltwise_gelu_erf, 0.f, 0.f); break;
    case ActivationKind::GeluTanh: po.append_eltwise(1.f, A::eltwise_gelu_tanh, 0.f, 0.f); break;
  }
  sig->append("(").append(key_float(a)).append(",").append(key_float(b)).append(")");
  return true;
}

bool has_dnnl_activation(const KernelQuery& q) {
  std::vector<RuntimeValue> none;
  const KernelContext attrs(q.op(), {}, &none, {});  // append_activation reads attributes only
  dnnl::post_ops po;
  std::string sig;
  return append_activation(attrs, po, &sig);
}

Status dnnl_refused(const KernelContext& ctx, const dnnl::error& e) {
  return ctx.error(ErrorCode::INTERNAL, "oneDNN refused this case (", e.what(),
                   ") although the kernel's supports() accepted it; run the node on another engine (--engine ",
                   ctx.op().name, "=cpu.ref) and report the shapes");
}

}  // namespace gearbox::dnnl_engine
