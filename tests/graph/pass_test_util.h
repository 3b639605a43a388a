// Building small IR graphs in code for the graph-pass tests, and running a graph with the
// optimizer off and on to compare outputs (reference kernels both times).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "graph/gbm/gbm_reader.h"
#include "graph/gbm/gbm_writer.h"
#include "graph/ir.h"
#include "graph/optimizer.h"
#include "kernels/kernel.h"
#include "runtime/session.h"

namespace gearbox::testing {

class GraphBuilder {
 public:
  explicit GraphBuilder(int opset = 17) : opset_(opset) {
    model_.graph = std::make_shared<Graph>();
    model_.graph->name = "test";
    model_.opsets[""] = opset;
    model_.opsets["com.gearbox"] = 1;
    model_.ir_version = 8;
  }
  Graph& graph() { return *model_.graph; }
  Model take() { return std::move(model_); }

  Value* input(const std::string& name, DType dt, const std::vector<Dim>& dims) {
    Value* v = graph().add_value(name);
    v->type.dtype = dt;
    v->type.shape = Shape(dims);
    graph().inputs.push_back(v);
    return v;
  }
  Value* constant(const std::string& name, Tensor t) {
    Value* v = graph().add_value(name);
    v->type.dtype = t.dtype();
    v->type.shape = Shape::from_dims(t.dims());
    v->is_initializer = true;
    v->initializer = std::move(t);
    graph().initializers.push_back(v);
    return v;
  }
  // Adds a node with `nout` fresh outputs; returns it.
  Node* node(const std::string& op, std::vector<Value*> inputs, size_t nout = 1, AttributeMap attrs = {},
             const std::string& domain = "") {
    Node* n = graph().add_node(op, op + "_" + std::to_string(counter_++));
    n->domain = domain;
    n->opset = domain.empty() ? opset_ : 1;
    n->inputs = std::move(inputs);
    n->attrs = std::move(attrs);
    for (size_t i = 0; i < nout; ++i) {
      Value* o = graph().add_value(n->name + "_out" + std::to_string(i));
      o->producer = n;
      n->outputs.push_back(o);
    }
    return n;
  }
  // Single-output convenience.
  Value* op(const std::string& op_type, std::vector<Value*> inputs, AttributeMap attrs = {}) {
    return node(op_type, std::move(inputs), 1, std::move(attrs))->outputs[0];
  }
  void output(Value* v) { graph().outputs.push_back(v); }

 private:
  Model model_;
  int opset_;
  int counter_ = 0;
};

// The attribute builders live in kernels/attributes.h; re-exported for the tests.
using gearbox::attr_float;
using gearbox::attr_floats;
using gearbox::attr_int;
using gearbox::attr_ints;
using gearbox::attr_string;

inline Tensor random_tensor(Dims dims, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t(DType::F32, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}
// Session options with the optimizer off (environment included) on the given engines, for
// tests that must run the graph exactly as built.
inline SessionOptions unoptimized_on(const std::string& engines) {
  SessionOptions o;
  o.engine = engines;
  o.optimizer.enabled = false;
  o.optimizer.use_env = false;
  return o;
}

inline Tensor scalar_f(float v) { return Tensor::scalar<float>(v); }
inline Tensor ints(std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(v); }

// Gives v a float32 tensor type of the given dims.
inline void typed(Value* v, Dims d) {
  v->type.dtype = DType::F32;
  v->type.shape = Shape::from_dims(d);
}

inline size_t count_op(const Graph& g, const std::string& op) {
  size_t n = 0;
  for (const auto& node : g.nodes)
    if (node->op_type == op) ++n;
  return n;
}

// Optimizer options that run only the named passes (and ignore GEARBOX_DISABLE_PASSES).
inline OptimizerOptions only_passes(const std::vector<std::string>& names) {
  OptimizerOptions o;
  o.use_env = false;
  for (const auto& p : optimizer_passes())
    if (std::find(names.begin(), names.end(), p.name) == names.end()) o.disabled_passes.push_back(p.name);
  return o;
}

// `m` written as a .gbm (what `gearbox compile` writes) and read back into *out.
inline void gbm_round_trip(const Model& m, Model* out) {
  auto bytes = gbm::serialize(m, gbm::WriteOptions{});
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto loaded = gbm::read_bytes(bytes->data(), bytes->size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  *out = std::move(loaded).value();
}

// Runs a model built by `build` with no pass on cpu.ref, and `optimized` (already optimized:
// by optimize(), or read back from a .gbm) with the optimizer off on `engines`; expects every
// output equal within tol (relative, absolute below 1).
inline void expect_same_outputs_as_unoptimized(const std::function<Model()>& build, Model optimized,
                                               const std::string& engines,
                                               const std::map<std::string, Tensor>& feeds, float tol) {
  SessionOptions off;
  off.engine = std::string(kEngineRef);
  off.optimizer.enabled = false;
  off.optimizer.use_env = false;
  auto s0 = Session::create(build(), off);
  ASSERT_TRUE(s0.ok()) << s0.status().to_string();
  auto ref = (*s0)->run(feeds);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  SessionOptions none = off;
  none.engine = engines;
  auto s1 = Session::create(std::move(optimized), none);
  ASSERT_TRUE(s1.ok()) << s1.status().to_string();
  auto got = (*s1)->run(feeds);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(ref->size(), got->size());
  for (size_t i = 0; i < ref->size(); ++i) {
    const Tensor &a = (*ref)[i], &b = (*got)[i];
    ASSERT_EQ(a.dims(), b.dims()) << "output " << i;
    ASSERT_EQ(a.dtype(), b.dtype());
    for (int64_t k = 0; k < a.numel(); ++k) {
      const double x = a.at_double(k), y = b.at_double(k);
      ASSERT_NEAR(x, y, tol * std::max(1.0, std::fabs(x))) << "output " << i << " element " << k;
    }
  }
}

// Runs a model built by `build` with no pass, then with `opts`, both on the reference engine
// (the comparison is fused vs unfused within one engine, not oneDNN vs reference); expects
// every output equal within tol. Returns the optimized graph's report through *report.
inline void expect_same_outputs(const std::function<Model()>& build, const std::map<std::string, Tensor>& feeds,
                                const OptimizerOptions& opts, float tol = 1e-5f, OptimizerReport* report = nullptr,
                                std::shared_ptr<Graph>* optimized = nullptr) {
  Model m = build();
  auto rep = optimize(m, opts);
  ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  if (report) *report = *rep;
  if (optimized) *optimized = m.graph;
  expect_same_outputs_as_unoptimized(build, std::move(m), std::string(kEngineRef), feeds, tol);
}

}  // namespace gearbox::testing
