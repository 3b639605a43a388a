// The loop every optimizer's step() runs for each parameter group: over the group's parameters
// that received a gradient, with their float32 data (Optimizer's constructor checked the dtype).
#pragma once

#include <cstddef>
#include <vector>

#include "frontend/tensor_impl.h"

namespace gbx::nn {

// Calls f(k, w, g, n) for each parameter k in [begin, end) with a gradient: its data w,
// gradient g, size n.
template <typename F>
void for_each_gradient(std::vector<Tensor>& params, size_t begin, size_t end, F&& f) {
  for (size_t k = begin; k < end; ++k) {
    Tensor& p = params[k];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    f(k, static_cast<float*>(p.mutable_data()), static_cast<const float*>(g.data()), static_cast<size_t>(p.numel()));
  }
}

// Bytes held by per-parameter float buffers (an optimizer's state_bytes()).
inline size_t float_buffer_bytes(const std::vector<std::vector<float>>& buffers) {
  size_t n = 0;
  for (const auto& b : buffers) n += b.size() * sizeof(float);
  return n;
}

}  // namespace gbx::nn
