// MelWeightMatrix (opset 17), reference: triangular mel filters of shape
// [dft_length / 2 + 1, num_mel_bins]. Follows the ONNX reference implementation exactly,
// including its mel step of (high - low) / (num_mel_bins + 2) and integer bin rounding.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

Status mel_weight_matrix(KernelContext& ctx) {
  for (size_t i = 0; i < 5; ++i) {
    GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
    const Tensor& t = ctx.input(i);
    if (t.numel() != 1 || !std::isfinite(t.at_double(0)) || std::fabs(t.at_double(0)) > 1e12)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "input ", i, " must be a finite scalar, got ", describe(t));
  }
  const int64_t bins = static_cast<int64_t>(ctx.input(0).at_double(0));
  const int64_t dft = static_cast<int64_t>(ctx.input(1).at_double(0));
  const int64_t rate = static_cast<int64_t>(ctx.input(2).at_double(0));
  const double lo = ctx.input(3).at_double(0), hi = ctx.input(4).at_double(0);
  if (bins <= 0 || dft <= 0 || rate <= 0 || bins > (1 << 20) || dft > (int64_t(1) << 30))
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "num_mel_bins ", bins, ", dft_length ", dft, " and sample_rate ",
                     rate, " must be positive");
  if (lo < 0 || hi <= lo)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "edge frequencies must satisfy 0 <= lower (", lo, ") < upper (", hi,
                     ")");
  const int64_t spec_bins = dft / 2 + 1;
  const double lo_mel = 2595 * std::log10(1 + lo / 700), hi_mel = 2595 * std::log10(1 + hi / 700);
  const double step = (hi_mel - lo_mel) / double(bins + 2);
  std::vector<int64_t> fb(static_cast<size_t>(bins + 2));
  for (int64_t i = 0; i < bins + 2; ++i) {
    double hz = 700 * (std::pow(10.0, (double(i) * step + lo_mel) / 2595) - 1);
    fb[static_cast<size_t>(i)] = static_cast<int64_t>(std::floor(double(dft + 1) * hz / double(rate)));
  }
  const DType dt = static_cast<DType>(ctx.attr_int("output_datatype", 1));
  if (!is_float(dt)) return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "output_datatype must be a float type");
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(dt, {spec_bins, bins}));
  std::vector<double> out(static_cast<size_t>(y.numel()), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double* {
    if (j < 0 || j >= spec_bins) return nullptr;
    return &out[static_cast<size_t>(j * bins + i)];
  };
  for (int64_t i = 0; i < bins; ++i) {
    const int64_t l = fb[size_t(i)], c = fb[size_t(i + 1)], h = fb[size_t(i + 2)];
    if (c == l) {
      if (double* p = at(c, i)) *p = 1;
    } else {
      for (int64_t j = std::max<int64_t>(l, 0); j <= std::min(c, spec_bins - 1); ++j)
        if (double* p = at(j, i)) *p = double(j - l) / double(c - l);
    }
    if (h > c)
      for (int64_t j = std::max<int64_t>(c, 0); j < std::min(h, spec_bins); ++j)
        if (double* p = at(j, i)) *p = double(h - j) / double(h - c);
  }
  store_doubles(y, out);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "MelWeightMatrix", 17, 18, kEngineRef, {DType::I32, DType::I64}, mel_weight_matrix});

}  // namespace
}  // namespace gearbox::ref
