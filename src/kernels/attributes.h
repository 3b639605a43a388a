// Operator attributes, as kernels see them. Owned by the kernel layer so kernels never
// include the graph IR; the IR's Node stores an AttributeMap. Subgraph attributes
// (If/Loop/Scan bodies) are opaque Graph pointers here: only the runtime executes them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
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

}  // namespace gearbox
