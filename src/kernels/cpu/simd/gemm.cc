// MatMul (ai.onnx 1-17), Gemm (7-17), com.gearbox.FusedMatMul and com.gearbox.FusedGemm on
// the cpu.simd engine's own fp32 GEMM (gemm.h, gemm_core.cc).
//
// MatMul/FusedMatMul: float32, both inputs of rank >= 2, batch dims broadcast numpy-style.
// When B has no batch (all its batch dims are 1, a linear layer's weights) A's batch dims
// fold into M: one product of (batch x M) rows. Otherwise each output batch is its own
// product, A and B batches picked with stride 0 on broadcast dims. FusedMatMul's bias is
// fused into the epilogue when it broadcasts along rows (shape [..1.., N] or [..1.., 1],
// rank <= the output's); other bias shapes run the reference.
// Gemm/FusedGemm: float32 2-D A and B, transA/transB read through strides while packing,
// alpha and beta * C (C broadcast unidirectionally to (M, N)) in the epilogue.
// Any other configuration (other dtypes, 1-D operands, empty tensors, shapes the reference
// rejects, an activation this file does not know) is refused by matmul_family_supports /
// gemm_family_supports (supports_util.h), so the node runs on the next engine of the list.
//
// B is packed into NR-wide panels: once for a constant B (KernelContext::input_is_constant,
// an initializer), cached keyed by (data pointer, buffer version, dims, layout) with a shallow
// copy of the source tensor so its buffer cannot be freed and reused while the entry exists
// (the same contract as the cpu.dnnl weight cache, dnnl_util.h); a weight updated in place
// (base/buffer_version.h) packs again; per call, uncached, for a B computed
// at run time (one without batches by the work items themselves, a group of panels each as
// they first reach it: see run()). Work is split over (batch, M block, group of B panels)
// items with OpenMP; with M = 128 (BERT) the two threads take halves of N.
#include "kernels/cpu/simd/gemm.h"

#include <hwy/aligned_allocator.h>
#include <omp.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "base/buffer_version.h"
#include "base/lru_cache.h"
#include "base/scratch.h"
#include "kernels/cpu/simd/simd_util.h"
#include "kernels/matmul_shapes.h"
#include "kernels/supports_util.h"

