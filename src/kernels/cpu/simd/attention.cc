// com.gearbox.Attention on the cpu.simd engine: same contract as the reference kernel
// (kernels/cpu/ref/fused_attention.cc: Reshape+Transpose of q, k and v, scores scaled and
// masked, Softmax on the last axis, product with V, Transpose+Reshape of the context), but
// the score tensor is never materialized: any q/k/v/out permutation is a stride pattern, and
// blocks of query rows (2 vectors: 32 on AVX-512) read the operands in place and run tile by
// tile over the keys with an online softmax (attention_core.cc). Threaded over
// batch x heads x row blocks.
//
// Handled: float32 q/k/v/scale/mask, a scalar scale, a mask that broadcasts (numpy rules)
// to the [B, H, S, Sk] scores without enlarging them, Softmax over the last axis (opset 13+
// with axis -1/3, or an older opset with axis 3). Anything else (other dtypes, a softmax
// over another axis, shapes the reshapes or matmuls reject or broadcast) is refused by
// attention_supports(), so the node runs on the next engine (the reference, which also
// produces the errors). The shape inputs (4-7) are read as values: initializers, as the
// fusion writes them, are known at partitioning.
#include <algorithm>
#include <optional>
#include <vector>

#include "kernels/cpu/simd/attention_core.h"
#include "kernels/cpu/simd/simd_util.h"
#include "kernels/supports_util.h"

