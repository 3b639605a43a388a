// nn::Module: the registries of parameters, buffers and submodules, and what walks them.
#include <cstring>

#include "frontend/tensor_impl.h"

namespace gbx::nn {

Tensor Module::register_parameter(std::string name, Tensor t) {
  if (t.defined() && !t.requires_grad()) t.set_requires_grad();
  params_.emplace_back(std::move(name), t);
  return t;
}

Tensor Module::register_buffer(std::string name, Tensor t) {
  buffers_.emplace_back(std::move(name), t);
  return t;
}

void Module::register_module(std::string name, std::shared_ptr<Module> m) {
  if (!m)
    throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "register_module('", name, "'): null module"));
  children_.emplace_back(std::move(name), std::move(m));
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>* out, bool params) const {
  for (const auto& [name, t] : params ? params_ : buffers_)
    if (t.defined()) out->emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out, params);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", &out, true);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", &out, false);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const { return children_; }

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : named_parameters()) out[name] = t;
  for (auto& [name, t] : named_buffers()) out[name] = t;
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state) {
  std::map<std::string, Tensor> mine = state_dict();
  for (const auto& [name, src] : state) {
    auto it = mine.find(name);
    if (it == mine.end())
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "load_state_dict: '", name,
                                       "' is not a parameter or buffer of this module"));
    Tensor& dst = it->second;
    if (src.shape() != dst.shape() || src.dtype() != dst.dtype())
      throw_status(gearbox::make_error(gearbox::ErrorCode::SHAPE_MISMATCH, "load_state_dict: '", name, "' is ",
                                       src.describe(), " but the module's is ", dst.describe()));
    const gearbox::Tensor& s = src.impl()->value;
    std::memcpy(dst.mutable_data(), s.raw(), s.nbytes());
  }
  for (const auto& [name, t] : mine)
    if (!state.count(name))
      throw_status(gearbox::make_error(gearbox::ErrorCode::INVALID_ARGUMENT, "load_state_dict: '", name,
                                       "' is missing from the state"));
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (Tensor& t : parameters()) t.zero_grad();
}

}  // namespace gbx::nn
