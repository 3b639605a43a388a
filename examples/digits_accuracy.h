// What the digits examples (train_mlp, train_cnn, train_mlp_ddp) share: held-out accuracy.
#pragma once

#include <cstdint>
#include <vector>

#include "gearbox/nn.hpp"

namespace digits {

// Share of rows whose largest logit is the target class.
inline double accuracy(const gbx::nn::Tensor& logits, const gbx::nn::Tensor& targets) {
  std::vector<float> l = logits.to_float_vector();
  std::vector<int64_t> t = targets.to_int64_vector();
  const int64_t n = logits.dim(0), c = logits.dim(1);
  int64_t right = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < c; ++j)
      if (l[i * c + j] > l[i * c + best]) best = j;
    right += best == t[i];
  }
  return static_cast<double>(right) / static_cast<double>(n);
}

}  // namespace digits
