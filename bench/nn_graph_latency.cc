// Graph mode against eager mode for inference (include/gearbox/nn_graph.hpp): the digits CNN
// of examples/train_cnn.cc (conv-BN-ReLU-pool, a residual block of two conv-BN, linear) in
// eval(), on one batch, the two modes alternated run by run so that the machine's noise falls
// on both; prints one JSON object with the medians and their ratio. No test asserts it
// (docs/framework.md has the figure).
//
//   build/bench/gearbox_bench_nn_graph [BATCH] [ROUNDS]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gearbox/nn.hpp"
#include "gearbox/nn_graph.hpp"

namespace nn = gbx::nn;
using Clock = std::chrono::steady_clock;

namespace {

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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 64;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 200;
  nn::manual_seed(0);
  auto net = std::make_shared<DigitsCnn>();
  net->eval();
  nn::Tensor x = nn::Tensor::randn({batch, 1, 8, 8});
  nn::GraphFunction graph(net);
  nn::NoGradGuard no_grad;
  // Warm both: the trace and the session's first run (oneDNN primitives, packed weights).
  for (int i = 0; i < 5; ++i) {
    net->forward(x);
    graph(x);
  }
  std::vector<double> eager_ms, graph_ms;
  double worst = 0;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = Clock::now();
    nn::Tensor a = net->forward(x);
    auto t1 = Clock::now();
    nn::Tensor b = graph(x);
    auto t2 = Clock::now();
    eager_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    graph_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    if (r == 0) {
      std::vector<float> va = a.to_float_vector(), vb = b.to_float_vector();
      for (size_t i = 0; i < va.size(); ++i) worst = std::max<double>(worst, std::abs(va[i] - vb[i]));
    }
  }
  const double e = median(eager_ms), g = median(graph_ms);
  std::printf(
      "{\"model\": \"digits_cnn\", \"batch\": %lld, \"rounds\": %d, \"eager_median_ms\": %.4f, "
      "\"graph_median_ms\": %.4f, \"graph_over_eager\": %.3f, \"max_abs_diff\": %.3g, \"cpu\": \"%s\"}\n",
      static_cast<long long>(batch), rounds, e, g, g / e, worst, cpu_model().c_str());
  return 0;
}