namespace gearbox::simd::gemm {
namespace {

std::atomic<int64_t> g_packs{0};

// The calling thread's grow-only buffer for a run-time B (reused by its next call: a fresh
// allocation of this size is a fresh mmap, page faults included, every call); null when
// the B is larger than kThreadBCap floats (allocated per call instead).
constexpr int64_t kThreadBCap = int64_t{16} << 20;
float* thread_runtime_b(int64_t floats) {
  thread_local ThreadScratch<float> buf;  // counted in the pool statistics (base/scratch.h)
  if (floats > kThreadBCap) return nullptr;
  return buf.get(static_cast<size_t>(floats));
}

// LRU of constant packed B; thread-safe.
constexpr size_t kPackedCacheCapacity = 256;
using PackedCache = LruCache<const PackedB>;

PackedCache& cache() {
  static PackedCache* c = new PackedCache(kPackedCacheCapacity);  // never destroyed: kernels may run during exit
  return *c;
}

// A run-time B whose panels the work items pack themselves (run()), group by group.
struct LazyB {
  const float* b = nullptr;  // B(kk, j) = b[kk * rs + j * cs]
  int64_t rs = 0, cs = 0;
  float* packed = nullptr;  // where the panels go (PackedB::ptr, the problem's bp)
};

// B batches b + i * batch_stride (i < nb), each k x n with B(kk, j) = [kk * rs + j * cs].
// A single run-time B is only allocated (PackedB::packed_by_items): run() packs it.
// `offset` floats into b's data: the first batch (a constant packed in parts, as an RNN's
// recurrent weights are, gets one cache entry per part). `owned`: never the thread buffer
// (the caller keeps several run-time B at once), and never left to the work items.
std::shared_ptr<const PackedB> pack(const Tensor& b, int64_t nb, int64_t batch_stride, int64_t rs, int64_t cs,
                                    int64_t k, int64_t n, bool constant, int64_t offset = 0, bool owned = false) {
  const int64_t nr = blocking().nr;
  std::string key;
  if (constant) {
    // (std::string::append: GCC 12's -Wrestrict misfires on chains of operator+.)
    key.append(std::to_string(reinterpret_cast<uintptr_t>(b.raw()))).append("v");
    key.append(std::to_string(buffer_version(b))).append("|");
    for (int64_t d : b.dims()) key.append(std::to_string(d)).append(",");
    for (int64_t v : {rs, cs, nr, offset, nb, batch_stride, k, n}) key.append("|").append(std::to_string(v));
    if (auto v = cache().get(key)) return v;
  }
  auto e = std::make_shared<PackedB>();
  e->batch_floats = packed_b_floats(k, n, nr);
  e->ptr = constant || owned ? nullptr : thread_runtime_b(e->batch_floats * nb);
  if (!e->ptr) {
    e->data = hwy::AllocateAligned<float>(static_cast<size_t>(e->batch_floats * nb));
    e->ptr = e->data.get();
  }
  ++g_packs;
  e->packed_by_items = !constant && !owned && nb == 1;
  if (e->packed_by_items) return e;
  const float* src = b.data<float>() + offset;
  float* dst = e->ptr;
  // Threads take row ranges (each reads whole rows of a row-major B).
  constexpr int64_t kRows = 64;
  const int64_t row_blocks = (k + kRows - 1) / kRows;
#pragma omp parallel for schedule(static) if (nb * k * n > (1 << 16))
  for (int64_t t = 0; t < nb * row_blocks; ++t) {
    const int64_t i = t / row_blocks, k0 = (t % row_blocks) * kRows;
    pack_b(src + i * batch_stride + k0 * rs, rs, cs, std::min(kRows, k - k0), n, nr, k * nr,
           dst + i * e->batch_floats + k0 * nr);
  }
  if (constant) {
    e->source = b;
    cache().put(key, e);
  }
  return e;
}

// Grow-only buffers of the calling thread: the per-thread A block of compute_block, and the
// whole packed A of one call shared by the team (kept between calls: a fresh allocation of
// this size would be a fresh mmap, page faults included, every call).
float* thread_apack() {
  thread_local ThreadScratch<float> buf;
  return buf.get(static_cast<size_t>(a_pack_floats()));
}
float* thread_shared_a(int64_t floats) {
  thread_local ThreadScratch<float> buf;
  return buf.get(static_cast<size_t>(floats));
}

// At most this many B panels per work item: the item's C block (kMcRows x 8 NR floats, 192
// KiB on AVX-512), reloaded once per K block, stays in L2.
constexpr int64_t kMaxPanels = 8;
// Work items per thread to aim for, so a thread the OS delays leaves its share to others.
constexpr int64_t kItemsPerThread = 4;
// The largest whole-call packed A (floats) kept per calling thread; beyond it each work item
// packs its own A blocks.
constexpr int64_t kSharedACap = int64_t{8} << 20;

// Runs equally shaped products (one per output batch) over the OpenMP team. Work items are
// (product, M block, group of B panels). A transposed A is packed: when several items share
// an M block, once per call by the team (then a barrier) instead of once per item.
// With `lazy`, probs[0].bp is allocated but not packed: the first item to reach a group of
// panels packs it (the other items of that group wait for it), so the packing is spread over
// the compute instead of running as a phase of its own with a barrier after it, and a
// freshly packed group is still in cache when its first item multiplies with it.
void run(std::vector<Problem>& probs, const LazyB* lazy = nullptr) {
  // A row-major A is read in place by the micro-kernel: no copy, and no packing phase (with
  // its barrier, which a thread the OS delays turns into a wait for the whole team). Copying
  // it to a padded stride measured no faster, also for rows 4 KiB apart.
  for (Problem& q : probs) q.a_in_place = q.a_cs == 1;
  const Blocking bl = blocking();
  const Problem& f = probs[0];
  const int64_t nprob = static_cast<int64_t>(probs.size());
  const int64_t np = (f.n + bl.nr - 1) / bl.nr;
  // M blocks of at most kMcRows rows (a multiple of mr), evenly sized.
  const int64_t nmb0 = (f.m + kMcRows - 1) / kMcRows;
  const int64_t mc = ((f.m + nmb0 - 1) / nmb0 + bl.mr - 1) / bl.mr * bl.mr;
  const int64_t nmb = (f.m + mc - 1) / mc;
  const int64_t outer = nprob * nmb;
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  // Split N when there are fewer (product, M block) pairs than the items wanted.
  const int64_t want = threads > 1 ? threads * kItemsPerThread : 1;
  const int64_t nsplit = std::max<int64_t>(1, (want + outer - 1) / outer);
  const int64_t chunk = std::min(kMaxPanels, std::max<int64_t>(1, (np + nsplit - 1) / nsplit));
  // The panels are dealt out evenly over the nch groups (1024^3: 7, 7, 8 panels rather than
  // 8, 8, 6), so that no item is much longer than the rest at the end of the dynamic schedule.
  const int64_t nch = (np + chunk - 1) / chunk;
  const int64_t items = outer * nch;
  const int64_t kcb = k_block(f.k, f.kc), nk = (f.k + kcb - 1) / kcb;
  const int64_t blk = a_block_floats(mc, kcb);
  const bool share = !f.a_in_place && nch > 1 && outer * nk * blk <= kSharedACap;
  float* shared = share ? thread_shared_a(outer * nk * blk) : nullptr;
  // Per panel group: 0 unpacked, 1 being packed, 2 packed.
  std::vector<std::atomic<int>> packed(lazy ? static_cast<size_t>(nch) : 0);
  for (auto& st : packed) st.store(0, std::memory_order_relaxed);
  auto ensure_packed = [&](int64_t c) {
    std::atomic<int>& st = packed[static_cast<size_t>(c)];
    int expected = 0;
    if (st.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      const int64_t p0 = c * np / nch, p1 = (c + 1) * np / nch, j0 = p0 * bl.nr;
      pack_b(lazy->b + j0 * lazy->cs, lazy->rs, lazy->cs, f.k, std::min(f.n - j0, (p1 - p0) * bl.nr), bl.nr,
             f.k * bl.nr, lazy->packed + p0 * f.k * bl.nr);
      st.store(2, std::memory_order_release);
      return;
    }
    while (st.load(std::memory_order_acquire) != 2) std::this_thread::yield();
  };
  const double flops =
      2.0 * static_cast<double>(f.m) * static_cast<double>(f.n) * static_cast<double>(f.k) * static_cast<double>(nprob);
  if (!share && (items == 1 || flops <= 1e6 || threads == 1)) {
    // One thread's work: no OpenMP region at all (even one whose if clause is false costs
    // about 1.5 us, the whole of a small product such as an RNN step's).
    float* apack = f.a_in_place ? nullptr : thread_apack();
    for (int64_t it = 0; it < items; ++it) {
      const int64_t c = it % nch, rest = it / nch, mb = rest % nmb, b = rest / nmb;
      const int64_t m0 = mb * mc;
      if (lazy) ensure_packed(c);
      compute_block(probs[static_cast<size_t>(b)], m0, std::min(f.m, m0 + mc), c * np / nch, (c + 1) * np / nch, apack,
                    0);
    }
    return;
  }
#pragma omp parallel
  {
    float* apack = share || f.a_in_place ? nullptr : thread_apack();
    if (share) {
#pragma omp for schedule(static)
      for (int64_t t = 0; t < outer * nk; ++t) {
        const int64_t kb = t % nk, mb = (t / nk) % nmb, b = t / nk / nmb;
        const int64_t m0 = mb * mc;
        pack_a(probs[static_cast<size_t>(b)], m0, std::min(f.m, m0 + mc) - m0, kb * kcb, std::min(kcb, f.k - kb * kcb),
               shared + t * blk);
      }
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; ++it) {
      const int64_t c = it % nch, rest = it / nch, mb = rest % nmb, b = rest / nmb;
      const int64_t m0 = mb * mc;
      if (lazy) ensure_packed(c);
      compute_block(probs[static_cast<size_t>(b)], m0, std::min(f.m, m0 + mc), c * np / nch, (c + 1) * np / nch,
                    share ? shared + rest * nk * blk : apack, share ? blk : 0);
    }
  }
}

// The node's fused activation (the one parser, kernels/op_descriptor.h); false for an unknown name.
bool parse_activation(const KernelContext& ctx, Problem& p) {
  const std::optional<FusedActivation> act = fused_activation_of(ctx);
  if (!act) return false;
  p.act = act->kind;
  p.p0 = act->p0;
  p.p1 = act->p1;
  return true;
}

// Whether parse_activation knows the node's activation attribute (a context over the node's
// attributes only: the parser reads nothing else).
bool knows_activation(const KernelQuery& q) {
  std::vector<RuntimeValue> none;
  KernelContext attrs(q.op(), {}, &none, {});
  Problem p;
  return parse_activation(attrs, p);
}

// MatMul/FusedMatMul on concrete dims (bias: FusedMatMul's, null when none); "" when handled.
std::string matmul_refusal(const Dims& a, const Dims& b, const Dims* bias) {
  if (dims_numel(a) == 0 || dims_numel(b) == 0) return "an operand is empty";
  const auto shapes = matmul_shapes(a, b);
  if (!shapes) return "shapes " + to_string(a) + " x " + to_string(b) + " are not a rank>=2 MatMul";
  if (bias) {
    const size_t r = shapes->out.size();
    const int64_t n = shapes->b[r - 1];
    if (bias->size() > r || dims_numel(*bias) == 0) return "the bias " + to_string(*bias) + " does not fit";
    for (size_t i = 0; i + 1 < bias->size(); ++i)
      if ((*bias)[i] != 1) return "the bias " + to_string(*bias) + " is not a row";
    const int64_t bn = bias->empty() ? 1 : bias->back();
    if (bn != n && bn != 1) return "the bias " + to_string(*bias) + " is not a row of the output";
  }
  return "";
}

// Gemm/FusedGemm on concrete dims (c: C when beta != 0, else null); "" when handled.
std::string gemm_refusal(const Dims& a, const Dims& b, const Dims* c, bool ta, bool tb) {
  if (a.size() != 2 || b.size() != 2) return "A or B is not 2-D";
  if (dims_numel(a) == 0 || dims_numel(b) == 0) return "A or B is empty";
  const int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
  const int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (k != kb) return "inner dims " + std::to_string(k) + " and " + std::to_string(kb) + " differ";
  if (c) {
    // C broadcasts unidirectionally to (M, N): rank <= 2, each dim equal or 1.
    if (c->size() > 2 || dims_numel(*c) == 0) return "C " + to_string(*c) + " does not fit";
    const int64_t cm = c->size() == 2 ? (*c)[0] : 1, cn = c->empty() ? 1 : c->back();
    if ((cm != m && cm != 1) || (cn != n && cn != 1)) return "C " + to_string(*c) + " does not broadcast to the output";
  }
  return "";
}

Status matmul_impl(KernelContext& ctx, bool fused) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* bias_in = fused && ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (std::string why = matmul_refusal(a.dims(), b.dims(), bias_in ? &bias_in->dims() : nullptr); !why.empty())
    return outside_supports(ctx, why);
  const auto shapes = matmul_shapes(a.dims(), b.dims());
  const Dims &ad = shapes->a, &bd = shapes->b, &cd = shapes->out;
  const size_t r = cd.size();
  const int64_t na = shapes->batch_a, nb = shapes->batch_b, nc = shapes->batch_out;
  const int64_t m = ad[r - 2], k = ad[r - 1], n = bd[r - 1];
  Problem p;
  p.k = k;
  p.n = n;
  p.ldy = n;
  if (fused) {
    if (bias_in) {
      const Tensor& bias = *bias_in;
      const int64_t bn = bias.rank() == 0 ? 1 : bias.dims().back();
      p.c = bias.data<float>();
      p.c_rs = 0;
      p.c_cs = bn == 1 ? 0 : 1;
    }
    if (!parse_activation(ctx, p)) return outside_supports(ctx, "this activation");
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, cd));
  const auto packed = pack(b, nb, k * n, n, 1, k, n, ctx.input_is_constant(1));
  std::vector<Problem> probs;
  if (nb == 1) {
    // Weights without batch: A's batch dims fold into M (A and Y are contiguous row-major).
    p.a = a.data<float>();
    p.a_rs = k;
    p.m = na * m;
    p.bp = packed->ptr;
    p.y = y.data<float>();
    probs.push_back(p);
    const LazyB lazy{b.data<float>(), n, 1, packed->ptr};
    run(probs, packed->packed_by_items ? &lazy : nullptr);
  } else {
    p.a_rs = k;
    p.m = m;
    probs.reserve(static_cast<size_t>(nc));
    for (int64_t t = 0; t < nc; ++t) {
      // Output batch t -> A and B batches (stride 0 on broadcast dims).
      int64_t rem = t, ai = 0, bi = 0, astr = 1, bstr = 1;
      for (size_t i = r - 2; i-- > 0;) {
        const int64_t idx = rem % cd[i];
        rem /= cd[i];
        if (ad[i] != 1) ai += idx * astr;
        if (bd[i] != 1) bi += idx * bstr;
        astr *= ad[i];
        bstr *= bd[i];
      }
      p.a = a.data<float>() + ai * m * k;
      p.bp = packed->ptr + bi * packed->batch_floats;
      p.y = y.data<float>() + t * m * n;
      probs.push_back(p);
    }
    run(probs);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status gemm_impl(KernelContext& ctx, bool fused) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const bool ta = ctx.attr_int("transA", 0) != 0, tb = ctx.attr_int("transB", 0) != 0;
  Problem p;
  p.alpha = ctx.attr_float("alpha", 1.f);
  p.beta = ctx.attr_float("beta", 1.f);
  const Tensor* c_in = ctx.has_input(2) && p.beta != 0.f ? &ctx.input(2) : nullptr;
  if (std::string why = gemm_refusal(a.dims(), b.dims(), c_in ? &c_in->dims() : nullptr, ta, tb); !why.empty())
    return outside_supports(ctx, why);
  p.m = ta ? a.dim(1) : a.dim(0);
  p.k = ta ? a.dim(0) : a.dim(1);
  p.n = tb ? b.dim(0) : b.dim(1);
  if (c_in) {
    const Tensor& c = *c_in;
    const Dims& d = c.dims();
    const int64_t cm = d.size() == 2 ? d[0] : 1, cn = d.empty() ? 1 : d.back();
    p.c = c.data<float>();
    p.c_rs = cm == 1 ? 0 : cn;
    p.c_cs = cn == 1 ? 0 : 1;
  }
  if (fused && !parse_activation(ctx, p)) return outside_supports(ctx, "this activation");
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, {p.m, p.n}));
  // A(i, kk): a[i][kk], or a[kk][i] transposed; B(kk, j): b[kk][j], or b[j][kk].
  p.a = a.data<float>();
  p.a_rs = ta ? 1 : p.k;
  p.a_cs = ta ? p.m : 1;
  const int64_t b_rs = tb ? 1 : p.n, b_cs = tb ? p.k : 1;
  const auto packed = pack(b, 1, 0, b_rs, b_cs, p.k, p.n, ctx.input_is_constant(1));
  p.bp = packed->ptr;
  p.y = y.data<float>();
  p.ldy = p.n;
  std::vector<Problem> one{p};
  const LazyB lazy{b.data<float>(), b_rs, b_cs, packed->ptr};
  run(one, packed->packed_by_items ? &lazy : nullptr);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status matmul(KernelContext& ctx) { return matmul_impl(ctx, false); }
