// Inference-mode BatchNormalization as the per-channel affine map it is,
//   y = x * s + t,  s = gamma / sqrt(var + eps),  t = beta - mean * s  (computed in double):
//   - conv_bn_fold folds it into the preceding Conv's weights and bias,
//       W'[m] = W[m] * s[m],  b'[m] = (b[m] - mean[m]) * s[m] + beta[m],
//     when W, b and every BN parameter are constant and the Conv output is read by the BN alone;
//   - batchnorm_decompose turns a BN no Conv absorbed (DenseNet's after each Concat, a
//     pre-activation block's) into Mul(x, s) and Add(., t) with [C, 1, ..., 1] constants: two
//     vectorized broadcasts on cpu.simd instead of the reference kernel, and ops that
//     transpose_sinking moves a channels-last boundary Transpose through (a BN has no
//     channels-last form), so the Transposes around it cancel.
#include <algorithm>
#include <cmath>
#include <optional>

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

// The BN's parameters when it is an inference-mode BN with constant parameters of C elements
// each and a single output read.
struct BnParams {
  const Tensor *gamma, *beta, *mean, *var;
  double eps;
};

std::optional<BnParams> constant_bn(const Node& bn, const GraphIndex& idx, int64_t channels) {
  if (bn.op_type != "BatchNormalization" || !bn.domain.empty() || bn.inputs.size() != 5 || bn.outputs.empty() ||
      !bn.outputs[0] || attr_int(bn, "training_mode", 0) != 0)
    return std::nullopt;
  for (size_t i = 1; i < bn.outputs.size(); ++i)
    if (bn.outputs[i] && (idx.num_uses(bn.outputs[i]) > 0 || idx.pinned(bn.outputs[i]))) return std::nullopt;
  for (size_t i = 1; i < 5; ++i) {
    const Value* p = bn.inputs[i];
    if (!is_const(p) || p->initializer.numel() != channels || !is_float(p->initializer.dtype())) return std::nullopt;
  }
  return BnParams{&bn.inputs[1]->initializer, &bn.inputs[2]->initializer, &bn.inputs[3]->initializer,
                  &bn.inputs[4]->initializer, attr_float(bn, "epsilon", 1e-5f)};
}

}  // namespace

Result<int> decompose_batchnorm(Graph& g, const PassContext& ctx) {
  GraphIndex idx(g);
  std::unordered_set<const Node*> dead;
  std::vector<Node*> order;
  for (auto& n : g.nodes) order.push_back(n.get());
  int matches = 0;
  for (Node* bn : order) {
    if (bn->op_type != "BatchNormalization" || bn->inputs.empty()) continue;
    const Value* x = bn->inputs[0];
    if (!x || x->type.kind != ValueType::Kind::Tensor || x->type.dtype != DType::F32 || !x->type.shape.ranked ||
        x->type.shape.rank() < 2 || !x->type.shape.dims[1].known())
      continue;
    const int64_t c = x->type.shape.dims[1].value;
    const auto p = constant_bn(*bn, idx, c);
    if (!p) continue;
    Dims param_dims(x->type.shape.rank() - 1, 1);  // [C, 1, ..., 1]: broadcasts along axis 1
    param_dims[0] = c;
    Tensor scale(DType::F32, param_dims), shift(DType::F32, param_dims);
    for (int64_t k = 0; k < c; ++k) {
      const double s = p->gamma->at_double(k) / std::sqrt(p->var->at_double(k) + p->eps);
      scale.data<float>()[k] = static_cast<float>(s);
      shift.data<float>()[k] = static_cast<float>(p->beta->at_double(k) - p->mean->at_double(k) * s);
    }
    Value* y = bn->outputs[0];
    Value* scaled = g.add_value(y->name + "/bn_scaled");
    scaled->type = y->type;
    Node* mul = insert_node_before(g, bn, "Mul", bn->name + "/scale");
    Node* add = insert_node_before(g, bn, "Add", bn->name + "/shift");
    mul->opset = add->opset = std::max(bn->opset, 7);  // numpy broadcasting
    mul->inputs = {bn->inputs[0], add_constant(g, bn->name + "/bn_scale", std::move(scale))};
    mul->outputs = {scaled};
    scaled->producer = mul;
    add->inputs = {scaled, add_constant(g, bn->name + "/bn_shift", std::move(shift))};
    add->outputs = {y};
    y->producer = add;
    dead.insert(bn);
    record_replacement(ctx, *bn, *add);
    ++matches;
  }
  erase_nodes(g, dead);
  if (matches) drop_unused_initializers(g);
  return matches;
}

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
    const Tensor& w = wv->initializer;
    const DType dt = w.dtype();
    if (!bn || bn->inputs.empty() || bn->inputs[0] != conv->outputs[0] || (dt != DType::F32 && dt != DType::F64) ||
        w.rank() < 3)
      continue;
    const int64_t m = w.dim(0);
    const auto p = constant_bn(*bn, idx, m);
    if (!p || (bv && (bv->initializer.numel() != m || bv->initializer.dtype() != dt))) continue;
    Tensor w_out(dt, w.dims()), b_out(dt, {m});
    const Tensor* b = bv ? &bv->initializer : nullptr;
    if (dt == DType::F32) fold<float>(w, b, *p->gamma, *p->beta, *p->mean, *p->var, p->eps, w_out, b_out);
    else fold<double>(w, b, *p->gamma, *p->beta, *p->mean, *p->var, p->eps, w_out, b_out);
    conv->inputs[1] = add_constant(g, wv->name + "_bnfold", std::move(w_out));
    Value* new_b = add_constant(g, (bv ? bv->name : conv->name + "_bias") + "_bnfold", std::move(b_out));
    if (conv->inputs.size() > 2) conv->inputs[2] = new_b;
    else conv->inputs.push_back(new_b);
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
