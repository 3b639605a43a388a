// The rewrites of ONNX Runtime's contrib operators (contrib_ops.h). Each function below owns one
// op: it reads the node's inputs and attributes as ONNX Runtime's schema defines them and emits
// the equivalent ai.onnx / com.gearbox nodes in front of it; the node itself is then removed,
// its output values kept (readers and graph outputs hold them by pointer).
#include "graph/contrib_ops.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "graph/passes/pass_util.h"
#include "kernels/kernel.h"

namespace gearbox {

namespace {

constexpr const char* kMicrosoft = "com.microsoft";

// Emits the replacement of one contrib node.
class Rewrite {
 public:
  Rewrite(Graph& g, Node& n) : g_(g), n_(n) {}

  const Node& node() const { return n_; }
  Graph& graph() { return g_; }
  // Input i, or nullptr when absent.
  Value* in(size_t i) const { return i < n_.inputs.size() ? n_.inputs[i] : nullptr; }
  // Output i, or nullptr when the model does not ask for it.
  Value* out(size_t i) const { return i < n_.outputs.size() ? n_.outputs[i] : nullptr; }
  int64_t attr_i(const char* name, int64_t def) const { return passes::attr_int(n_, name, def); }
  float attr_f(const char* name, float def) const { return passes::attr_float(n_, name, def); }

  // A new intermediate value of x's dtype.
  Value* temp(const Value* like) {
    std::string base = (n_.name.empty() ? n_.op_type : n_.name) + "/" + std::to_string(counter_++);
    std::string name = base;
    for (int i = 1; g_.find_value(name); ++i) name = base + "_" + std::to_string(i);
    Value* v = g_.add_value(name);
    if (like) v->type.dtype = like->type.dtype;
    return v;
  }
  // Emits op(inputs) -> outputs before the contrib node. A null first output gets a new value of
  // the first input's dtype; a null later one is an omitted optional output (trailing ones are
  // dropped). Returns the node's first output.
  Value* emit(const std::string& domain, const std::string& op, int opset, std::vector<Value*> inputs,
              std::vector<Value*> outputs = {nullptr}, AttributeMap attrs = {}) {
    Node* e = passes::insert_node_before(
        g_, &n_, op, (n_.name.empty() ? n_.op_type : n_.name) + "/" + op + "_" + std::to_string(counter_++));
    e->domain = domain;
    e->opset = opset;
    e->attrs = std::move(attrs);
    if (outputs.empty()) outputs.push_back(nullptr);
    if (!outputs[0]) outputs[0] = temp(inputs.empty() ? nullptr : inputs[0]);
    while (outputs.size() > 1 && !outputs.back()) outputs.pop_back();
    // Trailing omitted inputs are dropped the same way.
    while (inputs.size() > 1 && !inputs.back()) inputs.pop_back();
    for (Value* o : outputs)
      if (o) o->producer = e;
    e->inputs = std::move(inputs);
    e->outputs = std::move(outputs);
    return e->outputs.empty() ? nullptr : e->outputs[0];
  }
  Value* onnx(const std::string& op, int opset, std::vector<Value*> inputs, Value* output = nullptr,
              AttributeMap attrs = {}) {
    return emit("", op, opset, std::move(inputs), {output}, std::move(attrs));
  }
  // A scalar constant of x's float dtype (a float32 constant cast to it when x is not float32;
  // constant folding removes the Cast).
  Value* scalar_like(const Value* x, float v) {
    Value* c = passes::add_constant(g_, n_.name + "/const", Tensor::scalar<float>(v));
    DType dt = x ? x->type.dtype : DType::F32;
    if (dt == DType::F32 || dt == DType::Undefined) return c;
    return onnx("Cast", 13, {c}, nullptr, {{"to", attr_int(static_cast<int64_t>(dt))}});
  }
  Value* ints(const std::vector<int64_t>& v) {
    return passes::add_constant(g_, n_.name + "/const", Tensor::from_vector<int64_t>(v));
  }
  // x's static rank, or -1.
  static int rank(const Value* x) { return passes::static_rank(x); }
  Status unsupported(const std::string& what) const {
    return make_error(ErrorCode::OP_UNSUPPORTED, "node '", n_.name, "' (", n_.qualified_op(), "): ", what,
                      " is not supported by gearbox's rewrite of this ONNX Runtime contrib operator");
  }
  Status missing_input(size_t i) const {
    return make_error(ErrorCode::MODEL_INVALID, "node '", n_.name, "' (", n_.qualified_op(), ") needs input ", i);
  }

