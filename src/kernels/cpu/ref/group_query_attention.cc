// com.microsoft GroupQueryAttention (ONNX Runtime's contrib op, opset 1), reference: causal
// multi-head attention in which groups of num_heads / kv_num_heads query heads share one key/value
// head, over a KV cache that the op extends. Inputs, in ONNX Runtime's slots:
//   0 query [B, S, N*H] (or packed Q|K|V [B, S, (N + 2 kvN) * H] when key and value are omitted),
//   1 key, 2 value [B, S, kvN*H], 3 past_key, 4 past_value [B, kvN, P, H] (BNSH),
//   5 seqlens_k [B] (each batch's valid total length minus one), 6 total_sequence_length (one value),
//   7 cos_cache, 8 sin_cache [max_positions, rotary_dim / 2], 9 position_ids [B, S],
//   10 attention_bias [B or 1, N or 1, S, total_sequence_length], 11 head_sink [N].
// The three outputs are [B, S, N*H] and present_key/present_value [B, kvN, max(total, P), H].
//
// Per batch b, with tot = seqlens_k[b] + 1: the call is the first prompt when S equals
// total_sequence_length (no past is read: past = 0), else past = tot - S tokens of the past buffer
// are kept. present holds rows [0, past) of past_key/past_value, then the S new key/value rows
// (rotated when do_rotary), and zeros after them. Query token s of head h reads kv head
// h / (N / kvN) at keys [start, end): end = min(past + s + 1, tot) (causal; tot with causal = 0),
// start = past + s + 1 - local_window_size when local_window_size > 0 (the window counts the
// token itself), else 0; an empty range gives zeros. The logits are scale * q.k (scale 0 means
// 1 / sqrt(H)), then softcap * tanh(x / softcap) when softcap > 0, then + attention_bias; the
// softmax's denominator gains exp(head_sink[h]) with a head sink, or exp(0) with smooth_softmax.
// Rotary (do_rotary = 1, as RotaryEmbedding does it, halves or rotary_interleaved pairs, the first
// rotary_dim values of each head) turns Q and the new K at position past + s, or with
// position_ids at position_ids[b, s]; on a first prompt ONNX Runtime reads only the first value of
// position_ids (position_ids[0] + s) and turns padding tokens at s like the others.
// All of this is what ONNX Runtime 1.30's CPU kernel computes, measured case by case by the oracle
// suite (ms_GroupQueryAttention_*), and it is computed here in double.
//
// Refused, because ONNX Runtime's CPU kernel does not run them or this kernel does not implement
// them: the quantized KV cache (k_scale, v_scale inputs; k_quant_type, v_quant_type,
// kv_cache_bit_width attributes), q_norm_weight/k_norm_weight, sliding_window_cache, qk_output and
// the output_qk output, a key/value of no new tokens (shared KV), and cos/sin caches without
// do_rotary (ONNX Runtime then keeps K unturned, yet its output is not that of unturned
// attention). Where ONNX Runtime would read past a buffer (a past longer than past_key holds, a
// position past the cos/sin caches, a key past attention_bias's last column) the kernel refuses
// instead. ONNX Runtime's own limits that do not
// change the result (head size a multiple of 8 or 16, one batch for a multi-token step after a
// past) are not enforced.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/nn_util.h"
#include "kernels/cpu/ref/ref_util.h"
#include "kernels/cpu/ref/rotary.h"

namespace gearbox::ref {
namespace {

enum Slot : size_t {
  kQuery,
  kKey,
  kValue,
  kPastKey,
  kPastValue,
  kSeqlensK,
  kTotalSeqLen,
  kCos,
  kSin,
  kPositionIds,
  kAttentionBias,
  kHeadSink,
  kKScale,
  kVScale,
  kQNormWeight,
  kKNormWeight,
};

Status group_query_attention(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(kQuery));
  const DType dt = ctx.input(kQuery).dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, group_query_attention);
  if (dt != DType::F32) return ctx.unsupported_dtype(dt);

