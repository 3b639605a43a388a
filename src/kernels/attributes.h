// Operator attributes, as kernels see them. Owned by the kernel layer so kernels never
// include the graph IR; the IR's Node stores an AttributeMap. Subgraph attributes
// (If/Loop/Scan bodies) are opaque Graph pointers here: only the runtime executes them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/tensor.h"

namespace gearbox {

struct Graph;  // graph layer; opaque to kernels

enum class AttrType { Undefined, Float, Int, String, Tensor, Graph, Floats, Ints, Strings, Tensors, Graphs };

struct Attribute {
  AttrType type = AttrType::Undefined;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
};

using AttributeMap = std::map<std::string, Attribute, std::less<>>;

// Builders, for code that creates nodes or calls kernels (passes, fused kernels, tests).
inline Attribute attr_int(int64_t v) {
  Attribute a;
  a.type = AttrType::Int;
  a.i = v;
  return a;
}
inline Attribute attr_float(float v) {
  Attribute a;
  a.type = AttrType::Float;
  a.f = v;
  return a;
}
inline Attribute attr_ints(std::vector<int64_t> v) {
  Attribute a;
  a.type = AttrType::Ints;
  a.ints = std::move(v);
  return a;
}
inline Attribute attr_floats(std::vector<float> v) {
  Attribute a;
  a.type = AttrType::Floats;
  a.floats = std::move(v);
  return a;
}
inline Attribute attr_string(std::string v) {
  Attribute a;
  a.type = AttrType::String;
  a.s = std::move(v);
  return a;
}
inline Attribute attr_strings(std::vector<std::string> v) {
  Attribute a;
  a.type = AttrType::Strings;
  a.strings = std::move(v);
  return a;
}

}  // namespace gearbox