namespace gearbox::simd {
namespace {

// ONNX Reshape (allowzero = 0, as the fusion requires) of `in` to the int64 shape tensor;
// nullopt for anything the reference would reject or that is not a plain int64 shape.
std::optional<Dims> reshape_dims(const Dims& in, const Tensor& shape) {
  if (shape.dtype() != DType::I64 || shape.rank() != 1) return std::nullopt;
  const int64_t* s = shape.data<int64_t>();
  Dims out(static_cast<size_t>(shape.numel()));
  int64_t known = 1, infer = -1, total = 1;
  for (int64_t d : in) total *= d;
  for (size_t i = 0; i < out.size(); ++i) {
    if (s[i] == 0) {
      if (i >= in.size()) return std::nullopt;
      out[i] = in[i];
    } else if (s[i] == -1) {
      if (infer >= 0) return std::nullopt;
      infer = static_cast<int64_t>(i);
      continue;
    } else if (s[i] < 0) {
      return std::nullopt;
    } else {
      out[i] = s[i];
    }
    known *= out[i];
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0) return std::nullopt;
    out[static_cast<size_t>(infer)] = total / known;
  } else if (known != total) {
    return std::nullopt;
  }
  return out;
}

bool is_perm4(const std::vector<int64_t>& p) {
  if (p.size() != 4) return false;
  bool seen[4] = {false, false, false, false};
  for (int64_t v : p) {
    if (v < 0 || v > 3 || seen[v]) return false;
    seen[v] = true;
  }
  return true;
}

// Row-major strides of dims.
std::vector<int64_t> strides_of(const Dims& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

// A 4-D view: Transpose(Reshape(x, shape), perm) as dims and strides into x's buffer.
struct View4 {
  int64_t dim[4];
  int64_t stride[4];
};
std::optional<View4> head_view(const Dims& x, const Tensor& shape, const std::vector<int64_t>& perm) {
  if (!is_perm4(perm)) return std::nullopt;
  std::optional<Dims> r = reshape_dims(x, shape);
  if (!r || r->size() != 4) return std::nullopt;
  const std::vector<int64_t> st = strides_of(*r);
  View4 v;
  for (size_t j = 0; j < 4; ++j) {
    v.dim[j] = (*r)[static_cast<size_t>(perm[j])];
    v.stride[j] = st[static_cast<size_t>(perm[j])];
  }
  return v;
}

// How the kernel reads and writes one call: the views of q, k and v, the sizes, the mask's and
// the output's strides over [B, H, S, *], and the output dims.
struct AttentionPlan {
  View4 qv, kv, vv;
  int64_t nb = 0, nh = 0, s = 0, dh = 0, sk = 0, dv = 0;
  int64_t ms[4] = {0, 0, 0, 0};
  int64_t os[4] = {0, 0, 0, 0};
  Dims ydims;
};

// The plan for dims q, k, v, scale, mask (null: none) and shape inputs 4-7; "" when this
// kernel handles it, else why not. `attrs` is the KernelContext or the KernelQuery.
template <class Attrs>
std::string plan_attention(const Attrs& attrs, const Dims& q, const Dims& k, const Dims& v, const Dims& scale,
                           const Dims* mask, const Tensor* const shapes[4], AttentionPlan* p) {
  if (dims_numel(scale) != 1 || scale.size() > 4) return "scale is not a scalar";
  const std::vector<int64_t> p0213{0, 2, 1, 3};
  const auto qv = head_view(q, *shapes[0], attrs.attr_ints("q_perm", p0213));
  const auto kv = head_view(k, *shapes[1], attrs.attr_ints("k_perm", {0, 2, 3, 1}));
  const auto vv = head_view(v, *shapes[2], attrs.attr_ints("v_perm", p0213));
  if (!qv || !kv || !vv) return "a q/k/v reshape or permutation is not a 4-D head view";
  // Q [B, H, S, Dh] x K [B, H, Dh, Sk] -> [B, H, S, Sk]; x V [B, H, Sk, Dv] -> [B, H, S, Dv].
  const int64_t nb = qv->dim[0], nh = qv->dim[1], s = qv->dim[2], dh = qv->dim[3], sk = kv->dim[3],
                dv = vv->dim[3];
  if (kv->dim[0] != nb || vv->dim[0] != nb || kv->dim[1] != nh || vv->dim[1] != nh || kv->dim[2] != dh ||
      vv->dim[2] != sk)
    return "the q/k/v head views do not multiply";
  if (nb * nh * s * sk * dh * dv == 0) return "a tensor is empty";
  // The reference passes softmax_axis (default -1) to Softmax at softmax_opset; before opset 13
  // an axis of 3 coerces to [B*H*S, Sk], the same rows.
  const int64_t axis = attrs.attr_int("softmax_axis", -1);
  if (axis != 3 && axis != -1) return "softmax_axis " + std::to_string(axis) + " is not the last";
  // Mask strides over [B, H, S, Sk] (0 where it broadcasts); it must not enlarge the scores.
  const int64_t sdims[4] = {nb, nh, s, sk};
  if (mask) {
    if (mask->size() > 4) return "the mask's rank is above 4";
    const std::vector<int64_t> st = strides_of(*mask);
    const size_t off = 4 - mask->size();
    for (size_t i = 0; i < mask->size(); ++i) {
      const int64_t md = (*mask)[i];
      if (md != 1 && md != sdims[off + i]) return "the mask " + to_string(*mask) + " does not broadcast to the scores";
      p->ms[off + i] = md == 1 ? 0 : st[i];
    }
  }
  // Context [B, H, S, Dv] -> Transpose(out_perm) (contiguous) -> Reshape(out_shape).
  const std::vector<int64_t> out_perm = attrs.attr_ints("out_perm", p0213);
  if (!is_perm4(out_perm)) return "out_perm is not a 4-D permutation";
  const int64_t odims[4] = {nb, nh, s, dv};
  Dims tdims(4);
  for (size_t j = 0; j < 4; ++j) tdims[j] = odims[out_perm[j]];
  const std::vector<int64_t> tst = strides_of(tdims);
  for (size_t j = 0; j < 4; ++j) p->os[out_perm[j]] = tst[j];
  const std::optional<Dims> ydims = reshape_dims(tdims, *shapes[3]);
  if (!ydims) return "the output reshape does not fit";
  p->qv = *qv;
  p->kv = *kv;
  p->vv = *vv;
  p->nb = nb;
  p->nh = nh;
  p->s = s;
  p->dh = dh;
  p->sk = sk;
  p->dv = dv;
  p->ydims = *ydims;
  return "";
}

Verdict attention_supports(const KernelQuery& q) {
  if (Verdict v = need_tensors(q, {0, 1, 2, 3, 4, 5, 6, 7}); !v.accepted()) return v;
  if (q.has_input(8)) {
    if (Verdict v = need_tensors(q, {8}); !v.accepted()) return v;
  }
  const Tensor* shapes[4] = {q.value(4), q.value(5), q.value(6), q.value(7)};
  for (const Dims* d : {q.dims(0), q.dims(1), q.dims(2), q.dims(3)})
    if (!d) return later();
  if (q.has_input(8) && !q.dims(8)) return later();
  for (const Tensor* t : shapes)
    if (!t) return later();
  AttentionPlan p;
  const std::string why = plan_attention(q, *q.dims(0), *q.dims(1), *q.dims(2), *q.dims(3),
                                         q.has_input(8) ? q.dims(8) : nullptr, shapes, &p);
  return why.empty() ? accept() : refuse(why);
}

Status attention(KernelContext& ctx) {
  const Tensor &q = ctx.input(0), &k = ctx.input(1), &v = ctx.input(2), &scale = ctx.input(3);
  const Tensor* mask = ctx.has_input(8) ? &ctx.input(8) : nullptr;
  const Tensor* shapes[4] = {&ctx.input(4), &ctx.input(5), &ctx.input(6), &ctx.input(7)};
  AttentionPlan p;
  const std::string why =
      plan_attention(ctx, q.dims(), k.dims(), v.dims(), scale.dims(), mask ? &mask->dims() : nullptr, shapes, &p);
  if (!why.empty()) return outside_supports(ctx, why);
  const auto qv = &p.qv, kv = &p.kv, vv = &p.vv;
  const int64_t nb = p.nb, nh = p.nh, s = p.s, dh = p.dh, sk = p.sk, dv = p.dv;
  const int64_t* ms = p.ms;
  const int64_t* os = p.os;
  const Dims* ydims = &p.ydims;

  float sc = scale.data<float>()[0];
  if (ctx.attr_int("scale_is_div", 1)) sc = 1.0f / sc;
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate_uninitialized(DType::F32, *ydims));

  // Work items: (batch, head, block of query rows), split evenly over the threads; each reads
  // q, k, v and the mask in place (attention_core.cc), so nothing is packed per head here.
  const int64_t heads = nb * nh, rb = attend_block_rows(), row_blocks = (s + rb - 1) / rb;
  const float *qd = q.data<float>(), *kd = k.data<float>(), *vd = v.data<float>();
  const float* md = mask ? mask->data<float>() : nullptr;
  float* yd = y.data<float>();
  const bool threaded = heads * s * sk * (dh + dv) > 65536;
#pragma omp parallel for schedule(static) if (threaded)
  for (int64_t item = 0; item < heads * row_blocks; ++item) {
    const int64_t bh = item / row_blocks, r0 = (item % row_blocks) * rb;
    const int64_t b = bh / nh, h = bh % nh;
    AttendRows a{};
    a.q = qd + b * qv->stride[0] + h * qv->stride[1];
    a.q_row = qv->stride[2];
    a.q_ch = qv->stride[3];
    // K's view is [B, H, Dh, Sk]: channel stride 2, key stride 3.
    a.k = kd + b * kv->stride[0] + h * kv->stride[1];
    a.k_key = kv->stride[3];
    a.k_ch = kv->stride[2];
    a.v = vd + b * vv->stride[0] + h * vv->stride[1];
    a.v_key = vv->stride[2];
    a.v_ch = vv->stride[3];
    a.mask = md ? md + b * ms[0] + h * ms[1] : nullptr;
    a.mask_row = ms[2];
    a.mask_key = ms[3];
    a.out = yd + b * os[0] + h * os[1];
    a.out_row = os[2];
    a.out_ch = os[3];
    a.scale = sc;
    a.row_begin = r0;
    a.row_end = std::min(s, r0 + rb);
    a.dh = dh;
    a.sk = sk;
    a.dv = dv;
    attend_rows(a);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

GBX_REGISTER_KERNEL({kGearboxDomain, "Attention", 1, 1, kEngineSimd, {DType::F32}, attention});
// Q, K, V, the bias and the mask are float32 (4-7 are int64 shape tensors).
GBX_KERNEL_SUPPORT(attention, {.inputs = {{DType::F32}, {DType::F32}, {DType::F32}, {DType::F32}, {}, {}, {}, {}, {DType::F32}},
                               .supports = attention_supports});

}  // namespace gearbox::simd