Status fused_matmul(KernelContext& ctx) { return matmul_impl(ctx, true); }
Status gemm_op(KernelContext& ctx) { return gemm_impl(ctx, false); }
Status fused_gemm(KernelContext& ctx) { return gemm_impl(ctx, true); }

}  // namespace

std::shared_ptr<const PackedB> pack_weights(const Tensor& b, int64_t offset, int64_t nb, int64_t batch_stride,
                                            int64_t rs, int64_t cs, int64_t k, int64_t n, bool constant) {
  return pack(b, nb, batch_stride, rs, cs, k, n, constant, offset, /*owned=*/true);
}

void multiply(const Problem& p) {
  std::vector<Problem> one{p};
  run(one);
}

void multiply_with_b(Problem p, const float* b, int64_t rs, int64_t cs) {
  const int64_t floats = packed_b_floats(p.k, p.n, blocking().nr);
  hwy::AlignedFreeUniquePtr<float[]> own;
  float* packed = thread_runtime_b(floats);
  if (!packed) {
    own = hwy::AllocateAligned<float>(static_cast<size_t>(floats));
    packed = own.get();
  }
  ++g_packs;
  p.bp = packed;
  std::vector<Problem> one{p};
  const LazyB lazy{b, rs, cs, packed};
  run(one, &lazy);
}

