// Quantization operators (reference, naive loops): QuantizeLinear, DequantizeLinear
// (per tensor, per axis, and blocked along the axis from opset 21), DynamicQuantizeLinear, MatMulInteger,
// QLinearMatMul, ConvInteger, QLinearConv.
//
// Integer arithmetic is carried in double, which is exact for the int8/uint8/int32 sums
// these ops produce. Rounding is round-half-to-even (std::nearbyint), then saturation to
// the output type, as the spec requires.
#include <cmath>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

bool is_quant_type(DType t) { return t == DType::U8 || t == DType::I8; }

double saturate(double v, DType t) {
  double lo = t == DType::U8 ? 0 : t == DType::I8 ? -128 : t == DType::I32 ? -2147483648.0 : -1e300;
  double hi = t == DType::U8 ? 255 : t == DType::I8 ? 127 : t == DType::I32 ? 2147483647.0 : 1e300;
  return std::min(std::max(v, lo), hi);
}

// Per-element scale and zero point: a scalar applies to all, a 1-D tensor to slices along
// `axis`, and (opset 21's block_size) a tensor of x's rank to blocks of `block` entries along
// `axis`. Holds the index function's parameters.
struct PerAxis {
  std::vector<double> scale, zp;
  int64_t inner = 1, len = 1;  // the product of x's dims after the axis, and x's size along it
  int64_t block = 0;           // entries per block along the axis; 0: one entry per slice
  size_t index(int64_t i) const {
    const int64_t a = (i / inner) % len;
    if (block == 0) return static_cast<size_t>(a);
    const int64_t blocks = (len + block - 1) / block;
    return static_cast<size_t>(((i / (inner * len)) * blocks + a / block) * inner + i % inner);
  }
  double s(int64_t i) const { return scale.size() == 1 ? scale[0] : scale[index(i)]; }
  double z(int64_t i) const {
    if (zp.empty()) return 0;
    return zp.size() == 1 ? zp[0] : zp[index(i)];
  }
};

// Opset 21's blocked form: scale has x's dims but ceil(D / block_size) along the axis.
Status blocked_scale(const KernelContext& ctx, const Tensor& x, const Tensor& scale, int64_t axis, PerAxis& p) {
  if (scale.rank() != x.rank())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "blocked scale ", describe(scale), " must have the rank of x ",
                     describe(x));
  for (size_t d = 0; d < x.rank(); ++d) {
    const int64_t want = d == static_cast<size_t>(axis) ? (x.dim(d) + p.block - 1) / p.block : x.dim(d);
    if (scale.dim(d) != want)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "blocked scale ", describe(scale), " must be ", want, " along axis ",
                       d, " for x ", describe(x), " and block_size ", p.block);
  }
  return Status::OK();
}

Result<PerAxis> per_axis(const KernelContext& ctx, const Tensor& x, const Tensor& scale, const Tensor* zp) {
  PerAxis p;
  p.scale = read_doubles(scale);
  if (zp) p.zp = read_doubles(*zp);
  if (p.scale.empty()) return ctx.error(ErrorCode::SHAPE_MISMATCH, "scale is empty");
  if (zp && zp->numel() != scale.numel())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "zero point ", describe(*zp), " does not match scale ",
                     describe(scale));
  p.block = ctx.opset() >= 21 ? ctx.attr_int("block_size", 0) : 0;
  if (p.block < 0) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "block_size ", p.block, " is negative");
  if (p.block > 0) {
    GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.attr_int("axis", 1), static_cast<int64_t>(x.rank())));
    p.len = x.dim(static_cast<size_t>(axis));
    for (size_t d = static_cast<size_t>(axis) + 1; d < x.rank(); ++d) p.inner *= x.dim(d);
    GBX_RETURN_IF_ERROR(blocked_scale(ctx, x, scale, axis, p));
    return p;
  }
  if (scale.numel() == 1 && scale.rank() <= 1) return p;
  if (scale.rank() != 1)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "scale must be a scalar or 1-D, got ", describe(scale));
  GBX_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(ctx, ctx.attr_int("axis", 1), static_cast<int64_t>(x.rank())));
  if (x.dim(static_cast<size_t>(axis)) != scale.numel())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "scale ", describe(scale), " does not match axis ", axis, " of ",
                     describe(x));
  p.len = scale.numel();
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.rank(); ++d) p.inner *= x.dim(d);
  return p;
}

