// One training step (forward, cross-entropy, backward, AdamW) of a small network, eager or in
// graph mode (nn::GraphTrainStep), timed step by step after a warm-up; prints one JSON object
// with the median and the quartiles in milliseconds. bench/train_step/run.py alternates it with
// torch 1.13 running the same network (torch_peer.py) and prints the ratios.
//
//   build/bench/gearbox_bench_train_step cnn|transformer eager|graph [BATCH] [STEPS] [WIDTH]
//
// cnn: the digits CNN of examples/digits_cnn.h on [BATCH, 1, 8, 8] (WIDTH unused).
// transformer: each digit's 8 rows as a sequence, a linear embedding to WIDTH (16), two post-norm
// TransformerEncoderLayers (4 heads, feed-forward 2 x WIDTH, dropout 0), the mean over the
// sequence, a linear head to 10 classes (tests/frontend's DigitsTransformer).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "digits_cnn.h"
#include "gearbox/nn.hpp"
#include "gearbox/nn_graph.hpp"

namespace nn = gbx::nn;
using Clock = std::chrono::steady_clock;

namespace {

class DigitsTransformer : public nn::Module {
 public:
  explicit DigitsTransformer(int64_t width) : embed_(std::make_shared<nn::Linear>(8, width)) {
    register_module("embed", embed_);
    for (const char* name : {"encoder", "encoder2"}) {
      encoders_.push_back(std::make_shared<nn::TransformerEncoderLayer>(
          width, 4,
          nn::TransformerEncoderLayerOptions{.dim_feedforward = 2 * width, .dropout = 0.0, .batch_first = true}));
      register_module(name, encoders_.back());
    }
    head_ = std::make_shared<nn::Linear>(width, 10);
    register_module("head", head_);
  }
  nn::Tensor forward(const nn::Tensor& x) override {
    nn::Tensor h = (*embed_)(nn::reshape(x, {-1, 8, 8}));
    for (auto& encoder : encoders_) h = (*encoder)(h);
    return (*head_)(nn::mean(h, {1}));
  }

 private:
  std::shared_ptr<nn::Module> embed_, head_;
  std::vector<std::shared_ptr<nn::Module>> encoders_;
};

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s cnn|transformer eager|graph [BATCH] [STEPS] [WIDTH]\n", argv[0]);
    return 2;
  }
  const std::string model = argv[1], mode = argv[2];
  const int64_t batch = argc > 3 ? std::atoll(argv[3]) : 64;
  const int steps = argc > 4 ? std::atoi(argv[4]) : 200;
  const int64_t width = argc > 5 ? std::atoll(argv[5]) : 16;
  if ((model != "cnn" && model != "transformer") || (mode != "eager" && mode != "graph") || batch < 1 || steps < 1) {
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  }
  try {
    nn::manual_seed(0);
    std::shared_ptr<nn::Module> net;
    if (model == "cnn") net = std::make_shared<digits::DigitsCnn>();
    else net = std::make_shared<DigitsTransformer>(width);
    net->train();
    // Random digits-shaped inputs (the values do not change the work) and class ids.
    nn::Tensor x =
        model == "cnn" ? nn::Tensor::uniform({batch, 1, 8, 8}, 0.0, 1.0) : nn::Tensor::uniform({batch, 64}, 0.0, 1.0);
    std::vector<int64_t> ids(static_cast<size_t>(batch));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i % 10);
    nn::Tensor y = nn::Tensor::from_vector(ids, {batch});
    nn::AdamW opt(net->parameters(), {.lr = 1e-3, .weight_decay = 1e-2});
    nn::GraphTrainStep graph(*net, [&](const std::vector<nn::Tensor>& in) {
      return std::vector<nn::Tensor>{nn::cross_entropy((*net)(in[0]), in[1])};
    });
    double last_loss = 0;
    auto step = [&] {
      opt.zero_grad();
      nn::Tensor loss;
      if (mode == "graph") {
        loss = graph({x, y})[0];
      } else {
        loss = nn::cross_entropy((*net)(x), y);
        loss.backward();
      }
      opt.step();
      last_loss = loss.item();
    };
    const int warmup = std::max(5, steps / 10);
    for (int i = 0; i < warmup; ++i) step();
    std::vector<double> ms;
    for (int i = 0; i < steps; ++i) {
      const auto t0 = Clock::now();
      step();
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::printf(
        "{\"runner\": \"gearbox\", \"model\": \"%s\", \"mode\": \"%s\", \"batch\": %lld, \"steps\": %d, "
        "\"median_ms\": %.4f, \"p25_ms\": %.4f, \"p75_ms\": %.4f, \"last_loss\": %.6f}\n",
        model.c_str(), mode.c_str(), static_cast<long long>(batch), steps, percentile(ms, 0.5), percentile(ms, 0.25),
        percentile(ms, 0.75), last_loss);
  } catch (const nn::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
