// The frontend's one random generator (nn::manual_seed seeds it): initializers and
// Tensor::uniform/randn draw from it, so a seed fixes a network's initial weights.
#pragma once

#include <random>

namespace gbx::nn {

std::mt19937_64& generator();

}  // namespace gbx::nn
