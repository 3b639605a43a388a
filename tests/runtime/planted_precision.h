// A planted sensitive layer for the precision tests (precision_compare_test, accuracy_budget_test):
// a MatMul reading values of mean 1000 through weights whose columns sum to zero. In bf16 (8
// significant bits) 1000 +- 3 is rounded to a multiple of 4, an error of up to 2 on every input
// element that the cancelling weights do not cancel, while the result is of order 1; the
// ordinary MatMuls around it lose one bf16 rounding's worth.
#pragma once

#include <string>

#include "device/device.h"
#include "graph/pass_test_util.h"

namespace gearbox::testing {

inline bool cpu_has_bf16() {
  const device::Capabilities caps = device::detect_cpu_capabilities();
  return caps.has("avx512_bf16") || caps.has("amx_bf16");
}

// x [4,64] -> `before` MatMuls [64,64] ("ordinary", "ordinary1", ...) -> Add 1000 ("shift") ->
// MatMul [64,16] with columns summing to zero ("sensitive") -> Relu ("act") -> `after` MatMuls
// [16,16] ("tail0", "tail1", ...).
inline Model planted_model(int before = 1, int after = 0) {
  GraphBuilder b;
  Value* v = b.input("x", DType::F32, {Dim(4), Dim(64)});
  for (int i = 0; i < before; ++i) {
    Node* m = b.node("MatMul", {v, b.constant("w_ordinary" + std::to_string(i), random_tensor({64, 64}, 1 + 10 * i))});
    m->name = i == 0 ? "ordinary" : "ordinary" + std::to_string(i);
    v = m->outputs[0];
  }
  Tensor offset(DType::F32, {64});  // fused into the MatMul as its bias
  for (int64_t i = 0; i < 64; ++i) offset.data<float>()[i] = 1000.f;
  Node* add = b.node("Add", {v, b.constant("offset", offset)});
  add->name = "shift";
  Tensor w2 = random_tensor({64, 16}, 2);
  for (int64_t j = 0; j < 16; ++j) {
    double mean = 0;
    for (int64_t i = 0; i < 64; ++i) mean += w2.data<float>()[i * 16 + j] / 64.0;
    for (int64_t i = 0; i < 64; ++i) w2.data<float>()[i * 16 + j] -= static_cast<float>(mean);
  }
  Node* m2 = b.node("MatMul", {add->outputs[0], b.constant("w2", w2)});
  m2->name = "sensitive";
  Node* relu = b.node("Relu", {m2->outputs[0]});
  relu->name = "act";
  v = relu->outputs[0];
  for (int i = 0; i < after; ++i) {
    Node* m = b.node("MatMul", {v, b.constant("w_tail" + std::to_string(i), random_tensor({16, 16}, 5 + 10 * i))});
    m->name = "tail" + std::to_string(i);
    v = m->outputs[0];
  }
  b.output(v);
  return b.take();
}

}  // namespace gearbox::testing
