// Conv + BatchNormalization folding (inference): BN's per-channel affine map is folded into
// the convolution's weights and bias,
//   W'[m] = W[m] * s[m],  b'[m] = (b[m] - mean[m]) * s[m] + beta[m],  s = gamma / sqrt(var + eps),
// computed in double. Needs W, b, and every BN parameter constant and the Conv output read
// by the BN alone.
#include <cmath>

#include "graph/passes/passes.h"

namespace gearbox::passes {

namespace {

template <typename T>
void fold(const Tensor& w, const Tensor* b, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
          const Tensor& var, double eps, Tensor& w_out, Tensor& b_out) {
  const int64_t m = w.dim(0);
  const int64_t per = w.numel() / std::max<int64_t>(1, m);
  const T* wp = w.data<T>();
  T* wo = w_out.data<T>();
  T* bo = b_out.data<T>();
  for (int64_t c = 0; c < m; ++c) {
    const double s = gamma.at_double(c) / std::sqrt(var.at_double(c) + eps);
    for (int64_t i = 0; i < per; ++i) wo[c * per + i] = static_cast<T>(static_cast<double>(wp[c * per + i]) * s);
    const double bias = b ? b->at_double(c) : 0.0;
    bo[c] = static_cast<T>((bias - mean.at_double(c)) * s + beta.at_double(c));
  }
}

}  // namespace

Result<int> fold_conv_batchnorm(Graph& g, const PassContext& ctx) {
  GraphIndex idx(g);
  std::unordered_set<const Node*> dead;
  int matches = 0;
  for (auto& up : g.nodes) {
    Node* conv = up.get();
    if (conv->op_type != "Conv" || !conv->domain.empty() || conv->inputs.size() < 2 || conv->outputs.size() != 1 ||
        !conv->outputs[0])
      continue;
    Value* wv = conv->inputs[1];
    Value* bv = conv->inputs.size() > 2 ? conv->inputs[2] : nullptr;
    if (!is_const(wv) || (bv && !is_const(bv))) continue;
    Node* bn = idx.sole_consumer(conv->outputs[0]);
    if (!bn || bn->op_type != "BatchNormalization" || !bn->domain.empty() || bn->inputs.size() != 5 ||
        bn->inputs[0] != conv->outputs[0] || attr_int(*bn, "training_mode", 0) != 0 || !bn->outputs[0])
      continue;
    bool extra_outputs = false;
    for (size_t i = 1; i < bn->outputs.size(); ++i)
      if (bn->outputs[i] && (idx.num_uses(bn->outputs[i]) > 0 || idx.pinned(bn->outputs[i]))) extra_outputs = true;
    if (extra_outputs) continue;
    const Tensor& w = wv->initializer;
    const DType dt = w.dtype();
    if ((dt != DType::F32 && dt != DType::F64) || w.rank() < 3) continue;
    const int64_t m = w.dim(0);
    bool params_ok = true;
    for (size_t i = 1; i < 5; ++i) {
      const Value* p = bn->inputs[i];
      if (!is_const(p) || p->initializer.numel() != m || p->initializer.dtype() == DType::String) params_ok = false;
    }
    if (!params_ok || (bv && (bv->initializer.numel() != m || bv->initializer.dtype() != dt))) continue;
    const double eps = attr_float(*bn, "epsilon", 1e-5f);
    Tensor w_out(dt, w.dims()), b_out(dt, {m});
    const Tensor* b = bv ? &bv->initializer : nullptr;
    const Tensor &gamma = bn->inputs[1]->initializer, &beta = bn->inputs[2]->initializer,
                 &mean = bn->inputs[3]->initializer, &var = bn->inputs[4]->initializer;
    if (dt == DType::F32)
      fold<float>(w, b, gamma, beta, mean, var, eps, w_out, b_out);
    else
      fold<double>(w, b, gamma, beta, mean, var, eps, w_out, b_out);
    conv->inputs[1] = add_constant(g, wv->name + "_bnfold", std::move(w_out));
    Value* new_b = add_constant(g, (bv ? bv->name : conv->name + "_bias") + "_bnfold", std::move(b_out));
    if (conv->inputs.size() > 2)
      conv->inputs[2] = new_b;
    else
      conv->inputs.push_back(new_b);
    Value* y = bn->outputs[0];
    conv->outputs[0] = y;
    y->producer = conv;
    dead.insert(bn);
    record_replacement(ctx, *bn, *conv);
    ++matches;
    idx.rebuild();
  }
  erase_nodes(g, dead);
  if (matches) drop_unused_initializers(g);
  return matches;
}

}  // namespace gearbox::passes