Status quantize_linear(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  // Opset 21's output_dtype: the output type when there is no zero point to tell it.
  const int64_t output_dtype = ctx.opset() >= 21 ? ctx.attr_int("output_dtype", 0) : 0;
  if (output_dtype != 0 &&
      (output_dtype < 0 || output_dtype > 64 || !dtype_is_known(static_cast<int32_t>(output_dtype))))
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "output_dtype ", output_dtype,
                     " is not an ONNX type gearbox knows (QuantizeLinear here writes uint8 or int8)");
  DType out_t = zp ? zp->dtype() : output_dtype != 0 ? static_cast<DType>(output_dtype) : DType::U8;
  if (zp && output_dtype != 0 && static_cast<DType>(output_dtype) != out_t)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "output_dtype ", output_dtype, " differs from the zero point's ",
                     dtype_name(out_t));
  if (!is_quant_type(out_t)) return ctx.unsupported_dtype(out_t);
  GBX_ASSIGN_OR_RETURN(PerAxis p, per_axis(ctx, x, ctx.input(1), zp));
  std::vector<double> v = read_doubles(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double& e = v[static_cast<size_t>(i)];
    // Divide in float as the spec's reference does: in double, 0.5 / 0.019607844f is
    // 25.4999999 and would round the other way.
    const float q = static_cast<float>(e) / static_cast<float>(p.s(i));
    e = saturate(std::nearbyint(static_cast<double>(q)) + p.z(i), out_t);
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(out_t, x.dims()));
  store_doubles(y, v);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status dequantize_linear(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  if (!is_quant_type(x.dtype()) && x.dtype() != DType::I32) return ctx.unsupported_dtype(x.dtype());
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  GBX_ASSIGN_OR_RETURN(PerAxis p, per_axis(ctx, x, ctx.input(1), zp));
  std::vector<double> v = read_doubles(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double& e = v[static_cast<size_t>(i)];
    // Rounded to float first: the spec computes in the scale's precision.
    e = static_cast<double>(static_cast<float>(e - p.z(i)) * static_cast<float>(p.s(i)));
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, make_float_tensor(ctx.input(1).dtype(), x.dims(), v));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status dynamic_quantize_linear(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::F32) return ctx.unsupported_dtype(x.dtype());
  const float* in = x.data<float>();
  float mn = 0, mx = 0;  // the range always includes 0
  for (int64_t i = 0; i < x.numel(); ++i) {
    mn = std::min(mn, in[i]);
    mx = std::max(mx, in[i]);
  }
  float scale = (mx - mn) / 255.0f;
  float zp = scale == 0 ? 0 : static_cast<float>(saturate(std::nearbyint(0 - mn / scale), DType::U8));
  Tensor y(DType::U8, x.dims());
  for (int64_t i = 0; i < x.numel(); ++i)
    y.data<uint8_t>()[i] =
        static_cast<uint8_t>(scale == 0 ? zp : saturate(std::nearbyint(in[i] / scale) + zp, DType::U8));
  ctx.set_output(0, std::move(y));
  ctx.set_output(1, Tensor::scalar<float>(scale));
  ctx.set_output(2, Tensor::scalar<uint8_t>(static_cast<uint8_t>(zp)));
  return Status::OK();
}

