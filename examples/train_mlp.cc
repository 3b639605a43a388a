// Trains a 64-32-10 MLP on sklearn's digits with gearbox's framework layer (eager mode) and
// prints the held-out accuracy.
//
//   /usr/bin/python3 scripts/export_digits.py /tmp/digits
//   build/train_mlp /tmp/digits [epochs]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "digits_accuracy.h"
#include "gearbox/nn.hpp"

namespace nn = gbx::nn;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIGITS_DIR [epochs]   (DIGITS_DIR from scripts/export_digits.py)\n", argv[0]);
    return 2;
  }
  const int epochs = argc > 2 ? std::atoi(argv[2]) : 20;
  try {
    const std::string dir = argv[1];
    nn::Tensor x = nn::load_npy(dir + "/x.npy"), y = nn::load_npy(dir + "/y.npy");
    const int64_t n = x.dim(0), n_train = 1500, batch = 50;
    nn::Tensor x_train = nn::slice(x, 0, 0, n_train), y_train = nn::slice(y, 0, 0, n_train);
    nn::Tensor x_test = nn::slice(x, 0, n_train, n), y_test = nn::slice(y, 0, n_train, n);

    nn::manual_seed(0);
    nn::Sequential net(
        {std::make_shared<nn::Linear>(64, 32), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(32, 10)});
    nn::Adam opt(net.parameters(), {.lr = 1e-2});
    for (int e = 0; e < epochs; ++e) {
      double total = 0;
      for (int64_t b = 0; b < n_train; b += batch) {
        nn::Tensor loss =
            nn::cross_entropy(net(nn::slice(x_train, 0, b, b + batch)), nn::slice(y_train, 0, b, b + batch));
        opt.zero_grad();
        loss.backward();
        opt.step();
        total += loss.item();
      }
      std::printf("epoch %2d  loss %.4f\n", e + 1, total / static_cast<double>(n_train / batch));
    }
    nn::NoGradGuard no_grad;
    net.eval();
    std::printf("held-out accuracy: %.2f%% (%lld digits)\n", 100 * digits::accuracy(net(x_test), y_test),
                static_cast<long long>(n - n_train));
  } catch (const nn::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