int64_t pack_count() { return g_packs.load(); }
size_t packed_cache_size() { return cache().size(); }

GBX_REGISTER_KERNEL({"", "MatMul", 1, 18, kEngineSimd, {DType::F32}, matmul});
GBX_KERNEL_SUPPORT(matmul, {.inputs = {{DType::F32}, {DType::F32}},
                            .supports = matmul_family_supports<false, knows_activation, matmul_refusal>});
GBX_REGISTER_KERNEL({"", "Gemm", 7, 18, kEngineSimd, {DType::F32}, gemm_op});
GBX_KERNEL_SUPPORT(gemm_op, {.inputs = {{DType::F32}, {DType::F32}, {DType::F32}},
                             .supports = gemm_family_supports<false, knows_activation, gemm_refusal>});
GBX_REGISTER_KERNEL({kGearboxDomain, "FusedMatMul", 1, 1, kEngineSimd, {DType::F32}, fused_matmul});
GBX_KERNEL_SUPPORT(fused_matmul, {.inputs = {{DType::F32}, {DType::F32}, {DType::F32}},
                                  .supports = matmul_family_supports<true, knows_activation, matmul_refusal>});
GBX_REGISTER_KERNEL({kGearboxDomain, "FusedGemm", 1, 1, kEngineSimd, {DType::F32}, fused_gemm});
GBX_KERNEL_SUPPORT(fused_gemm, {.inputs = {{DType::F32}, {DType::F32}, {DType::F32}},
                                .supports = gemm_family_supports<true, knows_activation, gemm_refusal>});

}  // namespace gearbox::simd::gemm