// numpy.matmul on doubles, with batch broadcasting; a_zp/b_zp are subtracted first (b_zp
// may be per column).
Result<std::pair<Dims, std::vector<double>>> matmul(const KernelContext& ctx, const Tensor& a, const Tensor& b,
                                                    const std::vector<double>& a_zp, const std::vector<double>& b_zp) {
  if (a.rank() == 0 || b.rank() == 0)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "matmul operands must have rank >= 1: ", describe(a), ", ",
                     describe(b));
  Dims ad = a.dims(), bd = b.dims();
  const bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  if (a1) ad.insert(ad.begin(), 1);
  if (b1) bd.push_back(1);
  const int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
  if (bd[bd.size() - 2] != K)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "matmul inner dims differ: ", describe(a), " x ", describe(b));
  Dims abatch(ad.begin(), ad.end() - 2), bbatch(bd.begin(), bd.end() - 2);
  GBX_ASSIGN_OR_RETURN(Dims batch, broadcast_shapes(ctx, {abatch, bbatch}));
  auto as = broadcast_strides(abatch, batch), bs = broadcast_strides(bbatch, batch);
  std::vector<double> av = read_doubles(a), bv = read_doubles(b);
  const int64_t nb = numel(batch);
  std::vector<double> out(static_cast<size_t>(nb * M * N));
  std::vector<int64_t> idx(batch.size(), 0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t ao = 0, bo = 0, rem = bi;
    for (size_t d = batch.size(); d-- > 0;) {
      int64_t k = rem % batch[d];
      rem /= batch[d];
      ao += k * as[d];
      bo += k * bs[d];
    }
    const double* A = &av[static_cast<size_t>(ao * M * K)];
    const double* B = &bv[static_cast<size_t>(bo * K * N)];
    for (int64_t i = 0; i < M; ++i) {
      double za = a_zp.empty() ? 0 : a_zp.size() == 1 ? a_zp[0] : a_zp[static_cast<size_t>(i % int64_t(a_zp.size()))];
      for (int64_t j = 0; j < N; ++j) {
        double zb = b_zp.empty() ? 0 : b_zp.size() == 1 ? b_zp[0] : b_zp[static_cast<size_t>(j % int64_t(b_zp.size()))];
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += (A[i * K + k] - za) * (B[k * N + j] - zb);
        out[static_cast<size_t>((bi * M + i) * N + j)] = acc;
      }
    }
  }
  Dims od = batch;
  if (!a1) od.push_back(M);
  if (!b1) od.push_back(N);
  return std::make_pair(od, out);
}

// Element 0 of input i, which must hold at least one element.
Result<double> scalar_input(const KernelContext& ctx, size_t i) {
  if (ctx.input(i).numel() < 1)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "input ", i, " is empty; a scalar is required");
  return ctx.input(i).at_double(0);
}

std::vector<double> opt_doubles(const KernelContext& ctx, size_t i) {
  return ctx.has_input(i) && ctx.input_value(i).is_tensor() ? read_doubles(ctx.input(i)) : std::vector<double>{};
}

Status matmul_integer(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  GBX_ASSIGN_OR_RETURN(auto r, matmul(ctx, ctx.input(0), ctx.input(1), opt_doubles(ctx, 2), opt_doubles(ctx, 3)));
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(DType::I32, r.first));
  store_doubles(y, r.second);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// Requantizes real = acc * multiplier (+ per-channel) into y's type with y_zp.
