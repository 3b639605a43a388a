// Reading torch_reference.py's files (GEARBOX_FRONTEND_REF_DIR, written into the build tree at
// test time) and comparing against them: shared by the torch parity tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/npy.h"
#include "frontend/tensor_impl.h"
#include "gearbox/nn.hpp"
#include "gearbox/nn_graph.hpp"

namespace gbx::nn::testing {

inline const std::string kRefDir = GEARBOX_FRONTEND_REF_DIR;

inline Tensor load(const std::string& path) {
  auto t = gearbox::read_npy(path);
  if (!t.ok()) throw std::runtime_error(t.status().to_string());
  return wrap(std::move(t.value()));
}

// Largest |a - b| / (atol + |b|) over the elements.
inline void expect_close(const Tensor& got, const Tensor& want, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  std::vector<double> g = got.to_double_vector(), w = want.to_double_vector();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double e = std::abs(g[i] - w[i]) / (atol / rtol + std::abs(w[i]));
    if (e > worst) worst = e, at = i;
  }
  EXPECT_LE(worst, rtol) << what << ": element " << at << " is " << g[at] << ", torch " << w[at];
}

// Loads torch's initial weights (DIR/init_NAME.npy) into `net`, then trains it with `opt` over
// the digits (kRefDir/mlp/{x,y}.npy) in torch_reference.py's batches of 64, one step per entry of
// DIR/losses.npy: every step's loss within 1e-5 relative of torch's. Prints the worst difference
// and checks that the reference run trained (its last loss under `trained` x its first).
// The code of the nn::Error `fn` throws ("" when it throws none).
inline std::string error_code(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  return "";
}

// The two execution modes the training tests run in.
enum class Mode { Eager, Graph };
inline const char* mode_name(Mode m) { return m == Mode::Eager ? "eager" : "graph"; }

// A cross-entropy training step of `net`: eagerly (forward, backward()) or in graph mode (one
// GraphTrainStep, traced on its first call); then the optimizer's step. Returns the loss.
class CrossEntropyTrainer {
 public:
  CrossEntropyTrainer(Module& net, Mode mode) : net_(net) {
    if (mode == Mode::Graph)
      graph_ = std::make_unique<GraphTrainStep>(
          net, [&net](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy(net(in[0]), in[1])}; });
  }
  double step(Optimizer& opt, const Tensor& x, const Tensor& y) {
    opt.zero_grad();
    Tensor loss;
    if (graph_) {
      loss = (*graph_)({x, y})[0];
    } else {
      loss = cross_entropy(net_(x), y);
      loss.backward();
    }
    opt.step();
    return loss.item();
  }
  // Graph mode: how many times the step was traced (once per batch shape).
  size_t traces() const { return graph_ ? graph_->traces() : 0; }

 private:
  Module& net_;
  std::unique_ptr<GraphTrainStep> graph_;
};

// Trains `net` from torch's initial weights (<dir>init_<name>.npy) on the digits in batches of
// 64, in order, and checks each step's loss within 1e-5 relative of torch's (<dir>losses.npy).
inline void train_against_torch(Module& net, Optimizer& opt, const std::string& dir, const std::string& label,
                                double trained, Mode mode = Mode::Eager) {
  Tensor x = load(kRefDir + "/mlp/x.npy"), y = load(kRefDir + "/mlp/y.npy");
  std::vector<double> want = load(dir + "losses.npy").to_double_vector();
  std::map<std::string, Tensor> init;
  for (const auto& [name, mine] : net.state_dict()) init[name] = load(dir + "init_" + name + ".npy");
  net.load_state_dict(init);
  CrossEntropyTrainer trainer(net, mode);
  const int64_t batch = 64, batches = x.dim(0) / batch;
  double worst = 0;
  for (size_t s = 0; s < want.size(); ++s) {
    const int64_t b = static_cast<int64_t>(s) % batches * batch;
    const double loss = trainer.step(opt, slice(x, 0, b, b + batch), slice(y, 0, b, b + batch));
    EXPECT_NEAR(loss, want[s], 1e-5 * std::abs(want[s])) << label << " step " << s;
    worst = std::max(worst, std::abs(loss - want[s]) / std::abs(want[s]));
  }
  std::printf("[ INFO     ] %s (%s): worst relative loss difference to torch over %zu steps: %.2e\n", label.c_str(),
              mode_name(mode), want.size(), worst);
  EXPECT_LT(want.back(), want.front() * trained) << "the reference run did not train";
  if (mode == Mode::Graph) EXPECT_EQ(trainer.traces(), 1u) << "one batch shape, one trace";
}

}  // namespace gbx::nn::testing
