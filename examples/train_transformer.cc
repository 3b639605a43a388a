// Trains a tiny transformer encoder to sort short digit sequences (a synthetic task: no data
// files), with gearbox's framework layer in eager mode: token and position embeddings, two
// TransformerEncoderLayers (d_model 32, 4 heads), a linear head that reads each position's
// output as a class 0-9, and cross-entropy over all positions. Prints the held-out accuracy per
// token and per whole sequence, on 1,000 sequences drawn apart from the training ones.
//
//   build/train_transformer [steps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "gearbox/nn.hpp"

namespace nn = gbx::nn;

namespace {

constexpr int64_t kLength = 6, kVocab = 10, kModel = 32;

class SortTransformer : public nn::Module {
 public:
  SortTransformer()
      : tokens_(std::make_shared<nn::Embedding>(kVocab, kModel)),
        positions_(std::make_shared<nn::Embedding>(kLength, kModel)),
        head_(std::make_shared<nn::Linear>(kModel, kVocab)) {
    register_module("tokens", tokens_);
    register_module("positions", positions_);
    for (int i = 0; i < 2; ++i) {
      layers_.push_back(std::make_shared<nn::TransformerEncoderLayer>(
          kModel, 4, nn::TransformerEncoderLayerOptions{.dim_feedforward = 64, .dropout = 0, .batch_first = true}));
      register_module("layers." + std::to_string(i), layers_.back());
    }
    register_module("head", head_);
  }
  // ids int64 [B, L] -> logits [B, L, 10].
  nn::Tensor forward(const nn::Tensor& ids) override {
    std::vector<int64_t> pos(kLength);
    for (int64_t i = 0; i < kLength; ++i) pos[static_cast<size_t>(i)] = i;
    nn::Tensor h = (*tokens_)(ids) + (*positions_)(nn::Tensor::from_vector(pos, {kLength}));  // [B,L,d] + [L,d]
    for (auto& layer : layers_) h = (*layer)(h);
    return (*head_)(h);
  }

 private:
  std::shared_ptr<nn::Embedding> tokens_, positions_;
  std::vector<std::shared_ptr<nn::TransformerEncoderLayer>> layers_;
  std::shared_ptr<nn::Linear> head_;
};

// `n` random sequences and the same sequences sorted, both int64 [n, L].
std::pair<nn::Tensor, nn::Tensor> batch(std::mt19937_64& rng, int64_t n) {
  std::uniform_int_distribution<int64_t> digit(0, kVocab - 1);
  std::vector<int64_t> x(static_cast<size_t>(n * kLength)), y;
  for (int64_t& v : x) v = digit(rng);
  y = x;
  for (int64_t i = 0; i < n; ++i) std::sort(y.begin() + i * kLength, y.begin() + (i + 1) * kLength);
  return {nn::Tensor::from_vector(x, {n, kLength}), nn::Tensor::from_vector(y, {n, kLength})};
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 300;
  try {
    nn::manual_seed(0);
    SortTransformer net;
    nn::Adam opt(net.parameters(), {.lr = 3e-3});
    std::mt19937_64 train_rng(1), test_rng(7);  // separate streams: held-out sequences are not trained on
    const auto start = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) {
      auto [x, y] = batch(train_rng, 64);
      nn::Tensor loss = nn::cross_entropy(nn::reshape(net(x), {-1, kVocab}), nn::reshape(y, {-1}));
      opt.zero_grad();
      loss.backward();
      opt.step();
      if ((s + 1) % 100 == 0) std::printf("step %4d  loss %.4f\n", s + 1, loss.item());
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    nn::NoGradGuard no_grad;
    net.eval();
    auto [x, y] = batch(test_rng, 1000);
    const std::vector<float> logits = net(x).to_float_vector();
    const std::vector<int64_t> target = y.to_int64_vector();
    int64_t right_tokens = 0, right_sequences = 0;
    for (int64_t i = 0; i < 1000; ++i) {
      int64_t right = 0;
      for (int64_t t = 0; t < kLength; ++t) {
        const float* l = logits.data() + (i * kLength + t) * kVocab;
        right += std::max_element(l, l + kVocab) - l == target[static_cast<size_t>(i * kLength + t)];
      }
      right_tokens += right;
      right_sequences += right == kLength;
    }
    std::printf(
        "held-out accuracy: %.2f%% of tokens, %.2f%% of whole sequences sorted (1000 sequences of %lld "
        "digits), training wall time %.2f s\n",
        100.0 * static_cast<double>(right_tokens) / (1000.0 * kLength), right_sequences / 10.0,
        static_cast<long long>(kLength), seconds);
  } catch (const nn::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