Status qlinear_matmul(KernelContext& ctx) {
  for (size_t i = 0; i < 8; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const std::vector<double> as = read_doubles(ctx.input(1)), bs = read_doubles(ctx.input(4));
  GBX_ASSIGN_OR_RETURN(double ys, scalar_input(ctx, 6));
  GBX_ASSIGN_OR_RETURN(double yz, scalar_input(ctx, 7));
  if (as.empty() || bs.empty()) return ctx.error(ErrorCode::INVALID_ARGUMENT, "a_scale and b_scale must not be empty");
  GBX_ASSIGN_OR_RETURN(auto r,
                       matmul(ctx, ctx.input(0), ctx.input(3), read_doubles(ctx.input(2)), read_doubles(ctx.input(5))));
  const DType out_t = ctx.input(7).dtype();
  const int64_t N = ctx.input(3).rank() == 1 ? 1 : ctx.input(3).dims().back();
  for (size_t i = 0; i < r.second.size(); ++i) {
    double b_scale = bs.size() == 1 ? bs[0] : bs[i % static_cast<size_t>(N)];
    double real = r.second[i] * (static_cast<double>(static_cast<float>(as[0]) * static_cast<float>(b_scale)) / ys);
    r.second[i] = saturate(std::nearbyint(real) + yz, out_t);
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(out_t, r.first));
  store_doubles(y, r.second);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// Naive N-D convolution on doubles: x [N, C, spatial...], w [M, C/group, kernel...].
// x_zp is a scalar, w_zp scalar or per output channel.
Result<std::pair<Dims, std::vector<double>>> conv(const KernelContext& ctx, const Tensor& x, const Tensor& w,
                                                  double x_zp, const std::vector<double>& w_zp) {
  if (x.rank() < 3 || w.rank() != x.rank())
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "conv needs X [N, C, ...] and W of the same rank; got ", describe(x),
                     ", ", describe(w));
  const size_t sd = x.rank() - 2;
  const int64_t N = x.dim(0), C = x.dim(1), M = w.dim(0);
  const int64_t group = ctx.attr_int("group", 1);
  if (group <= 0 || C % group != 0 || M % group != 0 || w.dim(1) != C / group)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "group ", group, " does not fit X ", describe(x), " and W ",
                     describe(w));
  std::vector<int64_t> strides = ctx.attr_ints("strides", std::vector<int64_t>(sd, 1));
  std::vector<int64_t> dil = ctx.attr_ints("dilations", std::vector<int64_t>(sd, 1));
  std::vector<int64_t> pads = ctx.attr_ints("pads", std::vector<int64_t>(2 * sd, 0));
  if (strides.size() != sd || dil.size() != sd || pads.size() != 2 * sd)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "strides/dilations/pads do not match ", sd, " spatial dims");
  if (w_zp.size() > 1 && static_cast<int64_t>(w_zp.size()) != M)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "weight zero point has ", w_zp.size(), " values for ", M,
                     " output channels");
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  Dims od{N, M};
  for (size_t d = 0; d < sd; ++d) {
    const int64_t in = x.dim(2 + d), k = (w.dim(2 + d) - 1) * dil[d] + 1;
    if (strides[d] <= 0 || dil[d] <= 0)
      return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "strides and dilations must be positive");
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t out = (in + strides[d] - 1) / strides[d];
      int64_t total = std::max<int64_t>(0, (out - 1) * strides[d] + k - in);
      pads[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[d + sd] = total - pads[d];
    } else if (auto_pad == "VALID") {
      pads[d] = pads[d + sd] = 0;
    }
    int64_t out = (in + pads[d] + pads[d + sd] - k) / strides[d] + 1;
    if (out < 0)
      return ctx.error(ErrorCode::SHAPE_MISMATCH, "kernel ", describe(w), " is larger than input ", describe(x));
    od.push_back(out);
  }
  std::vector<double> xv = read_doubles(x), wv = read_doubles(w);
  std::vector<double> out(static_cast<size_t>(numel(od)), 0.0);
  const Dims ospatial(od.begin() + 2, od.end());
  const Dims kspatial(w.dims().begin() + 2, w.dims().end());
  const Dims ispatial(x.dims().begin() + 2, x.dims().end());
  const int64_t osz = numel(ospatial), ksz = numel(kspatial), isz = numel(ispatial);
  const int64_t cg = C / group, mg = M / group;
  std::vector<int64_t> o_idx(sd), k_idx(sd);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      const int64_t g = m / mg;
      const double wz = w_zp.empty() ? 0 : w_zp.size() == 1 ? w_zp[0] : w_zp[static_cast<size_t>(m)];
      for (int64_t o = 0; o < osz; ++o) {
        for (int64_t r = o, d = int64_t(sd) - 1; d >= 0; --d) {
          o_idx[size_t(d)] = r % ospatial[size_t(d)];
          r /= ospatial[size_t(d)];
        }
        double acc = 0;
        for (int64_t kk = 0; kk < ksz; ++kk) {
          int64_t ioff = 0;
          bool inside = true;
          for (int64_t r = kk, d = int64_t(sd) - 1; d >= 0; --d) {
            const size_t u = size_t(d);
            int64_t k = r % kspatial[u];
            r /= kspatial[u];
            int64_t pos = o_idx[u] * strides[u] - pads[u] + k * dil[u];
            if (pos < 0 || pos >= ispatial[u]) inside = false;
            k_idx[u] = pos;
          }
          if (!inside) continue;  // padding holds the zero point: contributes (zp - zp) = 0
          for (size_t d = 0; d < sd; ++d) ioff = ioff * ispatial[d] + k_idx[d];
          for (int64_t c = 0; c < cg; ++c) {
            double xvv = xv[static_cast<size_t>((n * C + g * cg + c) * isz + ioff)] - x_zp;
            double wvv = wv[static_cast<size_t>((m * cg + c) * ksz + kk)] - wz;
            acc += xvv * wvv;
          }
        }
        out[static_cast<size_t>((n * M + m) * osz + o)] = acc;
      }
    }
  return std::make_pair(od, out);
}