  // The forms this kernel does not compute, named before anything is read.
  static const char* const kRefusedInputs[][2] = {
      {"k_scale", "a quantized KV cache"},
      {"v_scale", "a quantized KV cache"},
      {"q_norm_weight", "the per-head Q/K RMS normalization"},
      {"k_norm_weight", "the per-head Q/K RMS normalization"},
  };
  for (size_t i = kKScale; i <= kKNormWeight; ++i)
    if (ctx.has_input(i))
      return ctx.error(ErrorCode::OP_UNSUPPORTED, "input ", kRefusedInputs[i - kKScale][0], " (",
                       kRefusedInputs[i - kKScale][1], ") is not supported");
  for (const char* attr : {"qk_output", "sliding_window_cache", "kv_cache_bit_width"})
    if (ctx.attr_int(attr, 0) != 0)
      return ctx.error(ErrorCode::OP_UNSUPPORTED, "attribute ", attr, " = ", ctx.attr_int(attr, 0),
                       " is not supported (only 0)");
  for (const char* attr : {"k_quant_type", "v_quant_type"})
    if (ctx.attr_string(attr, "NONE") != "NONE")
      return ctx.error(ErrorCode::OP_UNSUPPORTED, "attribute ", attr, " = '", ctx.attr_string(attr, ""),
                       "': a quantized KV cache is not supported");
  if (ctx.wants_output(3))
    return ctx.error(ErrorCode::OP_UNSUPPORTED, "output 3 (output_qk, the QK values) is not supported");

