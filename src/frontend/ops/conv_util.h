// Argument checks the 2-D ops (conv2d, the pools) share.
#pragma once

#include <vector>

#include "gearbox/nn.hpp"

namespace gbx::nn {

// A (height, width) argument given as one value (both axes) or two; every value >= min
// (INVALID_ARGUMENT otherwise).
std::vector<int64_t> pair_arg(const std::vector<int64_t>& v, const char* op, const char* what, int64_t min);
// SHAPE_MISMATCH unless x is a 4-D [N, C, H, W] tensor.
void require_nchw(const Tensor& x, const char* op);

}  // namespace gbx::nn