Status conv_integer(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  std::vector<double> xz = opt_doubles(ctx, 2);
  GBX_ASSIGN_OR_RETURN(auto r, conv(ctx, ctx.input(0), ctx.input(1), xz.empty() ? 0 : xz[0], opt_doubles(ctx, 3)));
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(DType::I32, r.first));
  store_doubles(y, r.second);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status qlinear_conv(KernelContext& ctx) {
  for (size_t i = 0; i < 8; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  GBX_ASSIGN_OR_RETURN(double xs, scalar_input(ctx, 1));
  GBX_ASSIGN_OR_RETURN(double xz, scalar_input(ctx, 2));
  GBX_ASSIGN_OR_RETURN(double ys, scalar_input(ctx, 6));
  GBX_ASSIGN_OR_RETURN(double yz, scalar_input(ctx, 7));
  const std::vector<double> ws = read_doubles(ctx.input(4));
  if (ws.size() != 1 && static_cast<int64_t>(ws.size()) != ctx.input(3).dim(0))
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "w_scale has ", ws.size(), " values for ", describe(ctx.input(3)));
  GBX_ASSIGN_OR_RETURN(auto r, conv(ctx, ctx.input(0), ctx.input(3), xz, read_doubles(ctx.input(5))));
  std::vector<double> bias = opt_doubles(ctx, 8);
  const int64_t M = r.first[1];
  int64_t osz = 1;
  for (size_t d = 2; d < r.first.size(); ++d) osz *= r.first[d];
  if (!bias.empty() && static_cast<int64_t>(bias.size()) != M)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "bias has ", bias.size(), " values for ", M, " output channels");
  const DType out_t = ctx.input(7).dtype();
  for (size_t i = 0; i < r.second.size(); ++i) {
    const int64_t m = (static_cast<int64_t>(i) / osz) % M;
    double w_scale = ws.size() == 1 ? ws[0] : ws[static_cast<size_t>(m)];
    double acc = r.second[i] + (bias.empty() ? 0 : bias[static_cast<size_t>(m)]);
    double real = acc * (static_cast<double>(static_cast<float>(xs) * static_cast<float>(w_scale)) / ys);
    r.second[i] = saturate(std::nearbyint(real) + yz, out_t);
  }
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(out_t, r.first));
  store_doubles(y, r.second);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL(
    {"", "QuantizeLinear", 10, 21, kEngineRef, {DType::F32, DType::I32, DType::F16, DType::BF16}, quantize_linear});
GBX_REGISTER_KERNEL(
    {"", "DequantizeLinear", 10, 21, kEngineRef, {DType::U8, DType::I8, DType::I32}, dequantize_linear});
GBX_REGISTER_KERNEL({"", "DynamicQuantizeLinear", 11, 18, kEngineRef, {DType::F32}, dynamic_quantize_linear});
GBX_REGISTER_KERNEL({"", "MatMulInteger", 10, 18, kEngineRef, {DType::U8, DType::I8}, matmul_integer});
GBX_REGISTER_KERNEL({"", "QLinearMatMul", 10, 18, kEngineRef, {DType::U8, DType::I8}, qlinear_matmul});
GBX_REGISTER_KERNEL({"", "ConvInteger", 10, 18, kEngineRef, {DType::U8, DType::I8}, conv_integer});
GBX_REGISTER_KERNEL({"", "QLinearConv", 10, 18, kEngineRef, {DType::U8, DType::I8}, qlinear_conv});

}  // namespace
}  // namespace gearbox::ref
