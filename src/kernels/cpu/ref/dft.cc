// DFT (opsets 17 and 20) and STFT (opset 17), reference: naive O(n^2) transforms in double, with twiddle
// angles reduced modulo the length for accuracy. Real inputs have a trailing dim of 1,
// complex ones 2; outputs are always complex ([..., 2]).
#include <cmath>
#include <numbers>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

// out[k] = sum_n in[n] * exp(-+2 pi i k n / L) for k < out_len; in has `in_len` <= L
// complex samples (the rest are the zero padding).
void dft_1d(const std::vector<double>& re, const std::vector<double>& im, int64_t L, int64_t out_len, bool inverse,
            std::vector<double>& ore, std::vector<double>& oim) {
  ore.assign(static_cast<size_t>(out_len), 0.0);
  oim.assign(static_cast<size_t>(out_len), 0.0);
  const int64_t n_in = std::min<int64_t>(L, static_cast<int64_t>(re.size()));
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t k = 0; k < out_len; ++k) {
    double sr = 0, si = 0;
    for (int64_t n = 0; n < n_in; ++n) {
      double ang = sign * 2 * std::numbers::pi * double((k * n) % L) / double(L);
      double c = std::cos(ang), s = std::sin(ang);
      sr += re[size_t(n)] * c - im[size_t(n)] * s;
      si += re[size_t(n)] * s + im[size_t(n)] * c;
    }
    if (inverse) {
      sr /= double(L);
      si /= double(L);
    }
    ore[size_t(k)] = sr;
    oim[size_t(k)] = si;
  }
}

