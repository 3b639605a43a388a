// What an nn::Tensor is inside: gearbox's own Tensor (the storage the kernels read and write)
// plus the autodiff state. Internal to src/frontend; include/gearbox/nn.hpp only forward-
// declares it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "base/tensor.h"
#include "gearbox/nn.hpp"

namespace gbx::nn {

struct TapeNode;  // autodiff/tape.h

struct TensorImpl {
  gearbox::Tensor value;
  bool requires_grad = false;
  gearbox::Tensor grad;               // accumulated by backward() on leaves; undefined before
  std::shared_ptr<TapeNode> grad_fn;  // the op that produced this tensor; null on leaves
  size_t output_index = 0;            // which output of grad_fn this is
  // On leaves: run by backward() once the pass has added every gradient it has for this leaf
  // (torch's post-accumulate-grad hooks); data-parallel training starts its allreduce there.
  std::vector<std::pair<uint64_t, std::function<void()>>> post_accumulate_grad_hooks;
};

// Wraps a kernel-layer tensor (no history).
inline Tensor wrap(gearbox::Tensor t, bool requires_grad = false) {
  auto impl = std::make_shared<TensorImpl>();
  impl->value = std::move(t);
  impl->requires_grad = requires_grad;
  return Tensor(std::move(impl));
}

// The kernel-layer tensor of a defined nn::Tensor (INVALID_ARGUMENT if undefined).
const gearbox::Tensor& value_of(const Tensor& t, const char* what);

gearbox::DType to_internal(DType t);
DType to_public(gearbox::DType t, const char* what);

// Throws nn::Error for a non-OK status.
void throw_if_error(const gearbox::Status& st);
[[noreturn]] void throw_status(const gearbox::Status& st);

}  // namespace gbx::nn
