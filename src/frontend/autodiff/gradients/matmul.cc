// Gradients of MatMul (batch dims broadcast: summed back) and Gemm (any transA/transB,
// alpha, beta; the optional C broadcast).
#include "frontend/autodiff/gradient_registry.h"
#include "frontend/ops/internal.h"

namespace gbx::nn {

namespace {
using Grads = std::vector<Tensor>;
double attr_f(const TapeNode& n, const char* name, double def) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? def : it->second.f;
}
int64_t attr_i(const TapeNode& n, const char* name, int64_t def) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? def : it->second.i;
}
}  // namespace

void register_matmul_gradients(GradientRegistry& r) {
  // Y = A B: dA = dY B^T, dB = A^T dY.
  r.add("", "MatMul", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor &a = n.inputs[0], &b = n.inputs[1];
    return {sum_to(matmul(g[0], transpose_last2(b)), a.shape()), sum_to(matmul(transpose_last2(a), g[0]), b.shape())};
  });
  // Y = alpha A' B' + beta C with A' = A or A^T, B' = B or B^T.
  r.add("", "Gemm", [](const TapeNode& n, const Grads& g) -> Grads {
    const Tensor &a = n.inputs[0], &b = n.inputs[1];
    const bool ta = attr_i(n, "transA", 0) != 0, tb = attr_i(n, "transB", 0) != 0;
    const double alpha = attr_f(n, "alpha", 1.0), beta = attr_f(n, "beta", 1.0);
    Tensor ap = ta ? transpose(a, {1, 0}) : a;
    Tensor bp = tb ? transpose(b, {1, 0}) : b;
    Tensor gy = alpha == 1.0 ? g[0] : mul(g[0], scalar_like(g[0], alpha));
    Tensor gap = matmul(gy, transpose(bp, {1, 0}));  // d/dA'
    Tensor gbp = matmul(transpose(ap, {1, 0}), gy);  // d/dB'
    Grads out{ta ? transpose(gap, {1, 0}) : gap, tb ? transpose(gbp, {1, 0}) : gbp, Tensor()};
    if (n.inputs.size() > 2 && n.inputs[2].defined()) {
      Tensor gc = beta == 1.0 ? g[0] : mul(g[0], scalar_like(g[0], beta));
      out[2] = sum_to(gc, n.inputs[2].shape());
    }
    return out;
  });
}

}  // namespace gbx::nn
