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
#include <type_traits>
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

// A 2 x 2 mesh on 4 ranks, rank = 2 outer + inner: "inner" groups {0, 1} and {2, 3} (the
// tensor- or pipeline-parallel ones) and "outer" groups {0, 2} and {1, 3} (data-parallel). Every
// rank creates every group in the same order (a rank outside a group gets none); each rank keeps
// the two it belongs to. Empty on success, else what failed.
struct Mesh2x2 {
  std::unique_ptr<GlooCommunicator> inner_comm, outer_comm;
  std::shared_ptr<gbx::nn::ProcessGroup> inner, outer;
};
inline std::string join_mesh_2x2(int rank, int size, const std::string& dir, const std::string& inner_name,
                                 const std::string& outer_name, Mesh2x2* mesh) {
  auto store = open_store("file:" + dir + "/store");
  if (!store) return store.status().to_string();
  GlooOptions world;
  world.rank = rank;
  world.size = size;
  world.timeout = std::chrono::seconds(30);
  for (int g = 0; g < 2; ++g) {
    auto c = GlooCommunicator::create_group(*store, world, inner_name + std::to_string(g), {2 * g, 2 * g + 1});
    if (!c) return c.status().to_string();
    if (*c) mesh->inner_comm = std::move(*c);
  }
  for (int g = 0; g < 2; ++g) {
    auto c = GlooCommunicator::create_group(*store, world, outer_name + std::to_string(g), {g, g + 2});
    if (!c) return c.status().to_string();
    if (*c) mesh->outer_comm = std::move(*c);
  }
  if (!mesh->inner_comm || !mesh->outer_comm) return "rank " + std::to_string(rank) + " is missing a group";
  mesh->inner = std::make_shared<gbx::nn::ProcessGroup>(*mesh->inner_comm);
  mesh->outer = std::make_shared<gbx::nn::ProcessGroup>(*mesh->outer_comm);
  return "";
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

// A run's losses and parameters as text (hex floats: exact across the fork); tests with more
// to report write it after these.
inline void write_run(std::ostream& f, const TrainedRun& r) {
  write_doubles(f, r.losses);
  f << r.params.size() << '\n';
  for (auto& [name, v] : r.params) {
    f << name << ' ';
    write_doubles(f, v);
  }
}

inline TrainedRun read_run(std::istream& f) {
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

inline void save_run(const TrainedRun& r, const std::string& path) {
  std::ofstream f(path);
  write_run(f, r);
}

inline TrainedRun load_run(const std::string& path) {
  std::ifstream f(path);
  return read_run(f);
}

// The largest |got - want| / |want| over two equally long series.
inline double worst_relative_difference(const std::vector<double>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - want[i]) / std::abs(want[i]));
  return worst;
}

// Runs `job` in n forked children and returns what each wrote with `save`, read back with
// `load` (kernels never run in the test process itself). joined: the children are the ranks of
// a Gloo group and `job` gets it; otherwise `job` gets nullptr (a one-process reference). A
// child that fails or throws is a test failure, and the result is then empty.
template <class Result>
std::vector<Result> run_and_collect(
    int n, bool joined, const std::string& tag,
    const std::function<std::type_identity_t<Result>(std::shared_ptr<gbx::nn::ProcessGroup>)>& job,
    void (*save)(const std::type_identity_t<Result>&, const std::string&),
    std::type_identity_t<Result> (*load)(const std::string&)) {
  const std::string out = fresh_dir(tag + "_out");
  auto children = run_ranks(n, tag, [&](int rank, int size, const std::string& dir) -> std::string {
    std::unique_ptr<GlooCommunicator> comm;
    std::shared_ptr<gbx::nn::ProcessGroup> group;
    if (joined) {
      std::string error;
      group = join(rank, size, dir, &comm, &error);
      if (!group) return error;
    }
    try {
      save(job(group), out + "/" + std::to_string(rank));
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  });
  bool ok = true;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(children[size_t(r)].exit_code, 0) << tag << " rank " << r << ": " << children[size_t(r)].message;
    ok = ok && children[size_t(r)].exit_code == 0;
  }
  std::vector<Result> results;
  if (ok)
    for (int r = 0; r < n; ++r) results.push_back(load(out + "/" + std::to_string(r)));
  std::error_code ec;
  std::filesystem::remove_all(out, ec);
  return results;
}

// train(nullptr) in one forked child (the one-process reference), then train(group) on each of
// n forked ranks joined in a Gloo group. ok false (and a test failure) when a child failed.
template <class Result>
struct ParallelRuns {
  bool ok = false;
  Result reference;
  std::vector<Result> ranks;
};
template <class Result = TrainedRun>
ParallelRuns<Result> run_reference_and_ranks(
    int n, const std::string& tag,
    const std::function<std::type_identity_t<Result>(std::shared_ptr<gbx::nn::ProcessGroup>)>& train,
    void (*save)(const std::type_identity_t<Result>&, const std::string&) = save_run,
    std::type_identity_t<Result> (*load)(const std::string&) = load_run) {
  ParallelRuns<Result> runs;
  auto ref = run_and_collect<Result>(1, false, tag + "_ref", train, save, load);
  runs.ranks = run_and_collect<Result>(n, true, tag, train, save, load);
  runs.ok = !ref.empty() && !runs.ranks.empty();
  if (!ref.empty()) runs.reference = ref[0];
  return runs;
}

}  // namespace gearbox::comm::testing
