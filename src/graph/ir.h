// The graph IR: Graph, Node, Value. SSA-style: every Value has one producer (a node, or the
// graph itself for inputs and initializers) and any number of consumers.
//
// A Graph owns its Values and Nodes. Subgraphs (If branches, Loop/Scan bodies) are Graphs
// held by their node's attributes; a subgraph node may read a Value of an enclosing graph
// directly (outer-scope reference), so Value pointers are unique across the whole model and
// serve as keys at run time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/dtype.h"
#include "base/shape.h"
#include "base/tensor.h"
#include "kernels/attributes.h"

namespace gearbox {

struct Node;

// The static type of a Value: a tensor, a sequence of tensors, or an optional of either.
struct ValueType {
  enum class Kind { Tensor, Sequence, Optional } kind = Kind::Tensor;
  DType dtype = DType::Undefined;   // for Tensor; the element's dtype for Sequence/Optional
  Shape shape;                      // for Tensor
  std::shared_ptr<ValueType> elem;  // for Sequence and Optional
};
std::string to_string(const ValueType& t);

struct Value {
  std::string name;
  ValueType type;
  Node* producer = nullptr;  // nullptr for graph inputs, initializers and outer-scope values
  bool is_initializer = false;
  Tensor initializer;  // set when is_initializer
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;           // "" is ai.onnx
  int opset = 0;                // the model's opset version for `domain`
  std::vector<Value*> inputs;   // nullptr marks an omitted optional input
  std::vector<Value*> outputs;  // nullptr marks an omitted optional output
  AttributeMap attrs;
  // The engine the partitioner chose for this node ("cpu.dnnl"); empty before partitioning.
  // Recorded in the .gbm so a loaded model runs on the engines it was compiled for.
  std::string engine;
  // The precision the node computes in when the precision pass lowered it (runtime/precision.h):
  // BF16 = bf16 products with fp32 accumulation, its inputs and outputs staying as the graph
  // types them; Undefined = in its inputs' dtype. Recorded in the .gbm.
  DType compute_dtype = DType::Undefined;
  // "Conv" or "com.microsoft.Gelu": for messages.
  std::string qualified_op() const { return domain.empty() ? op_type : domain + "." + op_type; }
};

struct Graph {
  std::string name;
  std::vector<std::unique_ptr<Value>> values;  // every value this graph defines
  std::vector<std::unique_ptr<Node>> nodes;    // in topological order once imported
  std::vector<Value*> inputs;                  // excludes initializers
  std::vector<Value*> outputs;
  std::vector<Value*> initializers;
  const Graph* parent = nullptr;  // enclosing graph for subgraphs

  Value* add_value(std::string name);
  Node* add_node(std::string op_type, std::string name = {});
  // A value defined in this graph by name, or nullptr.
  Value* find_value(const std::string& name) const;
  // Number of nodes including all subgraphs.
  size_t total_nodes() const;

 private:
  std::map<std::string, Value*, std::less<>> by_name_;
  friend class GraphBuilder;
};

// Opset imports: domain ("" = ai.onnx) -> version.
using OpsetMap = std::map<std::string, int64_t, std::less<>>;

struct Model {
  std::shared_ptr<Graph> graph;
  OpsetMap opsets;
  int64_t ir_version = 0;
  std::string producer_name;
  std::string producer_version;
  std::string path;  // where it was loaded from, for messages
  // The plugins a compiled model's nodes run on: name -> the version it was compiled with
  // (recorded by the partitioner's caller, written to and read from a .gbm).
  std::map<std::string, std::string> plugin_versions;
  // The precision mode its nodes' compute dtypes were chosen under (runtime/precision.h;
  // "allow_mix_precision_bf16"); empty: force_fp32. Written to and read from a .gbm.
  std::string precision_mode;
};

// Calls fn(const Graph&) for each subgraph n holds (If branches, Loop/Scan bodies).
template <typename Fn>
void for_each_subgraph(const Node& n, Fn&& fn) {
  for (const auto& [name, a] : n.attrs) {
    if (a.g) fn(*a.g);
    for (const auto& sg : a.graphs) fn(*sg);
  }
}

// Adds every value g and its nested subgraphs read (node inputs, graph outputs) to out.
void collect_reads(const Graph& g, std::unordered_set<const Value*>& out);

// Reorders graph.nodes topologically (stable: keeps the original order where it is
// already valid). GRAPH_CYCLE if a node input has no producer or the graph has a cycle.
Status topological_sort(Graph& graph);

}  // namespace gearbox
