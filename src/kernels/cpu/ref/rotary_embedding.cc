// com.microsoft RotaryEmbedding (ONNX Runtime's contrib op, opset 1), reference: rotary position
// embeddings applied to each head of a [B, S, N*H] or [B, N, S, H] input. Per head vector x at
// position p, with the cache rows cos = cos_cache[p], sin = sin_cache[p] (rotary_dim / 2 values
// each), the first rotary_dim values rotate in pairs and the rest pass through:
//   halves (interleaved = 0):  y[i] = x[i] cos[i] - x[i + d/2] sin[i], y[i + d/2] = x[i + d/2] cos[i] + x[i] sin[i]
//   pairs  (interleaved = 1):  y[2i] = x[2i] cos[i] - x[2i+1] sin[i],  y[2i+1] = x[2i+1] cos[i] + x[2i] sin[i]
// Positions come from position_ids: one value (an offset: position s of the sequence is offset + s)
// or [B, S]. Shapes are read as ONNX Runtime reads them: without rotary_embedding_dim the head
// size is twice the cache's width; with it, num_heads is required and the head size is hidden /
// num_heads. A position outside the cache is refused (ONNX Runtime reads past it).
#include <vector>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/nn_util.h"
#include "kernels/cpu/ref/ref_util.h"
#include "kernels/cpu/ref/rotary.h"

namespace gearbox::ref {
namespace {

Status rotary_embedding(KernelContext& ctx) {
  for (size_t i = 0; i < 4; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& x = ctx.input(0);
  const DType dt = x.dtype();
  if (nn::is_half_like(dt)) return nn::run_widened(ctx, dt, rotary_embedding);
  if (dt != DType::F32) return ctx.unsupported_dtype(dt);
  const Tensor& pos_t = ctx.input(1);
  const Tensor& cos_t = ctx.input(2);
  const Tensor& sin_t = ctx.input(3);
  if (x.rank() != 3 && x.rank() != 4)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "input must be [B, S, hidden] or [B, N, S, H], got ", describe(x));
  if (cos_t.rank() != 2 || cos_t.dtype() != dt || sin_t.dtype() != dt || cos_t.dims() != sin_t.dims())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "cos_cache ", describe(cos_t), " and sin_cache ", describe(sin_t),
                     " must be two ", dtype_name(dt), " [max_sequence_length, rotary_dim / 2] tensors");
  const bool transposed = x.rank() == 4;  // [B, N, S, H]
  const int64_t batch = x.dim(0), seq = transposed ? x.dim(2) : x.dim(1);
  const int64_t hidden = transposed ? x.dim(1) * x.dim(3) : x.dim(2);
  const int64_t attr_dim = ctx.attr_int("rotary_embedding_dim", 0), attr_heads = ctx.attr_int("num_heads", 0);
  if (attr_dim < 0 || attr_heads < 0 || (attr_dim > 0 && attr_heads == 0))
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "rotary_embedding_dim ", attr_dim, " and num_heads ", attr_heads,
                     ": both non-negative, and num_heads is needed with rotary_embedding_dim");
  const int64_t max_seq = cos_t.dim(0), half = cos_t.dim(1);
  const int64_t head = attr_dim == 0 ? 2 * half : hidden / attr_heads;
  const int64_t heads = attr_heads > 0 ? attr_heads : (head > 0 ? hidden / head : 0);
  const int64_t rot = attr_dim > 0 ? attr_dim : head;
  if (head <= 0 || heads * head != hidden || rot > head || rot % 2 != 0 || rot / 2 != half ||
      (transposed && (x.dim(1) != heads || x.dim(3) != head)))
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "input ", describe(x), " with num_heads ", attr_heads,
                     " and rotary_embedding_dim ", attr_dim, " does not fit a cache of width ", half, " (head size ",
                     head, ", rotary dim ", rot, ")");
  GBX_ASSIGN_OR_RETURN(std::vector<int64_t> pos, read_ints(ctx, pos_t));
  const bool offset = pos.size() == 1 && pos_t.rank() <= 1;
  if (!offset && (pos_t.rank() != 2 || pos_t.dim(0) != batch || pos_t.dim(1) != seq))
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "position_ids ", describe(pos_t), " must be one offset or [", batch,
                     ", ", seq, "]");
  const std::vector<double> c = read_doubles(cos_t), s = read_doubles(sin_t), in = read_doubles(x);
  std::vector<double> out(in.size());
  const bool interleaved = ctx.attr_int("interleaved", 0) != 0;
  // Strides of (batch, sequence, head) in elements.
  const int64_t head_stride = transposed ? seq * head : head, seq_stride = transposed ? head : heads * head;
  const int64_t batch_stride = seq * heads * head;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t) {
      const int64_t p = offset ? pos[0] + t : pos[size_t(b * seq + t)];
      if (p < 0 || p >= max_seq)
        return ctx.error(ErrorCode::INVALID_ARGUMENT, "position ", p, " (batch ", b, ", token ", t,
                         ") is outside the cos/sin caches of ", max_seq, " positions");
      const double* cr = &c[size_t(p * half)];
      const double* sr = &s[size_t(p * half)];
      for (int64_t n = 0; n < heads; ++n) {
        const size_t at = size_t(b * batch_stride + t * seq_stride + n * head_stride);
        const double* xi = &in[at];
        double* yo = &out[at];
        for (int64_t i = 0; i < head; ++i) yo[i] = xi[i];  // the part past rot passes through
        rotate_head(yo, cr, sr, half, interleaved);
      }
    }
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, x.dims()));
  store_doubles(y, out);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL(
    {"com.microsoft", "RotaryEmbedding", 1, 1, kEngineRef, {DType::F32, DType::F16, DType::BF16}, rotary_embedding});

}  // namespace
}  // namespace gearbox::ref
