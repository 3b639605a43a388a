// MatMul (ai.onnx opsets 1-17) and Gemm (opsets 7-17) on oneDNN's matmul primitive,
// cpu.dnnl engine.
//
// MatMul: float32, both inputs of rank >= 2; batch dims broadcast numpy-style (padded to one
// rank with leading 1s; oneDNN broadcasts size-1 batch dims itself). Gemm: float32, transA/
// transB as strided descriptors (no transposed copy), alpha as the output scale, beta * C as
// a sum post-op over a destination pre-filled with C broadcast to (M, N). All layouts are
// plain row-major (B is read in place). Anything else (1-D operands, other dtypes, shapes
// that do not match, which the reference reports with its error) is refused by
// matmul_family_supports / gemm_family_supports (supports_util.h), so the node runs on the next engine of the list.
// com.gearbox FusedMatMul (bias [N] as a binary_add post-op) and FusedGemm add the fused activation as eltwise post-ops
// (dnnl_util.h).
//
// MatMul/FusedMatMul with a constant B (an initializer: the weights of a linear layer) whose
// batch dims are all 1 let oneDNN choose B's layout (format any: a blocked layout its brgemm
// kernels read directly) and reorder B into it once, cached (dnnl_util.h reordered_weights);
// with a plain B oneDNN packs it again inside every execution.
//
// Reduced precision: a node the precision pass lowered to bf16 (runtime/precision.h) runs a
// bf16 matmul where the CPU has bf16 arithmetic: A is converted to bf16 before each run (and
// transposed there for Gemm's transA), B converted once into the cached packed copy when it is
// a constant (else on each run), and the products accumulate in fp32 into an fp32 C, bias,
// alpha, beta * C and activation applied in fp32.
#include <string>
#include <unordered_map>
#include <vector>

#include "base/logging.h"
#include "kernels/cpu/dnnl/dnnl_util.h"
#include "kernels/matmul_shapes.h"

namespace gearbox::dnnl_engine {
namespace {

using dnnl::memory;

struct MatMulPrim {
  dnnl::matmul prim;
  memory::desc a_md, b_md, c_md, scratch_md;
  memory::desc a_src_md;  // A as it lies when it is converted into a_md first (bf16); else zero
  memory::desc bias_md;  // FusedMatMul's bias as binary_add post-op 0; zero desc when none
};

std::shared_ptr<MatMulPrim> make_matmul(const memory::desc& a, const memory::desc& b, const memory::desc& c,
                                        const dnnl::primitive_attr& attr_in) {
  auto mp = std::make_shared<MatMulPrim>();
  dnnl::primitive_attr attr = attr_in;
  // User scratchpad: concurrent runs of one cached primitive never share scratch memory.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::matmul::desc d(a, b, c);
  dnnl::matmul::primitive_desc pd(d, attr, cpu_engine());
  mp->a_md = a;
  mp->b_md = pd.weights_desc();  // b itself, or the layout oneDNN chose for format any
  mp->c_md = c;
  mp->scratch_md = pd.scratchpad_desc();
  mp->prim = dnnl::matmul(pd);
  return mp;
}

Status run_matmul(const MatMulPrim& p, const void* a, const memory& bm, float* c, const void* bias = nullptr) {
  dnnl::engine& eng = cpu_engine();
  dnnl::stream& s = thread_stream();
  Tensor a_buf;  // A converted to bf16, alive until the run ends
  if (p.a_src_md != memory::desc()) {
    GBX_ASSIGN_OR_RETURN(void* converted, pooled_buffer(p.a_md, &a_buf));
    memory src(p.a_src_md, eng, const_cast<void*>(a)), dst(p.a_md, eng, converted);
    dnnl::reorder(src, dst).execute(s, src, dst);
    a = converted;
  }
  memory am(p.a_md, eng, const_cast<void*>(a)), cm(p.c_md, eng, c);
  memory scratch(p.scratch_md, eng);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, scratch}};
  if (bias)
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, memory(p.bias_md, eng, const_cast<void*>(bias)));
  p.prim.execute(s, args);
  s.wait();
  return Status::OK();
}

// The bf16 form of an fp32 operand descriptor: the same dims, plain row-major.
memory::desc bf16_plain(const memory::dims& d) {
  memory::dims strides(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) strides[i - 1] = strides[i] * d[i];
  return memory::desc(d, memory::data_type::bf16, strides);
}

