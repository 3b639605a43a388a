// Trains a small CNN (conv-BN-ReLU-maxpool, a residual block, a linear head) on sklearn's 8x8
// digits with gearbox's framework layer (eager mode) and prints the held-out accuracy and the
// training wall time.
//
//   /usr/bin/python3 scripts/export_digits.py /tmp/digits
//   build/train_cnn /tmp/digits [epochs]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>

#include "digits_accuracy.h"
#include "gearbox/nn.hpp"

namespace nn = gbx::nn;

namespace {

// conv-BN-ReLU-conv-BN, plus the input, ReLU.
class ResidualBlock : public nn::Module {
 public:
  explicit ResidualBlock(int64_t c)
      : conv1_(std::make_shared<nn::Conv2d>(c, c, std::vector<int64_t>{3},
                                            nn::Conv2dOptions{.padding = {1}, .bias = false})),
        bn1_(std::make_shared<nn::BatchNorm2d>(c)),
        conv2_(std::make_shared<nn::Conv2d>(c, c, std::vector<int64_t>{3},
                                            nn::Conv2dOptions{.padding = {1}, .bias = false})),
        bn2_(std::make_shared<nn::BatchNorm2d>(c)) {
    register_module("conv1", conv1_);
    register_module("bn1", bn1_);
    register_module("conv2", conv2_);
    register_module("bn2", bn2_);
  }
  nn::Tensor forward(const nn::Tensor& x) override {
    nn::Tensor h = nn::relu((*bn1_)((*conv1_)(x)));
    return nn::relu((*bn2_)((*conv2_)(h)) + x);
  }

 private:
  std::shared_ptr<nn::Module> conv1_, bn1_, conv2_, bn2_;
};

// [N, 1, 8, 8] -> conv 3x3 (16) - BN - ReLU - maxpool 2 -> residual block -> linear (10).
class DigitsCnn : public nn::Module {
 public:
  DigitsCnn()
      : conv_(std::make_shared<nn::Conv2d>(1, 16, std::vector<int64_t>{3},
                                           nn::Conv2dOptions{.padding = {1}, .bias = false})),
        bn_(std::make_shared<nn::BatchNorm2d>(16)),
        block_(std::make_shared<ResidualBlock>(16)),
        fc_(std::make_shared<nn::Linear>(16 * 4 * 4, 10)) {
    register_module("conv", conv_);
    register_module("bn", bn_);
    register_module("block", block_);
    register_module("fc", fc_);
  }
  nn::Tensor forward(const nn::Tensor& x) override {
    nn::Tensor h = nn::max_pool2d(nn::relu((*bn_)((*conv_)(x))), {2});
    return (*fc_)(nn::flatten((*block_)(h), 1));
  }

 private:
  std::shared_ptr<nn::Module> conv_, bn_, block_, fc_;
};

// The rows of x [N, ...] (float32) and y [N] (int64) in the order `perm`.
std::pair<nn::Tensor, nn::Tensor> reorder(const nn::Tensor& x, const nn::Tensor& y, const std::vector<int64_t>& perm) {
  const std::vector<float> xv = x.to_float_vector();
  const std::vector<int64_t> yv = y.to_int64_vector();
  const size_t row = xv.size() / yv.size();
  std::vector<float> xs(xv.size());
  std::vector<int64_t> ys(yv.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    const size_t src = static_cast<size_t>(perm[i]);
    std::copy_n(xv.begin() + static_cast<std::ptrdiff_t>(src * row), row,
                xs.begin() + static_cast<std::ptrdiff_t>(i * row));
    ys[i] = yv[src];
  }
  return {nn::Tensor::from_vector(xs, x.shape()), nn::Tensor::from_vector(ys, y.shape())};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIGITS_DIR [epochs]   (DIGITS_DIR from scripts/export_digits.py)\n", argv[0]);
    return 2;
  }
  const int epochs = argc > 2 ? std::atoi(argv[2]) : 10;
  try {
    const std::string dir = argv[1];
    nn::Tensor x = nn::reshape(nn::load_npy(dir + "/x.npy"), {-1, 1, 8, 8}), y = nn::load_npy(dir + "/y.npy");
    const int64_t n = x.dim(0), n_train = 1500, batch = 50;
    nn::Tensor x_train = nn::slice(x, 0, 0, n_train), y_train = nn::slice(y, 0, 0, n_train);
    nn::Tensor x_test = nn::slice(x, 0, n_train, n), y_test = nn::slice(y, 0, n_train, n);

    nn::manual_seed(0);
    DigitsCnn net;
    nn::AdamW opt(net.parameters(), {.lr = 3e-3, .weight_decay = 1e-2});
    std::mt19937_64 rng(0);
    std::vector<int64_t> perm(static_cast<size_t>(n_train));
    std::iota(perm.begin(), perm.end(), 0);
    const auto start = std::chrono::steady_clock::now();
    for (int e = 0; e < epochs; ++e) {
      double total = 0;
      net.train();
      std::shuffle(perm.begin(), perm.end(), rng);  // a new order of the training digits every epoch
      auto [xe, ye] = reorder(x_train, y_train, perm);
      for (int64_t b = 0; b < n_train; b += batch) {
        nn::Tensor loss = nn::cross_entropy(net(nn::slice(xe, 0, b, b + batch)), nn::slice(ye, 0, b, b + batch));
        opt.zero_grad();
        loss.backward();
        opt.step();
        total += loss.item();
      }
      std::printf("epoch %2d  loss %.4f\n", e + 1, total / static_cast<double>(n_train / batch));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    nn::NoGradGuard no_grad;
    net.eval();
    std::printf("held-out accuracy: %.2f%% (%lld digits), training wall time %.2f s\n",
                100 * digits::accuracy(net(x_test), y_test), static_cast<long long>(n - n_train), seconds);
  } catch (const nn::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