 private:
  Graph& g_;
  Node& n_;
  int counter_ = 0;
};

// y = x + b when b is present, else x itself (written to `out` when given).
Value* add_optional(Rewrite& r, Value* x, Value* b, Value* out = nullptr) {
  if (!b) return out ? r.onnx("Identity", 13, {x}, out) : x;
  return r.onnx("Add", 14, {x, b}, out);
}

Value* gelu(Rewrite& r, Value* x, bool tanh_form, Value* out) {
  return r.emit(std::string(kGearboxDomain), "Gelu", 1, {x}, {out},
                {{"approximate", attr_string(tanh_form ? "tanh" : "none")}});
}

// Gelu(X): the erf form.
Status lower_gelu(Rewrite& r) {
  if (!r.in(0)) return r.missing_input(0);
  gelu(r, r.in(0), false, r.out(0));
  return Status::OK();
}

// ai.onnx Gelu-20 (approximate = "none" | "tanh"): the op ONNX adopted from com.gearbox's own
// and ORT's, so it runs on com.gearbox.Gelu's kernels and fusions.
Status lower_onnx_gelu(Rewrite& r) {
  if (!r.in(0)) return r.missing_input(0);
  const auto it = r.node().attrs.find("approximate");
  const std::string approximate = it == r.node().attrs.end() ? "none" : it->second.s;
  if (approximate != "none" && approximate != "tanh")
    return make_error(ErrorCode::ATTRIBUTE_INVALID, "node '", r.node().name, "' (Gelu): approximate is '", approximate,
                      "'; ONNX defines \"none\" and \"tanh\"");
  gelu(r, r.in(0), approximate == "tanh", r.out(0));
  return Status::OK();
}

// FastGelu(X, bias?): the tanh form of X + bias.
Status lower_fast_gelu(Rewrite& r) {
  if (!r.in(0)) return r.missing_input(0);
  gelu(r, add_optional(r, r.in(0), r.in(1)), true, r.out(0));
  return Status::OK();
}

// BiasGelu(A, B): the erf form of A + B.
Status lower_bias_gelu(Rewrite& r) {
  if (!r.in(0) || !r.in(1)) return r.missing_input(r.in(0) ? 1 : 0);
  gelu(r, r.onnx("Add", 14, {r.in(0), r.in(1)}), false, r.out(0));
  return Status::OK();
}

// QuickGelu(X; alpha = 1.702): X * Sigmoid(alpha * X).
Status lower_quick_gelu(Rewrite& r) {
  Value* x = r.in(0);
  if (!x) return r.missing_input(0);
  Value* ax = r.onnx("Mul", 14, {x, r.scalar_like(x, r.attr_f("alpha", 1.702f))});
  r.onnx("Mul", 14, {x, r.onnx("Sigmoid", 13, {ax})}, r.out(0));
  return Status::OK();
}

// BiasAdd(X, bias, skip): X + bias + skip.
Status lower_bias_add(Rewrite& r) {
  for (size_t i = 0; i < 3; ++i)
    if (!r.in(i)) return r.missing_input(i);
  r.onnx("Add", 14, {r.onnx("Add", 14, {r.in(0), r.in(1)}), r.in(2)}, r.out(0));
  return Status::OK();
}

// BiasSplitGelu(X, bias): X + bias split in two halves along the last axis; left * Gelu(right).
Status lower_bias_split_gelu(Rewrite& r) {
  if (!r.in(0) || !r.in(1)) return r.missing_input(r.in(0) ? 1 : 0);
  Value* sum = r.onnx("Add", 14, {r.in(0), r.in(1)});
  Value* left = r.temp(sum);
  Value* right = r.temp(sum);
  r.emit("", "Split", 13, {sum}, {left, right}, {{"axis", attr_int(-1)}});
  r.onnx("Mul", 14, {left, gelu(r, right, false, nullptr)}, r.out(0));
  return Status::OK();
}

// FusedMatMul's view of one operand x (static rank >= 2): transBatch first moves axis 0 (where
// ONNX Runtime keeps the matrix rows of a [M, batch..., K] operand) behind the batch axes, then
// trans swaps the last two axes; one Transpose does both.
Value* fused_matmul_operand(Rewrite& r, Value* x, int rank, bool trans_batch, bool trans) {
  std::vector<int64_t> perm(rank);
  for (int i = 0; i < rank; ++i) perm[i] = i;
  if (trans_batch) std::rotate(perm.begin(), perm.begin() + 1, perm.end() - 1);
  if (trans) std::swap(perm[rank - 1], perm[rank - 2]);
  return r.onnx("Transpose", 13, {x}, nullptr, {{"perm", attr_ints(perm)}});
}

// FusedMatMul(A, B; alpha, transA, transB, transBatchA, transBatchB): alpha * op(A) @ op(B).
Status lower_fused_matmul(Rewrite& r) {
  Value* a = r.in(0);
  Value* b = r.in(1);
  if (!a || !b) return r.missing_input(a ? 1 : 0);
  for (auto [v, side] : {std::pair<Value**, const char*>{&a, "A"}, {&b, "B"}}) {
    const bool trans = r.attr_i((std::string("trans") + side).c_str(), 0) != 0;
    const bool trans_batch = r.attr_i((std::string("transBatch") + side).c_str(), 0) != 0;
    if (!trans && !trans_batch) continue;
    const int rk = Rewrite::rank(*v);
    if (rk < 2)
      return r.unsupported(std::string(trans ? "trans" : "transBatch") + side +
                           " on an input without a static rank of 2 or more");
    if (trans || rk > 2) *v = fused_matmul_operand(r, *v, rk, trans_batch, trans);
  }
  float alpha = r.attr_f("alpha", 1.0f);
  if (alpha == 1.0f) {
    r.onnx("MatMul", 13, {a, b}, r.out(0));
  } else {
    r.onnx("Mul", 14, {r.onnx("MatMul", 13, {a, b}), r.scalar_like(a, alpha)}, r.out(0));
  }
  return Status::OK();
}

// LayerNormalization(X, Scale, B?; axis, epsilon, stash_type) -> Y, Mean?, InvStdDev?: ONNX
// Runtime's opset-1 form is ONNX's opset-17 operator, so the node moves to opset 17.
Status lower_layer_norm(Rewrite& r) {
  if (!r.in(0) || !r.in(1)) return r.missing_input(r.in(0) ? 1 : 0);
  AttributeMap attrs{{"axis", attr_int(r.attr_i("axis", -1))}, {"epsilon", attr_float(r.attr_f("epsilon", 1e-5f))}};
  r.emit("", "LayerNormalization", 17, {r.in(0), r.in(1), r.in(2)}, {r.out(0), r.out(1), r.out(2)}, std::move(attrs));
  return Status::OK();
}

// The axes from `axis` to the last one of x, as ReduceMean wants them (negative when x's rank is
// unknown). The attribute comes from the file: it is checked against the rank before it sizes
// anything (found by fuzz/onnx_import: axis = -2^62 on an unranked input).
Result<std::vector<int64_t>> trailing_axes(Rewrite& r, int64_t axis, const Value* x) {
  constexpr int64_t kMaxAxes = 64;  // for an input of unknown rank
  const int rank = Rewrite::rank(x);
  if (rank >= 0 && (axis < -rank || axis >= rank))
    return make_error(ErrorCode::ATTRIBUTE_INVALID, "node '", r.node().name, "' (", r.node().qualified_op(), "): axis ",
                      axis, " is outside [", -rank, ", ", rank, ") for its rank-", rank, " input");
  if (rank < 0 && axis >= 0) return r.unsupported("a non-negative axis on an input without a static rank");
  if (rank < 0 && axis < -kMaxAxes) return r.unsupported("an axis below -64 on an input without a static rank");
  std::vector<int64_t> axes;
  for (int64_t a = axis; a < (axis < 0 ? 0 : rank); ++a) axes.push_back(a);
  return axes;
}

// RMS normalization of x over the axes from `axis` on: x * InvRms * scale,
// InvRms = 1 / sqrt(mean(x^2) + eps).
Status rms_norm(Rewrite& r, Value* x, Value* scale, int64_t axis, float epsilon, Value* y, Value* inv_rms) {
  GBX_ASSIGN_OR_RETURN(std::vector<int64_t> axes, trailing_axes(r, axis, x));
  Value* ms = r.onnx("ReduceMean", 13, {r.onnx("Mul", 14, {x, x})}, nullptr,
                     {{"axes", attr_ints(axes)}, {"keepdims", attr_int(1)}});
  Value* inv =
      r.onnx("Reciprocal", 13, {r.onnx("Sqrt", 13, {r.onnx("Add", 14, {ms, r.scalar_like(x, epsilon)})})}, inv_rms);
  r.onnx("Mul", 14, {r.onnx("Mul", 14, {x, inv}), scale}, y);
  return Status::OK();
}

// SimplifiedLayerNormalization(X, scale; axis, epsilon) -> Y, inv_std_var?: RMSNorm.
Status lower_simplified_layer_norm(Rewrite& r) {
  if (!r.in(0) || !r.in(1)) return r.missing_input(r.in(0) ? 1 : 0);
  return rms_norm(r, r.in(0), r.in(1), r.attr_i("axis", -1), r.attr_f("epsilon", 1e-5f), r.out(0), r.out(1));
}

// SkipLayerNormalization(input, skip, gamma, beta?, bias?; epsilon) -> output, mean?,
// inv_std_var?, input_skip_bias_sum?: LayerNormalization over the last axis of
// input + skip (+ bias). The Add + LayerNormalization pair is what the skip-layer-norm
// fusion turns into com.gearbox.SkipLayerNormalization.
Status lower_skip_layer_norm(Rewrite& r) {
  for (size_t i = 0; i < 3; ++i)
    if (!r.in(i)) return r.missing_input(i);
  Value* sum = r.in(4) ? r.onnx("Add", 14, {r.onnx("Add", 14, {r.in(0), r.in(1)}), r.in(4)}, r.out(3))
                       : r.onnx("Add", 14, {r.in(0), r.in(1)}, r.out(3));
  AttributeMap attrs{{"axis", attr_int(-1)}, {"epsilon", attr_float(r.attr_f("epsilon", 1e-12f))}};
  r.emit("", "LayerNormalization", 17, {sum, r.in(2), r.in(3)}, {r.out(0), r.out(1), r.out(2)}, std::move(attrs));
  return Status::OK();
}

// SkipSimplifiedLayerNormalization(input, skip, gamma, bias?; epsilon) -> output, mean (never
// computed by ONNX Runtime), inv_std_var?, input_skip_bias_sum?: RMSNorm of input + skip (+ bias).
Status lower_skip_simplified_layer_norm(Rewrite& r) {
  for (size_t i = 0; i < 3; ++i)
    if (!r.in(i)) return r.missing_input(i);
  if (r.out(1)) return r.unsupported("the mean output (ONNX Runtime does not compute it either)");
  Value* sum = r.in(3) ? r.onnx("Add", 14, {r.onnx("Add", 14, {r.in(0), r.in(1)}), r.in(3)}, r.out(3))
                       : r.onnx("Add", 14, {r.in(0), r.in(1)}, r.out(3));
  return rms_norm(r, sum, r.in(2), -1, r.attr_f("epsilon", 1e-12f), r.out(0), r.out(2));
}

// The 4-bit values packed two to a byte in x (uint8 [..., n]; the first in the low nibble) as
// uint8 [d0, d1, 2n] when x is [d0, d1, n], or [d0, 2n] when x is 2-D.
Value* unpack_nibbles(Rewrite& r, Value* x, bool three_d) {
  Value* mask = passes::add_constant(r.graph(), r.node().name + "/const", Tensor::scalar<uint8_t>(0x0F));
  Value* four = passes::add_constant(r.graph(), r.node().name + "/const", Tensor::scalar<uint8_t>(4));
  Value* lo = r.onnx("BitwiseAnd", 18, {x, mask});
  Value* hi = r.onnx("BitShift", 11, {x, four}, nullptr, {{"direction", attr_string("RIGHT")}});
  Value* axis = r.ints({-1});
  Value* pairs = r.onnx("Concat", 13, {r.onnx("Unsqueeze", 13, {lo, axis}), r.onnx("Unsqueeze", 13, {hi, axis})},
                        nullptr, {{"axis", attr_int(-1)}});
  return r.onnx("Reshape", 14, {pairs, r.ints(three_d ? std::vector<int64_t>{0, 0, -1} : std::vector<int64_t>{0, -1})});
}

// MatMulNBits(A, B, scales, zero_points?, g_idx?, bias?; K, N, bits = 4, block_size): A @ W + bias
// with W [K, N] the blockwise dequantization of B (uint8 [N, blocks, block_size / 2]):
// (q - zero_point) * scale per block, zero_point 8 when absent, uint8 zero points packed like B,
// float ones as given. The dequantization is ordinary ops on constants, which constant folding
// turns into an fp32 weight at compile time (up to its size limit), so the MatMul runs on
// cpu.dnnl's fp32 kernel: 8x the memory of the 4-bit weight, the speed of an fp32 model.
Status lower_matmul_nbits(Rewrite& r) {
  for (size_t i = 0; i < 3; ++i)
    if (!r.in(i)) return r.missing_input(i);
  if (r.attr_i("bits", 4) != 4) return r.unsupported("bits other than 4");
  if (r.in(4)) return r.unsupported("g_idx (act-order group indices)");
  const int64_t k = r.attr_i("K", 0), n = r.attr_i("N", 0), block = r.attr_i("block_size", 0);
  if (k <= 0 || n <= 0 || block < 2 || block % 2)
    return make_error(ErrorCode::ATTRIBUTE_INVALID, "node '", r.node().name, "' (", r.node().qualified_op(),
                      "): K, N and block_size must be positive and block_size even (K=", k, ", N=", n,
                      ", block_size=", block, ")");
  if (r.in(2)->type.dtype != DType::F32) return r.unsupported("scales that are not float32");
  const int64_t blocks = (k + block - 1) / block;
  Value* q = r.onnx("Cast", 13, {unpack_nibbles(r, r.in(1), true)}, nullptr,
                    {{"to", attr_int(static_cast<int64_t>(DType::F32))}});
  q->type.dtype = DType::F32;
  Value* zp = nullptr;
  if (!r.in(3)) {
    zp = r.scalar_like(q, 8.0f);
  } else if (r.in(3)->type.dtype == DType::U8) {
    Value* packed = r.onnx("Reshape", 14, {r.in(3), r.ints({n, -1})});
    Value* all = unpack_nibbles(r, packed, false);
    Value* zp_u8 = r.onnx("Slice", 13, {all, r.ints({0}), r.ints({blocks}), r.ints({1})});
    zp = r.onnx("Reshape", 14,
                {r.onnx("Cast", 13, {zp_u8}, nullptr, {{"to", attr_int(static_cast<int64_t>(DType::F32))}}),
                 r.ints({n, blocks, 1})});
  } else {
    zp = r.onnx("Reshape", 14, {r.in(3), r.ints({n, blocks, 1})});
  }
  Value* scale = r.onnx("Reshape", 14, {r.in(2), r.ints({n, blocks, 1})});
  Value* w = r.onnx("Reshape", 14, {r.onnx("Mul", 14, {r.onnx("Sub", 14, {q, zp}), scale}), r.ints({n, -1})});
  w = r.onnx("Slice", 13, {w, r.ints({0}), r.ints({k}), r.ints({1})});
  w = r.onnx("Transpose", 13, {w}, nullptr, {{"perm", attr_ints({1, 0})}});
  add_optional(r, r.onnx("MatMul", 13, {r.in(0), w}), r.in(5), r.out(0));
  return Status::OK();
}

// (MatMulInteger result) as float * scale [+ bias] -> out.
void scale_integer_product(Rewrite& r, Value* product, Value* scale, Value* bias, Value* out) {
  Value* f = r.onnx("Cast", 13, {product}, nullptr, {{"to", attr_int(static_cast<int64_t>(DType::F32))}});
  f->type.dtype = DType::F32;
  if (bias) {
    r.onnx("Add", 14, {r.onnx("Mul", 14, {f, scale}), bias}, out);
  } else {
    r.onnx("Mul", 14, {f, scale}, out);
  }
}

// MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zero_point?, b_zero_point?, bias?):
// (A - a_zp) @ (B - b_zp) * a_scale * b_scale + bias, the product in int32.
Status lower_matmul_integer_to_float(Rewrite& r) {
  for (size_t i = 0; i < 4; ++i)
    if (!r.in(i)) return r.missing_input(i);
  Value* product = r.onnx("MatMulInteger", 10, {r.in(0), r.in(1), r.in(4), r.in(5)});
  product->type.dtype = DType::I32;
  scale_integer_product(r, product, r.onnx("Mul", 14, {r.in(2), r.in(3)}), r.in(6), r.out(0));
  return Status::OK();
}

// DynamicQuantizeMatMul(A, B, b_scale, b_zero_point?, bias?): A quantized to uint8 as
// DynamicQuantizeLinear does, then MatMulIntegerToFloat.
Status lower_dynamic_quantize_matmul(Rewrite& r) {
  for (size_t i = 0; i < 3; ++i)
    if (!r.in(i)) return r.missing_input(i);
  Value* aq = r.temp(nullptr);
  aq->type.dtype = DType::U8;
  Value* a_scale = r.temp(r.in(0));
  Value* a_zp = r.temp(nullptr);
  a_zp->type.dtype = DType::U8;
  r.emit("", "DynamicQuantizeLinear", 11, {r.in(0)}, {aq, a_scale, a_zp});
  Value* product = r.onnx("MatMulInteger", 10, {aq, r.in(1), a_zp, r.in(3)});
  product->type.dtype = DType::I32;
  scale_integer_product(r, product, r.onnx("Mul", 14, {a_scale, r.in(2)}), r.in(4), r.out(0));
  return Status::OK();
}

Value* dequantize(Rewrite& r, Value* x, Value* scale, Value* zp) {
  Value* y = r.onnx("DequantizeLinear", 13, zp ? std::vector<Value*>{x, scale, zp} : std::vector<Value*>{x, scale});
  y->type.dtype = DType::F32;
  return y;
}

Value* quantize(Rewrite& r, Value* x, Value* scale, Value* zp, Value* out) {
  return r.onnx("QuantizeLinear", 13, zp ? std::vector<Value*>{x, scale, zp} : std::vector<Value*>{x, scale}, out);
}

// QLinearAdd / QLinearMul(A, A_scale, A_zp?, B, B_scale, B_zp?, C_scale, C_zp?): the float op
// between the dequantized inputs, quantized to C's scale and zero point.
Status lower_qlinear_binary(Rewrite& r, const char* op) {
  for (size_t i : {0, 1, 3, 4, 6})
    if (!r.in(i)) return r.missing_input(i);
  Value* a = dequantize(r, r.in(0), r.in(1), r.in(2));
  Value* b = dequantize(r, r.in(3), r.in(4), r.in(5));
  quantize(r, r.onnx(op, 14, {a, b}), r.in(6), r.in(7), r.out(0));
  return Status::OK();
}

// QLinearSigmoid / QLinearLeakyRelu(X, X_scale, X_zp?, Y_scale, Y_zp?).
Status lower_qlinear_unary(Rewrite& r, const char* op) {
  for (size_t i : {0, 1, 3})
    if (!r.in(i)) return r.missing_input(i);
  Value* x = dequantize(r, r.in(0), r.in(1), r.in(2));
  AttributeMap attrs;
  if (std::string(op) == "LeakyRelu") attrs["alpha"] = attr_float(r.attr_f("alpha", 0.01f));
  quantize(r, r.onnx(op, op == std::string("Sigmoid") ? 13 : 16, {x}, nullptr, std::move(attrs)), r.in(3), r.in(4),
           r.out(0));
  return Status::OK();
}

// QLinearGlobalAveragePool(X, x_scale, x_zp?, y_scale, y_zp?; channels_last).
Status lower_qlinear_global_average_pool(Rewrite& r) {
  for (size_t i : {0, 1, 3})
    if (!r.in(i)) return r.missing_input(i);
  Value* x = dequantize(r, r.in(0), r.in(1), r.in(2));
  if (r.attr_i("channels_last", 0)) {
    int rk = Rewrite::rank(r.in(0));
    if (rk < 3) return r.unsupported("channels_last on an input without a static rank of 3 or more");
    std::vector<int64_t> to_first{0, rk - 1}, to_last{0};
    for (int i = 1; i < rk - 1; ++i) to_first.push_back(i);
    for (int i = 2; i < rk; ++i) to_last.push_back(i);
    to_last.push_back(1);
    Value* pooled =
        r.onnx("GlobalAveragePool", 1, {r.onnx("Transpose", 13, {x}, nullptr, {{"perm", attr_ints(to_first)}})});
    x = r.onnx("Transpose", 13, {pooled}, nullptr, {{"perm", attr_ints(to_last)}});
  } else {
    x = r.onnx("GlobalAveragePool", 1, {x});
  }
  quantize(r, x, r.in(3), r.in(4), r.out(0));
  return Status::OK();
}

// x [B, S, H*D] -> [B, H, S, D] (or [B, H, D, S] with keys_last: a key ready for Q @ K).
Value* split_heads(Rewrite& r, Value* x, int64_t heads, bool keys_last) {
  Value* x4 = r.onnx("Reshape", 14, {x, r.ints({0, 0, heads, -1})});
  return r.onnx("Transpose", 13, {x4}, nullptr,
                {{"perm", attr_ints(keys_last ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3})}});
}

// What ONNX Runtime's attention ops share once Q, K and V are [B, S, H*D] projections:
//   Softmax(Q K^T * scale + mask + attention_bias [+ causal mask]) V, heads merged back.
// key_mask is a 2-D [B, L] mask (0 masks a key) or null; masked logits get mask_filter_value.
struct AttentionParts {
  Value *q = nullptr, *k = nullptr, *v = nullptr, *key_mask = nullptr, *attention_bias = nullptr;
  int64_t heads = 0;
  int64_t head_size = 0;  // for the default scale
  bool causal = false;
};

Status attention_core(Rewrite& r, const AttentionParts& p, Value* out) {
  if (p.heads <= 0) return r.unsupported("num_heads missing or not positive");
  float scale = r.attr_f("scale", 0.0f);
  if (scale == 0.0f) {
    if (p.head_size <= 0) return r.unsupported("the default scale on inputs without a static hidden size");
    scale = 1.0f / std::sqrt(static_cast<float>(p.head_size));
  }
  const float filter = r.attr_f("mask_filter_value", -10000.0f);
  Value* q = split_heads(r, p.q, p.heads, false);
  Value* k = split_heads(r, p.k, p.heads, true);
  Value* v = split_heads(r, p.v, p.heads, false);
  Value* logits = r.onnx("Mul", 14, {r.onnx("MatMul", 13, {q, k}), r.scalar_like(p.q, scale)});
  if (p.key_mask) {
    if (Rewrite::rank(p.key_mask) != 2)
      return r.unsupported("a mask that is not a 2-D [batch, key length] mask (or of unknown rank)");
    Value* zero = passes::add_constant(r.graph(), r.node().name + "/const", Tensor::scalar<int32_t>(0));
    if (p.key_mask->type.dtype != DType::I32)
      zero = r.onnx("Cast", 13, {zero}, nullptr, {{"to", attr_int(static_cast<int64_t>(p.key_mask->type.dtype))}});
    Value* keep = r.onnx("Greater", 13, {p.key_mask, zero});
    keep->type.dtype = DType::Bool;
    Value* bias = r.onnx("Where", 16, {keep, r.scalar_like(p.q, 0.0f), r.scalar_like(p.q, filter)});
    bias->type.dtype = p.q->type.dtype;
    logits = r.onnx("Add", 14, {logits, r.onnx("Unsqueeze", 13, {bias, r.ints({1, 2})})});
  }
  if (p.attention_bias) logits = r.onnx("Add", 14, {logits, p.attention_bias});
  if (p.causal) {
    // A [S, L] lower triangle of the logits' last two dims: key j > query i is masked.
    Value* shape = r.onnx("Shape", 15, {logits}, nullptr, {{"start", attr_int(-2)}});
    shape->type.dtype = DType::I64;
    Value* ones = r.emit("", "ConstantOfShape", 9, {shape}, {nullptr}, {{"value", [] {
                                                                           Attribute a;
                                                                           a.type = AttrType::Tensor;
                                                                           a.t = Tensor::from_vector<float>({1.0f});
                                                                           return a;
                                                                         }()}});
    ones->type.dtype = DType::F32;
    Value* lower = r.onnx("Trilu", 14, {ones}, nullptr, {{"upper", attr_int(0)}});
    Value* keep = r.onnx("Cast", 13, {lower}, nullptr, {{"to", attr_int(static_cast<int64_t>(DType::Bool))}});
    keep->type.dtype = DType::Bool;
    Value* bias = r.onnx("Where", 16, {keep, r.scalar_like(p.q, 0.0f), r.scalar_like(p.q, filter)});
    bias->type.dtype = p.q->type.dtype;
    logits = r.onnx("Add", 14, {logits, bias});
  }
  Value* probs = r.onnx("Softmax", 13, {logits}, nullptr, {{"axis", attr_int(-1)}});
  Value* o = r.onnx("Transpose", 13, {r.onnx("MatMul", 13, {probs, v})}, nullptr, {{"perm", attr_ints({0, 2, 1, 3})}});
  r.onnx("Reshape", 14, {o, r.ints({0, 0, -1})}, out);
  return Status::OK();
}

// The static size of x's last axis, or -1.
int64_t last_dim(const Value* x) {
  if (Rewrite::rank(x) < 1) return -1;
  const Dim& d = x->type.shape.dims.back();
  return d.known() ? d.value : -1;
}

// Attention(input, weights, bias?, mask_index?, past?, attention_bias?; num_heads,
// qkv_hidden_sizes?, unidirectional, scale, mask_filter_value): Q, K, V = input @ weights
// (+ bias), split along the last axis; then attention_core. No past/present, rotary or
// mask_index other than a 2-D [batch, total length] mask.
Status lower_attention(Rewrite& r) {
  if (!r.in(0) || !r.in(1)) return r.missing_input(r.in(0) ? 1 : 0);
  if (r.in(4) || r.out(1) || r.in(6)) return r.unsupported("past / present key-value state");
  if (r.attr_i("do_rotary", 0)) return r.unsupported("do_rotary");
  AttentionParts p;
  p.heads = r.attr_i("num_heads", 0);
  p.causal = r.attr_i("unidirectional", 0) != 0;
  p.key_mask = r.in(3);
  p.attention_bias = r.in(5);
  Value* qkv = add_optional(r, r.onnx("MatMul", 13, {r.in(0), r.in(1)}), r.in(2));
  std::vector<int64_t> sizes = passes::attr_ints(r.node(), "qkv_hidden_sizes");
  if (sizes.empty()) {
    int64_t total = last_dim(r.in(1));
    if (total > 0 && total % 3 == 0) sizes = {total / 3, total / 3, total / 3};
  }
  if (sizes.size() != 3) return r.unsupported("weights without a static size and no qkv_hidden_sizes");
  if (p.heads > 0) p.head_size = sizes[0] / p.heads;
  p.q = r.temp(qkv);
  p.k = r.temp(qkv);
  p.v = r.temp(qkv);
  r.emit("", "Split", 13, {qkv, r.ints(sizes)}, {p.q, p.k, p.v}, {{"axis", attr_int(-1)}});
  return attention_core(r, p, r.out(0));
}

// MultiHeadAttention(query, key, value, bias?, key_padding_mask?, attention_bias?, past_key?,
// past_value?; num_heads, scale, unidirectional, mask_filter_value) with 3-D query, key and value
// ([B, S, H*D]; key and value of static rank); bias is the three projections' biases
// concatenated. Packed QKV/KV forms, [B, H, L, D] keys and key-value caches have no rewrite here.
Status lower_multi_head_attention(Rewrite& r) {
  for (size_t i = 0; i < 3; ++i)
    if (!r.in(i)) return r.unsupported("packed query/key/value (a missing key or value input)");
  if (r.in(6) || r.in(7) || r.out(1) || r.out(2) || r.out(3)) return r.unsupported("past / present key-value state");
  // With key and value given, the query is [B, S, H*D] (its packed form comes without them);
  // key and value may also be [B, H, L, D], which only their rank tells apart.
  if (Rewrite::rank(r.in(0)) > 0 && Rewrite::rank(r.in(0)) != 3) return r.unsupported("a query not of rank 3");
  for (size_t i = 1; i < 3; ++i)
    if (Rewrite::rank(r.in(i)) != 3) return r.unsupported("key or value not of static rank 3");
  AttentionParts p;
  p.heads = r.attr_i("num_heads", 0);
  p.causal = r.attr_i("unidirectional", 0) != 0;
  p.key_mask = r.in(4);
  p.attention_bias = r.in(5);
  // Q and K have one head size (Q K^T), so a query of unknown width is as wide as the key.
  int64_t hidden = last_dim(r.in(0)) > 0 ? last_dim(r.in(0)) : last_dim(r.in(1));
  if (p.heads > 0 && hidden > 0) p.head_size = hidden / p.heads;
  p.q = r.in(0);
  p.k = r.in(1);
  p.v = r.in(2);
  if (r.in(3)) {
    int64_t kh = last_dim(r.in(1)), vh = last_dim(r.in(2));
    if (hidden <= 0 || kh <= 0 || vh <= 0) return r.unsupported("bias on inputs without static hidden sizes");
    Value *bq = r.temp(r.in(3)), *bk = r.temp(r.in(3)), *bv = r.temp(r.in(3));
    r.emit("", "Split", 13, {r.in(3), r.ints({hidden, kh, vh})}, {bq, bk, bv}, {{"axis", attr_int(0)}});
    p.q = r.onnx("Add", 14, {p.q, bq});
    p.k = r.onnx("Add", 14, {p.k, bk});
    p.v = r.onnx("Add", 14, {p.v, bv});
  }
  return attention_core(r, p, r.out(0));
}

using Lowering = std::function<Status(Rewrite&)>;

// The com.microsoft ops. SimplifiedLayerNormalization is also found in the ONNX domain, where
// ONNX Runtime registers it (and LayerNormalization, below opset 17) at opset 1.
const std::unordered_map<std::string, Lowering>& microsoft_ops() {
  static const std::unordered_map<std::string, Lowering> ops{
      {"Gelu", lower_gelu},
      {"FastGelu", lower_fast_gelu},
      {"BiasGelu", lower_bias_gelu},
      {"QuickGelu", lower_quick_gelu},
      {"BiasAdd", lower_bias_add},
      {"BiasSplitGelu", lower_bias_split_gelu},
      {"FusedMatMul", lower_fused_matmul},
      {"SimplifiedLayerNormalization", lower_simplified_layer_norm},
      {"SkipLayerNormalization", lower_skip_layer_norm},
      {"SkipSimplifiedLayerNormalization", lower_skip_simplified_layer_norm},
      {"MatMulIntegerToFloat", lower_matmul_integer_to_float},
      {"DynamicQuantizeMatMul", lower_dynamic_quantize_matmul},
      {"MatMulNBits", lower_matmul_nbits},
      {"Attention", lower_attention},
      {"MultiHeadAttention", lower_multi_head_attention},
      {"QLinearAdd", [](Rewrite& r) { return lower_qlinear_binary(r, "Add"); }},
      {"QLinearMul", [](Rewrite& r) { return lower_qlinear_binary(r, "Mul"); }},
      {"QLinearSigmoid", [](Rewrite& r) { return lower_qlinear_unary(r, "Sigmoid"); }},
      {"QLinearLeakyRelu", [](Rewrite& r) { return lower_qlinear_unary(r, "LeakyRelu"); }},
      {"QLinearGlobalAveragePool", lower_qlinear_global_average_pool},
  };
  return ops;
}

}  // namespace

