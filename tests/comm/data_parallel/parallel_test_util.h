// What the framework-layer parallel tests share: joining a forked rank's Gloo group on a file
// store, and moving doubles out of a forked child exactly (hex floats in a text file).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../rank_runner.h"
#include "comm/gloo_communicator.h"
#include "comm/store.h"
#include "gearbox/nn_distributed.hpp"

namespace gearbox::comm::testing {

inline std::shared_ptr<gbx::nn::ProcessGroup> join(int rank, int size, const std::string& dir,
                                                   std::unique_ptr<GlooCommunicator>* keep, std::string* error) {
  auto store = open_store("file:" + dir + "/store");
  if (!store) {
    *error = store.status().to_string();
    return nullptr;
  }
  GlooOptions o;
  o.rank = rank;
  o.size = size;
  o.timeout = std::chrono::seconds(30);
  auto c = GlooCommunicator::create(*store, o);
  if (!c) {
    *error = c.status().to_string();
    return nullptr;
  }
  *keep = std::move(*c);
  return std::make_shared<gbx::nn::ProcessGroup>(**keep);
}

inline double read_double(std::istream& in) {
  std::string s;
  in >> s;
  return std::strtod(s.c_str(), nullptr);  // operator>> does not parse hexfloat in libstdc++
}

inline void write_doubles(std::ostream& f, const std::vector<double>& v) {
  f << v.size();
  for (double x : v) f << ' ' << std::hexfloat << x;
  f << std::defaultfloat << '\n';
}

inline std::vector<double> read_doubles(std::istream& f) {
  size_t n = 0;
  f >> n;
  std::vector<double> v;
  for (size_t i = 0; i < n; ++i) v.push_back(read_double(f));
  return v;
}

// Layers the parallel tests' networks share: each digit ([rows, 64]) as a sequence of its 8
// rows of 8 pixels or as a 1x8x8 image, and the mean over a sequence.
class RowsAsSequence : public gbx::nn::Module {
 public:
  gbx::nn::Tensor forward(const gbx::nn::Tensor& x) override { return gbx::nn::reshape(x, {-1, 8, 8}); }
};
class RowsAsImage : public gbx::nn::Module {
 public:
  gbx::nn::Tensor forward(const gbx::nn::Tensor& x) override { return gbx::nn::reshape(x, {-1, 1, 8, 8}); }
};
class MeanOverSequence : public gbx::nn::Module {
 public:
  gbx::nn::Tensor forward(const gbx::nn::Tensor& x) override { return gbx::nn::mean(x, {1}); }
};

// The per-step losses and the final named parameter values of one training run.
struct TrainedRun {
  std::vector<double> losses;
  std::map<std::string, std::vector<double>> params;
};

inline void save_run(const TrainedRun& r, const std::string& path) {
  std::ofstream f(path);
  write_doubles(f, r.losses);
  f << r.params.size() << '\n';
  for (auto& [name, v] : r.params) {
    f << name << ' ';
    write_doubles(f, v);
  }
}

inline TrainedRun load_run(const std::string& path) {
  std::ifstream f(path);
  TrainedRun r;
  r.losses = read_doubles(f);
  size_t n = 0;
  f >> n;
  for (size_t i = 0; i < n; ++i) {
    std::string name;
    f >> name;
    r.params[name] = read_doubles(f);
  }
  return r;
}

// The largest |got - want| / |want| over two equally long series.
inline double worst_relative_difference(const std::vector<double>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - want[i]) / std::abs(want[i]));
  return worst;
}

// train(nullptr) in one forked child (the one-process reference), then train(group) on each of
// n forked ranks joined in a Gloo group (kernels never run in the test process itself). A child
// that fails or throws fails the test (ok false). Returns the reference and the ranks' runs.
struct ParallelRuns {
  bool ok = false;
  TrainedRun reference;
  std::vector<TrainedRun> ranks;
};
inline ParallelRuns run_reference_and_ranks(
    int n, const std::string& tag, const std::function<TrainedRun(std::shared_ptr<gbx::nn::ProcessGroup>)>& train) {
  const std::string out = fresh_dir(tag);
  auto guarded = [&](std::shared_ptr<gbx::nn::ProcessGroup> group, const std::string& path) -> std::string {
    try {
      save_run(train(std::move(group)), path);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  ParallelRuns result;
  auto ref = run_ranks(1, tag + "_ref", [&](int, int, const std::string&) { return guarded(nullptr, out + "/ref"); });
  EXPECT_EQ(ref[0].exit_code, 0) << tag << " reference: " << ref[0].message;
  auto ranks = run_ranks(n, tag, [&](int rank, int size, const std::string& dir) -> std::string {
    std::unique_ptr<GlooCommunicator> comm;
    std::string error;
    auto pg = join(rank, size, dir, &comm, &error);
    if (!pg) return error;
    return guarded(pg, out + "/" + std::to_string(rank));
  });
  result.ok = ref[0].exit_code == 0;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(ranks[size_t(r)].exit_code, 0) << tag << " rank " << r << ": " << ranks[size_t(r)].message;
    result.ok = result.ok && ranks[size_t(r)].exit_code == 0;
  }
  if (result.ok) {
    result.reference = load_run(out + "/ref");
    for (int r = 0; r < n; ++r) result.ranks.push_back(load_run(out + "/" + std::to_string(r)));
  }
  std::error_code ec;
  std::filesystem::remove_all(out, ec);
  return result;
}

}  // namespace gearbox::comm::testing
