// The cpu.simd kernels written with the kernel API (include/gearbox/kernel_api.hpp):
// InstanceNormalization (tile_instance_norm.cc), Mish (tile_mish.cc), HardSigmoid and HardSwish
// (tile_hard_sigmoid.cc), and LogSoftmax (tile_log_softmax.cc: the API's worked example, not
// registered). Each entry point threads its tiles with kapi::parallel_for and runs the
// instruction set the CPU allows; declared here for bench/kernel_api_bench.cc, which times them
// against hand-written Highway loops. (MaxPool with Indices, tile_max_pool.cc, is the API's too;
// it has no hand-written twin to time, so no entry point here.)
#pragma once

#include <cstdint>

namespace gearbox::simd {

// y = scale[c] (x - mean) / sqrt(var + eps) + bias[c] over each of `planes` contiguous planes of
// `plane` floats, plane p of channel p % channels.
void tile_instance_norm(const float* x, float* y, int64_t planes, int64_t channels, int64_t plane, const float* scale,
                        const float* bias, float eps);
// y = x tanh(softplus(x)) over n floats.
void tile_mish(const float* x, float* y, int64_t n);
// y = max(0, min(1, alpha x + beta)) over n floats (HardSigmoid).
void tile_hard_sigmoid(const float* x, float* y, int64_t n, float alpha, float beta);
// y = x max(0, min(1, x / 6 + 0.5)) over n floats (HardSwish).
void tile_hard_swish(const float* x, float* y, int64_t n);
// y = x - max - log(sum exp(x - max)) over each of `rows` contiguous rows of `len` floats.
void tile_log_softmax(const float* x, float* y, int64_t rows, int64_t len);

}  // namespace gearbox::simd