// MatMul/FusedMatMul on concrete dims (bias: FusedMatMul's, null when none); "" when handled.
std::string matmul_refusal(const Dims& a, const Dims& b, const Dims* bias) {
  if (dims_numel(a) == 0 || dims_numel(b) == 0) return "an operand is empty";
  const auto shapes = matmul_shapes(a, b);
  if (!shapes) return "shapes " + to_string(a) + " x " + to_string(b) + " are not a rank>=2 MatMul";
  if (bias && (bias->size() != 1 || (*bias)[0] != shapes->out.back()))
    return "the bias " + to_string(*bias) + " is not [N]";
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
    if (c->size() > 2) return "C " + to_string(*c) + " is not 2-D";
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
  // FusedMatMul: a bias of shape [N] is a broadcast binary_add post-op (matmul_family_supports refuses
  // other bias shapes), then the activation.
  const Tensor* bias = nullptr;
  dnnl::post_ops po;
  std::string sig;
  if (fused) {
    if (bias_in) {
      bias = bias_in;
      memory::dims bdims(r, 1);
      bdims[r - 1] = cd[r - 1];
      po.append_binary(dnnl::algorithm::binary_add, plain_md(bdims));
      sig += "bias";
    }
    if (!append_activation(ctx, po, &sig)) return outside_supports(ctx, "this activation");
  }
  // Constant weights without batch dims get a blocked layout, reordered once (see the top).
  bool packed_b = ctx.input_is_constant(1);
  for (size_t i = 0; i + 2 < r; ++i) packed_b = packed_b && bd[i] == 1;
  const bool bf16 = computes_bf16(ctx);
  try {
    const std::string key = std::string(fused ? "fmatmul|" : "matmul|") + to_string(ad) + to_string(bd) + sig +
                            (packed_b ? "|wany" : "") + (bf16 ? "|bf16" : "");
    auto p = cached<MatMulPrim>(key, [&] {
      dnnl::primitive_attr attr;
      if (fused) attr.set_post_ops(po);
      const auto in_dt = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
      const memory::desc b_md = packed_b ? memory::desc(to_dims(bd), in_dt, memory::format_tag::any)
                                : bf16     ? bf16_plain(to_dims(bd))
                                           : plain_md(to_dims(bd));
      const memory::desc a_md = bf16 ? bf16_plain(to_dims(ad)) : plain_md(to_dims(ad));
      auto mp = make_matmul(a_md, b_md, plain_md(to_dims(cd)), attr);
      if (bf16) mp->a_src_md = plain_md(to_dims(ad));
      if (bias) {
        memory::dims bdims(r, 1);
        bdims[r - 1] = cd[r - 1];
        mp->bias_md = plain_md(bdims);
      }
      return mp;
    });
    // The output keeps the rank of the higher-rank input.
    GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, cd));
    const memory bm = reordered_weights(b, plain_md(to_dims(bd)), p->b_md, packed_b);
    GBX_RETURN_IF_ERROR(run_matmul(*p, a.raw(), bm, y.data<float>(), bias ? bias->raw() : nullptr));
    ctx.set_output(0, std::move(y));
    return Status::OK();
  } catch (const dnnl::error& e) {
    return dnnl_refused(ctx, e);
  }
}