  const int64_t heads = ctx.attr_int("num_heads", 0), kv_heads = ctx.attr_int("kv_num_heads", 0);
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "num_heads ", heads, " and kv_num_heads ", kv_heads,
                     " must be positive, num_heads a multiple of kv_num_heads");
  const int64_t causal = ctx.attr_int("causal", 1), window = ctx.attr_int("local_window_size", -1);
  const int64_t do_rotary = ctx.attr_int("do_rotary", 0);
  const double softcap = ctx.attr_float("softcap", 0.0f);
  const bool interleaved = ctx.attr_int("rotary_interleaved", 0) != 0;
  if ((causal != 0 && causal != 1) || window < -1 || (causal == 0 && window > 0) ||
      (do_rotary != 0 && do_rotary != 1) || softcap < 0)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "causal ", causal, ", local_window_size ", window, ", do_rotary ",
                     do_rotary, ", softcap ", softcap,
                     ": causal and do_rotary are 0 or 1, local_window_size is -1 or positive (and -1 without causal), "
                     "softcap is not negative");

  // Optional inputs: nullptr when omitted.
  std::vector<const Tensor*> in(kHeadSink + 1, nullptr);
  for (size_t i = 0; i < in.size(); ++i)
    if (ctx.has_input(i)) {
      GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
      in[i] = &ctx.input(i);
    }
  if (!in[kSeqlensK] || !in[kTotalSeqLen])
    return ctx.error(ErrorCode::INVALID_ARGUMENT,
                     "seqlens_k (input 5) and total_sequence_length (input 6) are required");

  const Tensor& q_t = *in[kQuery];
  if (q_t.rank() != 3) return ctx.error(ErrorCode::SHAPE_MISMATCH, "query must be [B, S, hidden], got ", describe(q_t));
  const int64_t batch = q_t.dim(0), seq = q_t.dim(1), width = q_t.dim(2);
  const bool packed = in[kKey] == nullptr;
  if (packed != (in[kValue] == nullptr))
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "key and value are both given or both omitted (packed QKV)");
  const int64_t per_head_count = packed ? heads + 2 * kv_heads : heads;
  const int64_t head = width / per_head_count;
  if (head <= 0 || head * per_head_count != width)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "query ", describe(q_t), " does not split into ", per_head_count,
                     packed ? " packed Q/K/V heads" : " heads");
  if (!packed) {
    const Tensor& k_t = *in[kKey];
    const Tensor& v_t = *in[kValue];
    if (k_t.rank() == 3 && k_t.dim(0) == batch && k_t.dim(1) == 0 && in[kPastKey])
      return ctx.error(ErrorCode::OP_UNSUPPORTED, "a key of no new tokens (shared KV cache) is not supported");
    if (k_t.dtype() != dt || v_t.dtype() != dt || k_t.rank() != 3 || k_t.dims() != v_t.dims() || k_t.dim(0) != batch ||
        k_t.dim(1) != seq || k_t.dim(2) != kv_heads * head)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "key ", describe(k_t), " and value ", describe(v_t), " must both be ",
                       dtype_name(dt), " [", batch, ", ", seq, ", ", kv_heads * head, "]");
  }

  const Tensor* pk_t = in[kPastKey];
  const Tensor* pv_t = in[kPastValue];
  if ((pk_t == nullptr) != (pv_t == nullptr))
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "past_key and past_value are both given or both omitted");
  int64_t past_cap = 0;  // P, the past buffer's rows
  if (pk_t) {
    if (pk_t->dtype() != dt || pv_t->dtype() != dt || pk_t->rank() != 4 || pk_t->dims() != pv_t->dims() ||
        pk_t->dim(0) != batch || pk_t->dim(1) != kv_heads || pk_t->dim(3) != head)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "past_key ", describe(*pk_t), " and past_value ", describe(*pv_t),
                       " must both be ", dtype_name(dt), " [", batch, ", ", kv_heads, ", past, ", head, "]");
    past_cap = pk_t->dim(2);
  }

  GBX_ASSIGN_OR_RETURN(std::vector<int64_t> seqlens, read_ints(ctx, *in[kSeqlensK]));
  if (in[kSeqlensK]->rank() < 1 || int64_t(seqlens.size()) != batch)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "seqlens_k ", describe(*in[kSeqlensK]), " must hold ", batch,
                     " values, one per batch");
  GBX_ASSIGN_OR_RETURN(std::vector<int64_t> total_v, read_ints(ctx, *in[kTotalSeqLen]));
  if (total_v.size() != 1 || total_v[0] <= 0)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "total_sequence_length ", describe(*in[kTotalSeqLen]),
                     " must be one positive value");
  const int64_t total = total_v[0];
  // The present buffers are sized by total_sequence_length, a value of the input: it may not ask
  // for more rows than the past buffer and the new tokens fill (the valid cases never do).
  if (total > past_cap + seq)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "total_sequence_length ", total, " exceeds the ", past_cap,
                     " rows of the past buffer plus the ", seq, " new tokens");
  const int64_t present_len = std::max(total, past_cap);  // T
  const bool first_prompt = seq == total;

  // Rotary caches and positions.
  const Tensor* cos_t = in[kCos];
  const Tensor* sin_t = in[kSin];
  if ((cos_t == nullptr) != (sin_t == nullptr))
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "cos_cache and sin_cache are both given or both omitted");
  if (do_rotary && !cos_t) return ctx.error(ErrorCode::INVALID_ARGUMENT, "do_rotary = 1 needs cos_cache and sin_cache");
  if (!do_rotary && cos_t)
    return ctx.error(ErrorCode::OP_UNSUPPORTED, "cos_cache/sin_cache without do_rotary = 1 are not supported");
  int64_t half = 0, max_pos = 0;
  std::vector<double> cos_v, sin_v;
  if (do_rotary) {
    if (cos_t->rank() != 2 || cos_t->dtype() != dt || sin_t->dtype() != dt || cos_t->dims() != sin_t->dims() ||
        cos_t->dim(1) <= 0 || 2 * cos_t->dim(1) > head)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "cos_cache ", describe(*cos_t), " and sin_cache ", describe(*sin_t),
                       " must be two ", dtype_name(dt), " [max_positions, rotary_dim / 2] with rotary_dim <= ", head);
    max_pos = cos_t->dim(0);
    half = cos_t->dim(1);
    cos_v = read_doubles(*cos_t);
    sin_v = read_doubles(*sin_t);
  }
  std::vector<int64_t> position_ids;
  if (do_rotary && in[kPositionIds]) {
    const Tensor& p = *in[kPositionIds];
    if (p.rank() != 2 || p.dim(0) != batch || p.dim(1) != seq)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "position_ids ", describe(p), " must be [", batch, ", ", seq, "]");
    GBX_ASSIGN_OR_RETURN(position_ids, read_ints(ctx, p));
  }

  const Tensor* bias_t = in[kAttentionBias];
  if (bias_t && (bias_t->dtype() != dt || bias_t->rank() != 4 || (bias_t->dim(0) != 1 && bias_t->dim(0) != batch) ||
                 (bias_t->dim(1) != 1 && bias_t->dim(1) != heads) || bias_t->dim(2) != seq || bias_t->dim(3) != total))
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "attention_bias ", describe(*bias_t), " must be ", dtype_name(dt), " [",
                     batch, " or 1, ", heads, " or 1, ", seq, ", ", total, "]");
  const Tensor* sink_t = in[kHeadSink];
  if (sink_t && (sink_t->dtype() != dt || sink_t->rank() != 1 || sink_t->dim(0) != heads))
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "head_sink ", describe(*sink_t), " must be ", dtype_name(dt), " [",
                     heads, "]");

  // Each batch's past length, checked against the buffers before anything is written.
  std::vector<int64_t> past(size_t(batch), 0), tot(size_t(batch), 0);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t t = seqlens[size_t(b)] + 1;
    const int64_t p = first_prompt ? 0 : t - seq;
    if (seqlens[size_t(b)] < 0 || p < 0 || p > past_cap || p + seq > present_len || t > present_len)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "seqlens_k[", b, "] = ", seqlens[size_t(b)], " (", t,
                       " tokens) does not fit: ", p, " past tokens from a past buffer of ", past_cap, " rows, plus ",
                       seq, " new ones, in a present buffer of ", present_len, " rows");
    if (bias_t && t > total)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "seqlens_k[", b, "] = ", seqlens[size_t(b)],
                       " reads keys past attention_bias's ", total, " columns");
    past[size_t(b)] = p;
    tot[size_t(b)] = t;
  }

  const std::vector<double> qkv = read_doubles(q_t);
  const std::vector<double> k_in = packed ? std::vector<double>() : read_doubles(*in[kKey]);
  const std::vector<double> v_in = packed ? std::vector<double>() : read_doubles(*in[kValue]);
  const std::vector<double> pk = pk_t ? read_doubles(*pk_t) : std::vector<double>();
  const std::vector<double> pv = pv_t ? read_doubles(*pv_t) : std::vector<double>();
  const std::vector<double> bias = bias_t ? read_doubles(*bias_t) : std::vector<double>();
  const std::vector<double> sink = sink_t ? read_doubles(*sink_t) : std::vector<double>();

  // Q as [B, S, N, H] and the present caches as [B, kvN, T, H], Q and the new keys rotated.
  std::vector<double> q(size_t(batch * seq * heads * head));
  std::vector<double> pres_k(size_t(batch * kv_heads * present_len * head), 0.0), pres_v(pres_k.size(), 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t p = past[size_t(b)];
    for (int64_t kh = 0; kh < kv_heads; ++kh)
      for (int64_t r = 0; r < p; ++r)
        for (int64_t i = 0; i < head; ++i) {
          const size_t from = size_t(((b * kv_heads + kh) * past_cap + r) * head + i);
          const size_t to = size_t(((b * kv_heads + kh) * present_len + r) * head + i);
          pres_k[to] = pk[from];
          pres_v[to] = pv[from];
        }
    for (int64_t s = 0; s < seq; ++s) {
      const int64_t pos = position_ids.empty()
                              ? (first_prompt ? s : p + s)
                              : (first_prompt ? position_ids[0] + s : position_ids[size_t(b * seq + s)]);
      if (do_rotary && (pos < 0 || pos >= max_pos))
        return ctx.error(ErrorCode::INVALID_ARGUMENT, "rotary position ", pos, " (batch ", b, ", token ", s,
                         ") is outside the cos/sin caches of ", max_pos, " positions");
      const double* c = do_rotary ? &cos_v[size_t(pos * half)] : nullptr;
      const double* sn = do_rotary ? &sin_v[size_t(pos * half)] : nullptr;
      const size_t row = size_t((b * seq + s) * width);
      for (int64_t h = 0; h < heads; ++h) {
        double* dst = &q[size_t(((b * seq + s) * heads + h) * head)];
        for (int64_t i = 0; i < head; ++i) dst[i] = qkv[row + size_t(h * head + i)];
        if (do_rotary) rotate_head(dst, c, sn, half, interleaved);
      }
      for (int64_t kh = 0; kh < kv_heads; ++kh) {
        const size_t to = size_t(((b * kv_heads + kh) * present_len + p + s) * head);
        for (int64_t i = 0; i < head; ++i) {
          if (packed) {
            pres_k[to + size_t(i)] = qkv[row + size_t((heads + kh) * head + i)];
            pres_v[to + size_t(i)] = qkv[row + size_t((heads + kv_heads + kh) * head + i)];
          } else {
            const size_t from = size_t(((b * seq + s) * kv_heads + kh) * head + i);
            pres_k[to + size_t(i)] = k_in[from];
            pres_v[to + size_t(i)] = v_in[from];
          }
        }
        if (do_rotary) rotate_head(&pres_k[to], c, sn, half, interleaved);
      }
    }
  }

  const float scale_attr = ctx.attr_float("scale", 0.0f);
  const double scale = scale_attr == 0.0f ? 1.0 / std::sqrt(double(head)) : double(scale_attr);
  const bool smooth = ctx.attr_int("smooth_softmax", 0) != 0;
  const int64_t group = heads / kv_heads;
  std::vector<double> out(size_t(batch * seq * heads * head), 0.0);
  std::vector<double> logits(static_cast<size_t>(present_len));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kh = h / group;
      const double* keys = &pres_k[size_t((b * kv_heads + kh) * present_len * head)];
      const double* values = &pres_v[size_t((b * kv_heads + kh) * present_len * head)];
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t causal_len = past[size_t(b)] + s + 1;
        const int64_t end = causal ? std::min(causal_len, tot[size_t(b)]) : tot[size_t(b)];
        const int64_t start = window > 0 && causal_len > window ? causal_len - window : 0;
        if (start >= end) continue;  // no key in reach: zeros, as ONNX Runtime writes
        const double* qv = &q[size_t(((b * seq + s) * heads + h) * head)];
        const double* brow =
            bias_t ? &bias[size_t(
                         (((bias_t->dim(0) == 1 ? 0 : b) * bias_t->dim(1) + (bias_t->dim(1) == 1 ? 0 : h)) * seq + s) *
                         total)]
                   : nullptr;
        double top = -INFINITY;
        for (int64_t j = start; j < end; ++j) {
          double x = 0;
          for (int64_t i = 0; i < head; ++i) x += qv[i] * keys[j * head + i];
          x *= scale;
          if (softcap > 0) x = softcap * std::tanh(x / softcap);
          if (brow) x += brow[j];
          logits[size_t(j)] = x;
          top = std::max(top, x);
        }
        // A sink is one more logit in the denominator only: head_sink[h], or 0 for smooth_softmax.
        const bool has_sink = sink_t || smooth;
        const double sink_logit = sink_t ? sink[size_t(h)] : 0.0;
        if (has_sink) top = std::max(top, sink_logit);
        double sum = has_sink ? std::exp(sink_logit - top) : 0.0;
        for (int64_t j = start; j < end; ++j) sum += logits[size_t(j)] = std::exp(logits[size_t(j)] - top);
        double* o = &out[size_t(((b * seq + s) * heads + h) * head)];
        for (int64_t j = start; j < end; ++j)
          for (int64_t i = 0; i < head; ++i) o[i] += logits[size_t(j)] / sum * values[j * head + i];
      }
    }

  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, {batch, seq, heads * head}));
  store_doubles(y, out);
  ctx.set_output(0, std::move(y));
  GBX_ASSIGN_OR_RETURN(Tensor present_key, Tensor::allocate(dt, {batch, kv_heads, present_len, head}));
  store_doubles(present_key, pres_k);
  ctx.set_output(1, std::move(present_key));
  GBX_ASSIGN_OR_RETURN(Tensor present_value, Tensor::allocate(dt, {batch, kv_heads, present_len, head}));
  store_doubles(present_value, pres_v);
  ctx.set_output(2, std::move(present_value));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"com.microsoft",
                     "GroupQueryAttention",
                     1,
                     1,
                     kEngineRef,
                     {DType::F32, DType::F16, DType::BF16},
                     group_query_attention});

}  // namespace
}  // namespace gearbox::ref
