// How deeply an ONNX model's subgraphs nest, read from the serialized bytes without parsing
// them into messages: protobuf's parser stops at 100 nested messages (about 33 graph levels:
// Graph -> Node -> Attribute -> Graph), and then only says "parse failed", which gearbox would
// report as a truncated or corrupt file. The importer asks this scan, after such a failure,
// whether the model is well-formed but nested too deeply, to say so (MODEL_NESTING_TOO_DEEP)
// with the depth. The scan is iterative (an explicit stack, no recursion) and bounds-checked:
// the bytes are untrusted.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gearbox {

// The deepest graph nesting of a ModelProto's bytes: 1 for a main graph without subgraphs, 2
// when an If/Loop/Scan attribute holds a graph, and so on (function bodies count like graphs).
// nullopt when the bytes are not well-formed protobuf along the way to a graph.
std::optional<int> onnx_graph_nesting_depth(std::string_view model_bytes);

// The deepest graph nesting every model parses at, whatever its graphs hold: protobuf stops at
// 100 nested messages, a graph at level k is message 3k - 1 (Model, then Graph, Node,
// Attribute per level), and a graph's own contents go up to 5 messages deeper (an output's
// ValueInfo, Type, Tensor type, Shape, Dimension). So 31 levels always parse, 32 usually do
// (bad_input.nesting_at_limit runs one), 34 never do. A model deeper than this whose bytes
// protobuf refuses is reported as nested too deeply.
inline constexpr int kMaxGraphNesting = 31;

}  // namespace gearbox
