// The gradient-builder registry (see gradient_registry.h).
#include "frontend/autodiff/gradient_registry.h"

namespace gbx::nn {

namespace {
std::string key(std::string_view domain, std::string_view op_type) {
  return std::string(domain) + ":" + std::string(op_type);
}
}  // namespace

GradientRegistry& GradientRegistry::global() {
  static GradientRegistry r = [] {
    GradientRegistry reg;
    register_elementwise_gradients(reg);
    register_activation_gradients(reg);
    register_matmul_gradients(reg);
    register_reduce_gradients(reg);
    register_shape_gradients(reg);
    register_conv_gradients(reg);
    register_pool_gradients(reg);
    register_norm_gradients(reg);
    register_gather_gradients(reg);
    register_imported_op_gradients(reg);
    return reg;
  }();
  return r;
}

void GradientRegistry::add(std::string domain, std::string op_type, GradientBuilder builder) {
  builders_.emplace_back(key(domain, op_type), std::move(builder));
}

const GradientBuilder* GradientRegistry::find(std::string_view domain, std::string_view op_type) const {
  const std::string k = key(domain, op_type);
  for (const auto& [name, b] : builders_)
    if (name == k) return &b;
  return nullptr;
}

std::vector<std::string> GradientRegistry::op_types() const {
  std::vector<std::string> out;
  for (const auto& [name, b] : builders_) out.push_back(name);
  return out;
}

}  // namespace gbx::nn