Status dft(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3 || (x.dims().back() != 1 && x.dims().back() != 2))
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "input must be [batch, ..., 1 or 2], got ", describe(x));
  const int64_t rank = static_cast<int64_t>(x.rank());
  // Opset 17 names the axis in an attribute (default 1); 20 in an optional scalar input (default
  // -2, the last axis before the real/imaginary one). Either way it is one of the axes before
  // the last: [-rank, -2] or [0, rank - 2].
  int64_t given = ctx.attr_int("axis", 1);
  if (ctx.opset() >= 20) {
    given = -2;
    if (ctx.has_input(2)) {
      GBX_RETURN_IF_ERROR(ctx.require_tensor(2));
      GBX_ASSIGN_OR_RETURN(std::vector<int64_t> a, read_ints(ctx, ctx.input(2)));
      if (a.size() != 1 || ctx.input(2).rank() > 1)
        return ctx.error(ErrorCode::INVALID_ARGUMENT, "axis must be a scalar, got ", describe(ctx.input(2)));
      given = a[0];
    }
  }
  const int64_t axis = given < 0 ? given + rank : given;
  if (given < -rank || given > rank - 2 || axis >= rank - 1)
    return ctx.error(ctx.opset() >= 20 ? ErrorCode::INVALID_ARGUMENT : ErrorCode::ATTRIBUTE_INVALID, "axis ", given,
                     " must be in [", -rank, ", -2] or [0, ", rank - 2, "] for the input ", describe(x));
  const int64_t n = x.dim(size_t(axis));
  int64_t L = n;
  if (ctx.has_input(1)) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
    GBX_ASSIGN_OR_RETURN(std::vector<int64_t> l, read_ints(ctx, ctx.input(1)));
    if (l.size() != 1 || l[0] <= 0)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "dft_length must be a positive scalar, got ",
                       describe(ctx.input(1)));
    L = l[0];
  }
  const bool inverse = ctx.attr_int("inverse", 0) != 0, onesided = ctx.attr_int("onesided", 0) != 0;
  const int64_t out_len = onesided ? L / 2 + 1 : L;
  const bool cplx = x.dims().back() == 2;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank - 1; ++d) {
    if (d < axis) outer *= x.dim(size_t(d));
    if (d > axis) inner *= x.dim(size_t(d));
  }
  Dims od = x.dims();
  od[size_t(axis)] = out_len;
  od.back() = 2;
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(x.dtype(), od));
  const std::vector<double> xv = read_doubles(x);
  std::vector<double> out(static_cast<size_t>(y.numel()));
  const int64_t c_in = cplx ? 2 : 1;
  std::vector<double> re(static_cast<size_t>(n)), im(static_cast<size_t>(n)), ore, oim;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t t = 0; t < n; ++t) {
        size_t at = static_cast<size_t>(((o * n + t) * inner + i) * c_in);
        re[size_t(t)] = xv[at];
        im[size_t(t)] = cplx ? xv[at + 1] : 0.0;
      }
      dft_1d(re, im, L, out_len, inverse, ore, oim);
      for (int64_t k = 0; k < out_len; ++k) {
        size_t at = static_cast<size_t>(((o * out_len + k) * inner + i) * 2);
        out[at] = ore[size_t(k)];
        out[at + 1] = oim[size_t(k)];
      }
    }
  store_doubles(y, out);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status stft(KernelContext& ctx) {
  GBX_RETURN_IF_ERROR(ctx.require_tensor(0));
  GBX_RETURN_IF_ERROR(ctx.require_tensor(1));
  const Tensor& x = ctx.input(0);
  if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2))
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "signal must be [batch, length, 1 or 2], got ", describe(x));
  GBX_ASSIGN_OR_RETURN(std::vector<int64_t> step_v, read_ints(ctx, ctx.input(1)));
  if (step_v.size() != 1 || step_v[0] <= 0)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "frame_step must be a positive scalar");
  const int64_t step = step_v[0];
  std::vector<double> window;
  if (ctx.has_input(2)) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(2));
    window = read_doubles(ctx.input(2));
  }
  int64_t flen = static_cast<int64_t>(window.size());
  if (ctx.has_input(3)) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(3));
    GBX_ASSIGN_OR_RETURN(std::vector<int64_t> fl, read_ints(ctx, ctx.input(3)));
    if (fl.size() != 1) return ctx.error(ErrorCode::INVALID_ARGUMENT, "frame_length must be a scalar");
    flen = fl[0];
  }
  const int64_t len = x.dim(1);
  if (flen <= 0 || flen > len || (!window.empty() && static_cast<int64_t>(window.size()) != flen))
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "frame length ", flen, " (window ", window.size(),
                     ") does not fit signal length ", len);
  const bool onesided = ctx.attr_int("onesided", 1) != 0;
  const int64_t bins = onesided ? flen / 2 + 1 : flen;
  const int64_t frames = (len - flen) / step + 1;
  const int64_t B = x.dim(0), c_in = x.dim(2);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(x.dtype(), {B, frames, bins, 2}));
  const std::vector<double> xv = read_doubles(x);
  std::vector<double> out(static_cast<size_t>(y.numel()));
  std::vector<double> re(static_cast<size_t>(flen)), im(static_cast<size_t>(flen)), ore, oim;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t t = 0; t < flen; ++t) {
        size_t at = static_cast<size_t>((b * len + f * step + t) * c_in);
        double w = window.empty() ? 1.0 : window[size_t(t)];
        re[size_t(t)] = xv[at] * w;
        im[size_t(t)] = c_in == 2 ? xv[at + 1] * w : 0.0;
      }
      dft_1d(re, im, flen, bins, false, ore, oim);
      for (int64_t k = 0; k < bins; ++k) {
        size_t at = static_cast<size_t>(((b * frames + f) * bins + k) * 2);
        out[at] = ore[size_t(k)];
        out[at + 1] = oim[size_t(k)];
      }
    }
  store_doubles(y, out);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "DFT", 17, 21, kEngineRef, float_dtypes(), dft});
GBX_REGISTER_KERNEL({"", "STFT", 17, 18, kEngineRef, float_dtypes(), stft});

}  // namespace
}  // namespace gearbox::ref
