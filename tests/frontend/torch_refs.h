// Reading torch_reference.py's files (GEARBOX_FRONTEND_REF_DIR, written into the build tree at
// test time) and comparing against them: shared by the torch parity tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/npy.h"
#include "frontend/tensor_impl.h"
#include "gearbox/nn.hpp"

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
inline void train_against_torch(Module& net, Optimizer& opt, const std::string& dir, const std::string& label,
                                double trained) {
  Tensor x = load(kRefDir + "/mlp/x.npy"), y = load(kRefDir + "/mlp/y.npy");
  std::vector<double> want = load(dir + "losses.npy").to_double_vector();
  std::map<std::string, Tensor> init;
  for (const auto& [name, mine] : net.state_dict()) init[name] = load(dir + "init_" + name + ".npy");
  net.load_state_dict(init);
  const int64_t batch = 64, batches = x.dim(0) / batch;
  double worst = 0;
  for (size_t s = 0; s < want.size(); ++s) {
    const int64_t b = static_cast<int64_t>(s) % batches * batch;
    Tensor loss = cross_entropy(net(slice(x, 0, b, b + batch)), slice(y, 0, b, b + batch));
    opt.zero_grad();
    loss.backward();
    opt.step();
    EXPECT_NEAR(loss.item(), want[s], 1e-5 * std::abs(want[s])) << label << " step " << s;
    worst = std::max(worst, std::abs(loss.item() - want[s]) / std::abs(want[s]));
  }
  std::printf("[ INFO     ] %s: worst relative loss difference to torch over %zu steps: %.2e\n", label.c_str(),
              want.size(), worst);
  EXPECT_LT(want.back(), want.front() * trained) << "the reference run did not train";
}

}  // namespace gbx::nn::testing
