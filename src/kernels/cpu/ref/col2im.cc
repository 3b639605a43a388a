// Col2Im (reference, opset 18): the inverse of an im2col unfold. The input holds, for each image
// and channel, prod(block_shape) rows of L sliding-block positions; each value is added back at
// the image position its block offset and block position name (overlapping blocks sum). N-D:
// image_shape and block_shape have one value per spatial axis; dilations, pads (begins then
// ends) and strides are as for Conv. Accumulated in double.
#include <vector>

#include "kernels/cpu/ref/misc_util.h"
#include "kernels/cpu/ref/ref_util.h"

namespace gearbox::ref {
namespace {

// Advances the multi-index `at` over `extent` (last axis fastest); false after the last one.
bool next_index(std::vector<int64_t>& at, const std::vector<int64_t>& extent) {
  for (size_t d = at.size(); d-- > 0;) {
    if (++at[d] < extent[d]) return true;
    at[d] = 0;
  }
  return false;
}

Status col2im(KernelContext& ctx) {
  for (size_t i = 0; i < 3; ++i) GBX_RETURN_IF_ERROR(ctx.require_tensor(i));
  const Tensor& x = ctx.input(0);
  GBX_ASSIGN_OR_RETURN(std::vector<int64_t> image, read_ints(ctx, ctx.input(1)));
  GBX_ASSIGN_OR_RETURN(std::vector<int64_t> block, read_ints(ctx, ctx.input(2)));
  const size_t k = image.size();
  if (k == 0 || block.size() != k)
    return ctx.error(ErrorCode::INVALID_ARGUMENT, "image_shape ", describe(ctx.input(1)), " and block_shape ",
                     describe(ctx.input(2)), " must name the same number (>= 1) of spatial axes");
  if (x.rank() != 3)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "input must be [N, C * prod(block_shape), L], got ", describe(x));
  const std::vector<int64_t> dil = ctx.attr_ints("dilations", std::vector<int64_t>(k, 1));
  const std::vector<int64_t> strides = ctx.attr_ints("strides", std::vector<int64_t>(k, 1));
  const std::vector<int64_t> pads = ctx.attr_ints("pads", std::vector<int64_t>(2 * k, 0));
  if (dil.size() != k || strides.size() != k || pads.size() != 2 * k)
    return ctx.error(ErrorCode::ATTRIBUTE_INVALID, "dilations and strides need ", k, " values and pads ", 2 * k);
  // Bounds well past any allocatable image keep the arithmetic below from overflowing.
  constexpr int64_t kMax = int64_t(1) << 31;
  int64_t block_size = 1, positions = 1;
  std::vector<int64_t> per_axis(k);
  for (size_t d = 0; d < k; ++d) {
    if (image[d] < 0 || image[d] > kMax || block[d] <= 0 || block[d] > kMax || dil[d] <= 0 || dil[d] > kMax ||
        strides[d] <= 0 || strides[d] > kMax || pads[d] < 0 || pads[d] > kMax || pads[d + k] < 0 || pads[d + k] > kMax)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "axis ", d, ": image ", image[d], ", block ", block[d],
                       ", dilation ", dil[d], ", stride ", strides[d], ", pads ", pads[d], "/", pads[d + k],
                       " (block, dilation and stride must be positive, the others non-negative)");
    const int64_t span = image[d] + pads[d] + pads[d + k] - dil[d] * (block[d] - 1) - 1;
    if (span < 0)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "axis ", d, ": a block of ", block[d], " (dilation ", dil[d],
                       ") does not fit the padded image of ", image[d] + pads[d] + pads[d + k]);
    per_axis[d] = span / strides[d] + 1;
    block_size *= block[d];
    positions *= per_axis[d];
    if (block_size > kMax || positions > kMax)
      return ctx.error(ErrorCode::INVALID_ARGUMENT, "image_shape and block_shape are too large");
  }
  if (x.dim(1) % block_size != 0 || x.dim(2) != positions)
    return ctx.error(ErrorCode::SHAPE_MISMATCH, "input ", describe(x), " must be [N, C * ", block_size, ", ", positions,
                     "] for image_shape ", to_string(Dims(image)), " and block_shape ", to_string(Dims(block)));
  const int64_t n = x.dim(0), c = x.dim(1) / block_size;
  Dims out_dims{n, c};
  for (int64_t v : image) out_dims.push_back(v);
  GBX_ASSIGN_OR_RETURN(Tensor y, Tensor::allocate(x.dtype(), out_dims));
  const std::vector<double> xv = read_doubles(x);
  std::vector<double> out(static_cast<size_t>(y.numel()), 0.0);
  const int64_t image_size = y.numel() / std::max<int64_t>(n * c, 1);
  const std::vector<int64_t> image_strides = strides_of(Dims(image));
  for (int64_t nc = 0; nc < n * c && image_size > 0; ++nc) {
    std::vector<int64_t> kb(k, 0);  // offset inside the block
    int64_t row = nc * block_size;
    do {
      std::vector<int64_t> lb(k, 0);  // block position
      int64_t col = 0;
      do {
        int64_t at = 0;
        bool inside = true;
        for (size_t d = 0; d < k && inside; ++d) {
          const int64_t p = lb[d] * strides[d] - pads[d] + kb[d] * dil[d];
          inside = p >= 0 && p < image[d];
          at += p * image_strides[d];
        }
        if (inside) out[size_t(nc * image_size + at)] += xv[size_t(row * positions + col)];
        ++col;
      } while (next_index(lb, per_axis));
      ++row;
    } while (next_index(kb, block));
  }
  store_doubles(y, out);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Col2Im", 18, 21, kEngineRef, float_dtypes(), col2im});

}  // namespace
}  // namespace gearbox::ref
