// Trains a small CNN (conv-BN-ReLU-maxpool, a residual block, a linear head) on sklearn's 8x8
// digits with gearbox's framework layer (eager mode, or graph mode with `graph`) and prints the
// held-out accuracy and the training wall time. The network and the recipe are
// examples/digits_cnn.h, which `gearbox demo` trains too.
//
//   /usr/bin/python3 scripts/export_digits.py /tmp/digits
//   build/train_cnn /tmp/digits [epochs] [O0|O1|O2|O3] [bf16|fp16]   (mixed precision: nn_amp.hpp)
//   build/train_cnn /tmp/digits [epochs] graph                       (GraphTrainStep: nn_graph.hpp)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "digits_cnn.h"

namespace nn = gbx::nn;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s DIGITS_DIR [epochs] [O0|O1|O2|O3|graph] [bf16|fp16]   (DIGITS_DIR from "
                 "scripts/export_digits.py; graph: float32 in graph mode)\n",
                 argv[0]);
    return 2;
  }
  digits::TrainOptions options;
  if (argc > 2) options.epochs = std::atoi(argv[2]);
  try {
    if (argc > 3 && std::string(argv[3]) == "graph") options.graph = true;
    else if (argc > 3) options.amp = nn::parse_amp_level(argv[3]);
    if (argc > 4) options.amp_dtype = std::string(argv[4]) == "fp16" ? nn::DType::Float16 : nn::DType::BFloat16;
    const std::string dir = argv[1];
    nn::Tensor x = nn::reshape(nn::load_npy(dir + "/x.npy"), {-1, 1, 8, 8}), y = nn::load_npy(dir + "/y.npy");
    const digits::Split data = digits::split(x, y);  // 1,500 training digits, 297 held out (seeded)

    nn::manual_seed(0);
    digits::DigitsCnn net;
    const auto start = std::chrono::steady_clock::now();
    const std::vector<double> losses = digits::train(net, data, options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (size_t e = 0; e < losses.size(); ++e) std::printf("epoch %2zu  loss %.4f\n", e + 1, losses[e]);
    nn::NoGradGuard no_grad;
    net.eval();
    const std::string mode = options.graph ? "graph mode"
                                           : std::string("eager mode, amp ") + nn::amp_level_name(options.amp) + " " +
                                                 nn::dtype_name(options.amp_dtype);
    std::printf("held-out accuracy: %.2f%% (%lld digits), training wall time %.2f s, %s\n",
                100 * digits::accuracy(net(data.x_test), data.y_test), static_cast<long long>(data.x_test.dim(0)),
                seconds, mode.c_str());
  } catch (const nn::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
