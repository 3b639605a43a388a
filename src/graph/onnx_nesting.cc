// The wire-format walk behind onnx_graph_nesting_depth (graph/onnx_nesting.h). It follows only
// the fields that lead from a model to its graphs and from a graph to its subgraphs; every
// other field is skipped by its wire type, so the walk does not depend on the rest of
// onnx.proto.
#include "graph/onnx_nesting.h"

#include <algorithm>
#include <vector>

namespace gearbox {
namespace {

enum class Msg { Model, Graph, Node, Attribute, Function };

// The message a length-delimited field of `parent` holds, when it is on the path to a graph
// (field numbers from onnx.proto): ModelProto.graph = 7, ModelProto.functions = 25,
// GraphProto.node = 1, NodeProto.attribute = 5, AttributeProto.g = 6 and .graphs = 11,
// FunctionProto.node = 7.
std::optional<Msg> child_message(Msg parent, uint64_t field) {
  switch (parent) {
    case Msg::Model:
      if (field == 7) return Msg::Graph;
      if (field == 25) return Msg::Function;
      break;
    case Msg::Graph:
      if (field == 1) return Msg::Node;
      break;
    case Msg::Node:
      if (field == 5) return Msg::Attribute;
      break;
    case Msg::Attribute:
      if (field == 6 || field == 11) return Msg::Graph;
      break;
    case Msg::Function:
      if (field == 7) return Msg::Node;
      break;
  }
  return std::nullopt;
}

bool read_varint(std::string_view b, size_t* pos, size_t end, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= end) return false;
    const auto byte = static_cast<unsigned char>(b[(*pos)++]);
    *v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

}  // namespace

std::optional<int> onnx_graph_nesting_depth(std::string_view b) {
  struct Frame {
    Msg msg;
    size_t end;
    int graphs;  // graph levels open, this one included
  };
  std::vector<Frame> stack{{Msg::Model, b.size(), 0}};
  size_t pos = 0;
  int deepest = 0;
  while (!stack.empty()) {
    Frame& top = stack.back();
    if (pos == top.end) {
      stack.pop_back();
      continue;
    }
    uint64_t tag = 0;
    if (!read_varint(b, &pos, top.end, &tag)) return std::nullopt;
    const uint64_t field = tag >> 3;
    switch (tag & 7) {
      case 0: {  // varint
        uint64_t ignored = 0;
        if (!read_varint(b, &pos, top.end, &ignored)) return std::nullopt;
        break;
      }
      case 1:  // fixed64
        if (top.end - pos < 8) return std::nullopt;
        pos += 8;
        break;
      case 5:  // fixed32
        if (top.end - pos < 4) return std::nullopt;
        pos += 4;
        break;
      case 2: {  // length-delimited
        uint64_t len = 0;
        if (!read_varint(b, &pos, top.end, &len) || len > top.end - pos) return std::nullopt;
        if (auto child = child_message(top.msg, field)) {
          const int graphs = top.graphs + (*child == Msg::Graph ? 1 : 0);
          deepest = std::max(deepest, graphs);
          stack.push_back({*child, pos + static_cast<size_t>(len), graphs});
        } else {
          pos += static_cast<size_t>(len);
        }
        break;
      }
      default:  // groups (3, 4) are not used by onnx.proto; 6 and 7 do not exist
        return std::nullopt;
    }
  }
  return deepest;
}

}  // namespace gearbox
