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
// over another axis, shapes the reshapes or matmuls reject or broadcast) runs the reference
// kernel, which also produces the errors.
#include <algorithm>
#include <optional>
#include <vector>

#include "kernels/cpu/simd/attention_core.h"
#include "kernels/cpu/simd/simd_util.h"

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
std::optional<View4> head_view(const Tensor& x, const Tensor& shape, const std::vector<int64_t>& perm) {
  if (!is_perm4(perm)) return std::nullopt;
  std::optional<Dims> r = reshape_dims(x.dims(), shape);
  if (!r || r->size() != 4) return std::nullopt;
  const std::vector<int64_t> st = strides_of(*r);
  View4 v;
  for (size_t j = 0; j < 4; ++j) {
    v.dim[j] = (*r)[static_cast<size_t>(perm[j])];
    v.stride[j] = st[static_cast<size_t>(perm[j])];
  }
  return v;
}

Status attention(KernelContext& ctx) {
  for (size_t i = 0; i < 8; ++i)
    if (!ctx.has_input(i) || !ctx.input_value(i).is_tensor()) return run_ref(ctx);
  const Tensor &q = ctx.input(0), &k = ctx.input(1), &v = ctx.input(2), &scale = ctx.input(3);
  for (const Tensor* t : {&q, &k, &v, &scale})
    if (t->dtype() != DType::F32) return run_ref(ctx);
  const Tensor* mask = nullptr;
  if (ctx.has_input(8)) {
    if (!ctx.input_value(8).is_tensor() || ctx.input(8).dtype() != DType::F32) return run_ref(ctx);
    mask = &ctx.input(8);
  }
  if (scale.numel() != 1 || scale.rank() > 4) return run_ref(ctx);
  const std::vector<int64_t> p0213{0, 2, 1, 3};
  const auto qv = head_view(q, ctx.input(4), ctx.attr_ints("q_perm", p0213));
  const auto kv = head_view(k, ctx.input(5), ctx.attr_ints("k_perm", {0, 2, 3, 1}));
  const auto vv = head_view(v, ctx.input(6), ctx.attr_ints("v_perm", p0213));
  if (!qv || !kv || !vv) return run_ref(ctx);
  // Q [B, H, S, Dh] x K [B, H, Dh, Sk] -> [B, H, S, Sk]; x V [B, H, Sk, Dv] -> [B, H, S, Dv].
  const int64_t nb = qv->dim[0], nh = qv->dim[1], s = qv->dim[2], dh = qv->dim[3], sk = kv->dim[3],
                dv = vv->dim[3];
  if (kv->dim[0] != nb || vv->dim[0] != nb || kv->dim[1] != nh || vv->dim[1] != nh || kv->dim[2] != dh ||
      vv->dim[2] != sk)
    return run_ref(ctx);
  if (nb * nh * s * sk * dh * dv == 0) return run_ref(ctx);
  // The reference passes softmax_axis (default -1) to Softmax at softmax_opset; before opset 13
  // an axis of 3 coerces to [B*H*S, Sk], the same rows.
  const int64_t axis = ctx.attr_int("softmax_axis", -1);
  if (axis != 3 && axis != -1) return run_ref(ctx);
  // Mask strides over [B, H, S, Sk] (0 where it broadcasts); it must not enlarge the scores.
  const int64_t sdims[4] = {nb, nh, s, sk};
  int64_t ms[4] = {0, 0, 0, 0};
  if (mask) {
    if (mask->rank() > 4) return run_ref(ctx);
    const std::vector<int64_t> st = strides_of(mask->dims());
    const size_t off = 4 - mask->rank();
    for (size_t i = 0; i < mask->rank(); ++i) {
      const int64_t md = mask->dim(i);
      if (md != 1 && md != sdims[off + i]) return run_ref(ctx);
      ms[off + i] = md == 1 ? 0 : st[i];
    }
  }
  // Context [B, H, S, Dv] -> Transpose(out_perm) (contiguous) -> Reshape(out_shape).
  const std::vector<int64_t> out_perm = ctx.attr_ints("out_perm", p0213);
  if (!is_perm4(out_perm)) return run_ref(ctx);
  const int64_t odims[4] = {nb, nh, s, dv};
  Dims tdims(4);
  for (size_t j = 0; j < 4; ++j) tdims[j] = odims[out_perm[j]];
  const std::vector<int64_t> tst = strides_of(tdims);
  int64_t os[4];
  for (size_t j = 0; j < 4; ++j) os[out_perm[j]] = tst[j];
  const std::optional<Dims> ydims = reshape_dims(tdims, ctx.input(7));
  if (!ydims) return run_ref(ctx);

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

GBX_REGISTER_KERNEL({kGearboxDomain, "Attention", 1, 1, kEngineSimd, {}, attention});

}  // namespace gearbox::simd
