// Gradient builders by op type. A builder gets the forward TapeNode and the gradients of its
// outputs (an undefined Tensor: that output got none) and returns one gradient per forward
// input (undefined for inputs that take none: shapes, axes, integer targets), written with the
// same eager ops (ops.h), so that a builder also emits a backward graph when the ops trace.
// Builders live in autodiff/gradients/*.cc, one file per op family; each file has a
// register_*_gradients() function that global() calls once (explicit calls, not static
// initializers, so a static library cannot drop them).
//
// (The op-descriptor table in src/kernels will hold a GradientBuilder slot; at merge this
// registry becomes that slot's filler.)
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/autodiff/tape.h"

namespace gbx::nn {

using GradientBuilder =
    std::function<std::vector<Tensor>(const TapeNode& node, const std::vector<Tensor>& grad_outputs)>;

class GradientRegistry {
 public:
  static GradientRegistry& global();
  void add(std::string domain, std::string op_type, GradientBuilder builder);
  const GradientBuilder* find(std::string_view domain, std::string_view op_type) const;
  std::vector<std::string> op_types() const;

 private:
  std::vector<std::pair<std::string, GradientBuilder>> builders_;  // key: "domain:op_type"
};

// One per file in autodiff/gradients/.
void register_elementwise_gradients(GradientRegistry& r);
void register_activation_gradients(GradientRegistry& r);
void register_matmul_gradients(GradientRegistry& r);
void register_reduce_gradients(GradientRegistry& r);
void register_shape_gradients(GradientRegistry& r);
void register_conv_gradients(GradientRegistry& r);
void register_pool_gradients(GradientRegistry& r);
void register_norm_gradients(GradientRegistry& r);
void register_gather_gradients(GradientRegistry& r);
void register_imported_op_gradients(GradientRegistry& r);

}  // namespace gbx::nn
