// What the framework-layer parallel tests share: joining a forked rank's Gloo group on a file
// store, and moving doubles out of a forked child exactly (hex floats in a text file).
#pragma once

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

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

}  // namespace gearbox::comm::testing