Status gemm_impl(KernelContext& ctx, bool fused) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const bool ta = ctx.attr_int("transA", 0) != 0, tb = ctx.attr_int("transB", 0) != 0;
  const float alpha = ctx.attr_float("alpha", 1.f), beta = ctx.attr_float("beta", 1.f);
  const Tensor* c = ctx.has_input(2) && beta != 0.f ? &ctx.input(2) : nullptr;
  if (std::string why = gemm_refusal(a.dims(), b.dims(), c ? &c->dims() : nullptr, ta, tb); !why.empty())
    return outside_supports(ctx, why);
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  const int64_t n = tb ? b.dim(0) : b.dim(1);
  dnnl::post_ops po;
  std::string sig;
  if (c) po.append_sum(beta);  // dst = alpha A B + beta dst, dst pre-filled with C
  if (fused && !append_activation(ctx, po, &sig)) return outside_supports(ctx, "this activation");  // FusedGemm
  const bool bf16 = computes_bf16(ctx);
  // B as it lies: read in place in fp32; converted into a packed bf16 copy (cached when it is a
  // constant) when the node computes in bf16.
  const auto f32 = memory::data_type::f32;
  const memory::desc b_stored = tb ? memory::desc({k, n}, f32, {1, k}) : plain_md({k, n});
  try {
    const std::string key = sig + "gemm|" + std::to_string(m) + "," + std::to_string(k) + "," + std::to_string(n) +
                            (ta ? "T" : "N") + (tb ? "T" : "N") + key_float(alpha) + "|" +
                            (c ? key_float(beta) : std::string("-")) + (bf16 ? "|bf16" : "");
    auto p = cached<MatMulPrim>(key, [&] {
      const memory::desc a_stored = ta ? memory::desc({m, k}, f32, {1, m}) : plain_md({m, k});
      dnnl::primitive_attr attr;
      if (alpha != 1.f) attr.set_output_scales(0, {alpha});
      attr.set_post_ops(po);
      if (!bf16) return make_matmul(a_stored, b_stored, plain_md({m, n}), attr);
      auto mp = make_matmul(bf16_plain({m, k}), memory::desc({k, n}, memory::data_type::bf16, memory::format_tag::any),
                            plain_md({m, n}), attr);
      mp->a_src_md = a_stored;
      return mp;
    });
    GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, {m, n}));
    float* yp = y.data<float>();
    if (c) {
      const Dims& d = c->dims();
      const int64_t cm = d.size() == 2 ? d[0] : 1, cn = d.empty() ? 1 : d.back();
      const float* cp = c->data<float>();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) yp[i * n + j] = cp[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
    }
    const memory bm = bf16 ? reordered_weights(b, b_stored, p->b_md, ctx.input_is_constant(1))
                           : memory(p->b_md, cpu_engine(), const_cast<void*>(b.raw()));
    GBX_RETURN_IF_ERROR(run_matmul(*p, a.raw(), bm, yp));
    ctx.set_output(0, std::move(y));
    return Status::OK();
  } catch (const dnnl::error& e) {
    return dnnl_refused(ctx, e);
  }
}

Status matmul(KernelContext& ctx) { return matmul_impl(ctx, false); }
Status fused_matmul(KernelContext& ctx) { return matmul_impl(ctx, true); }
Status gemm(KernelContext& ctx) { return gemm_impl(ctx, false); }
Status fused_gemm(KernelContext& ctx) { return gemm_impl(ctx, true); }

GBX_REGISTER_KERNEL({"", "MatMul", 1, 18, kEngineDnnl, {DType::F32}, matmul});
GBX_KERNEL_SUPPORT(matmul, {.inputs = {{DType::F32}, {DType::F32}},
                            .supports = matmul_family_supports<false, has_dnnl_activation, matmul_refusal>,
                            .compute = {DType::BF16}});
GBX_REGISTER_KERNEL({"", "Gemm", 7, 18, kEngineDnnl, {DType::F32}, gemm});
GBX_KERNEL_SUPPORT(gemm, {.inputs = {{DType::F32}, {DType::F32}, {DType::F32}},
                          .supports = gemm_family_supports<false, has_dnnl_activation, gemm_refusal>,
                          .compute = {DType::BF16}});
GBX_REGISTER_KERNEL({"com.gearbox", "FusedMatMul", 1, 1, kEngineDnnl, {DType::F32}, fused_matmul});
GBX_KERNEL_SUPPORT(fused_matmul, {.inputs = {{DType::F32}, {DType::F32}, {DType::F32}},
                                  .supports = matmul_family_supports<true, has_dnnl_activation, matmul_refusal>,
                                  .compute = {DType::BF16}});
GBX_REGISTER_KERNEL({"com.gearbox", "FusedGemm", 1, 1, kEngineDnnl, {DType::F32}, fused_gemm});
GBX_KERNEL_SUPPORT(fused_gemm, {.inputs = {{DType::F32}, {DType::F32}, {DType::F32}},
                                .supports = gemm_family_supports<true, has_dnnl_activation, gemm_refusal>,
                                .compute = {DType::BF16}});

}  // namespace
}  // namespace gearbox::dnnl_engine