std::vector<std::string> contrib_rewritten_ops() {
  std::vector<std::string> ops;
  for (const auto& [name, fn] : microsoft_ops()) ops.push_back(std::string(kMicrosoft) + "." + name);
  std::sort(ops.begin(), ops.end());
  ops.push_back("ai.onnx.LayerNormalization (opsets 1-16, ONNX Runtime's form)");
  ops.push_back("ai.onnx.SimplifiedLayerNormalization (ONNX Runtime's)");
  ops.push_back("ai.onnx.Gelu (opsets 20-21)");
  return ops;
}

namespace {

const Lowering* lowering_for(const Node& n) {
  if (n.domain == kMicrosoft) {
    auto it = microsoft_ops().find(n.op_type);
    return it == microsoft_ops().end() ? nullptr : &it->second;
  }
  if (!n.domain.empty()) return nullptr;
  static const Lowering layer_norm = lower_layer_norm;
  if (n.op_type == "LayerNormalization" && n.opset < 17) return &layer_norm;
  static const Lowering onnx_gelu = lower_onnx_gelu;
  if (n.op_type == "Gelu" && n.opset >= 20) return &onnx_gelu;
  if (n.op_type == "SimplifiedLayerNormalization") return &microsoft_ops().at(n.op_type);
  return nullptr;
}

}  // namespace

Result<int> lower_contrib_ops(Graph& g) {
  int rewritten = 0;
  std::vector<Node*> order;
  for (auto& n : g.nodes) order.push_back(n.get());
  std::unordered_set<const Node*> done;
  for (Node* n : order) {
    for (auto& [name, a] : n->attrs) {
      if (a.g) {
        GBX_ASSIGN_OR_RETURN(int k, lower_contrib_ops(*a.g));
        rewritten += k;
      }
      for (auto& sg : a.graphs) {
        GBX_ASSIGN_OR_RETURN(int k, lower_contrib_ops(*sg));
        rewritten += k;
      }
    }
    const Lowering* lower = lowering_for(*n);
    if (!lower) continue;
    Rewrite r(g, *n);
    GBX_RETURN_IF_ERROR((*lower)(r));
    done.insert(n);
    ++rewritten;
  }
  passes::erase_nodes(g, done);
  return rewritten;
}

}  // namespace gearbox
