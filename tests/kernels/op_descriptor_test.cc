// The op descriptor table (kernels/op_descriptor.h): every registered op has an entry, the
// Attention cost is the hand-derived count, and the one activation parser and apply set
// agree with the unfused cpu.ref kernels.
#include "kernels/op_descriptor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "runtime/control_flow.h"
#include "runtime/op_cost.h"

namespace gearbox {
namespace {

using testing::attr_float;
using testing::attr_string;
using testing::KernelCall;
using testing::make_call;
using testing::run_kernel;

TEST(OpDescriptor, EveryRegisteredOpHasADescriptor) {
  register_control_flow_kernels();
  std::set<std::string> missing;
  size_t ops = 0;
  for (const KernelDef& def : KernelRegistry::global().all()) {
    ++ops;
    if (!find_op_descriptor(def.domain, def.op_type))
      missing.insert((def.domain.empty() ? "" : std::string(def.domain) + ".") + std::string(def.op_type));
  }
  ASSERT_GT(ops, 100u);  // the registry was really walked
  std::string list;
  for (const std::string& m : missing) list += " " + m;
  EXPECT_TRUE(missing.empty()) << "registered ops without an entry in src/kernels/op_descriptor.cc:" << list;
}

TEST(OpDescriptor, TableHasNoDuplicatesAndEveryEntryHasACost) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const OpDescriptor& d : all_op_descriptors()) {
    EXPECT_TRUE(seen.insert({std::string(d.domain), std::string(d.op_type)}).second) << d.op_type;
    EXPECT_NE(d.flops, nullptr) << d.op_type;
    EXPECT_EQ(find_op_descriptor(d.domain, d.op_type), &d) << d.op_type;
  }
}

TEST(OpDescriptor, UnknownOpGetsANeutralDescriptor) {
  EXPECT_EQ(find_op_descriptor("", "NoSuchOp"), nullptr);
  const OpDescriptor& d = op_descriptor("my.plugin", "Custom");
  EXPECT_EQ(d.kind, OpKind::Other);
  EXPECT_TRUE(d.in_place.empty());
  EXPECT_EQ(d.transpose, TransposeRule::None);
  EXPECT_EQ(d.activation, ActivationKind::None);
}

Status fake_gradient(GradientContext&) { return Status::OK(); }

TEST(OpDescriptor, GradientSlotIsFilledByRegisterGradient) {
  const OpDescriptor* tanh = find_op_descriptor("", "Tanh");
  ASSERT_NE(tanh, nullptr);
  EXPECT_EQ(tanh->gradient(), nullptr);
  ASSERT_TRUE(register_gradient("", "Tanh", fake_gradient).ok());
  EXPECT_EQ(tanh->gradient(), &fake_gradient);
  ASSERT_TRUE(register_gradient("", "Tanh", nullptr).ok());
  EXPECT_EQ(tanh->gradient(), nullptr);
  const Status st = register_gradient("", "NoSuchOp", fake_gradient);
  EXPECT_EQ(st.code(), ErrorCode::OP_UNSUPPORTED);
  EXPECT_NE(st.message().find("NoSuchOp"), std::string::npos) << st.message();
}

Tensor shape_of(std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); }

Tensor random_tensor(const Dims& dims, std::mt19937& rng) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (float& x : v) x = u(rng);
  return Tensor::from_vector<float>(v, dims);
}

// Runs com.gearbox.Attention (cpu.ref) on BERT-shaped inputs and returns the op's FLOPs as
// the profiler counts them (runtime op_cost over the kernel's real inputs and outputs).
double attention_flops(int64_t b, int64_t h, int64_t s, int64_t sk, int64_t d, int64_t dv, bool mask) {
  std::mt19937 rng(7);
  std::vector<Tensor> in = {random_tensor({b, s, h * d}, rng),
                            random_tensor({b, sk, h * d}, rng),
                            random_tensor({b, sk, h * dv}, rng),
                            Tensor::scalar<float>(std::sqrt(static_cast<float>(d))),
                            shape_of({b, s, h, d}),
                            shape_of({0, 0, h, -1}),
                            shape_of({b, sk, h, dv}),
                            shape_of({0, 0, -1})};
  if (mask) in.push_back(random_tensor({b, 1, 1, sk}, rng));
  AttributeMap attrs;
  const KernelDef* def = KernelRegistry::global().find(kGearboxDomain, "Attention", 1, kEngineRef, DType::F32);
  EXPECT_NE(def, nullptr);
  if (!def) return -1;
  std::vector<RuntimeValue> values(in.begin(), in.end());
  std::vector<const RuntimeValue*> ptrs;
  for (const RuntimeValue& v : values) ptrs.push_back(&v);
  std::vector<RuntimeValue> outs(1);
  KernelContext ctx(OpInfo{"attn", "Attention", kGearboxDomain, 1, &attrs}, ptrs, &outs, {true});
  const Status st = def->fn(ctx);
  EXPECT_TRUE(st.ok()) << st.to_string();
  if (!st.ok()) return -1;
  EXPECT_EQ(outs[0].tensor().dims(), (Dims{b, s, h * dv}));
  return op_cost(ctx, outs).flops;
}

TEST(OpDescriptor, AttentionCostCountsItsMatrixProductsAndSoftmax) {
  // Self attention, BERT-like: B 2, H 3, S 5, D 4. Q K^T and P V are each 2 B H S S D FLOPs;
  // the scale is one per score and the softmax five (max, subtract, exp, sum, divide).
  {
    const double B = 2, H = 3, S = 5, D = 4;
    const double scores = B * H * S * S;
    const double want = 2 * B * H * S * S * D * 2 + scores * 1 + scores * 5;
    EXPECT_DOUBLE_EQ(attention_flops(2, 3, 5, 5, 4, 4, false), want);
    // With a mask: one more per score.
    EXPECT_DOUBLE_EQ(attention_flops(2, 3, 5, 5, 4, 4, true), want + scores);
  }
  // Cross attention with Sk != S and Dv != D: 2 B H S Sk D + 2 B H S Sk Dv.
  {
    const double B = 1, H = 2, S = 3, SK = 7, D = 8, DV = 6;
    const double scores = B * H * S * SK;
    EXPECT_DOUBLE_EQ(attention_flops(1, 2, 3, 7, 8, 6, false), 2 * scores * D + 2 * scores * DV + 6 * scores);
  }
}

// ---- activations ----

TEST(ActivationKind, NamesRoundTripAndUnknownIsRejected) {
  for (ActivationKind k : {ActivationKind::None, ActivationKind::Relu, ActivationKind::LeakyRelu,
                           ActivationKind::Sigmoid, ActivationKind::Tanh, ActivationKind::HardSigmoid,
                           ActivationKind::HardSwish, ActivationKind::Clip, ActivationKind::Silu, ActivationKind::Gelu,
                           ActivationKind::GeluTanh}) {
    const auto back = parse_activation_name(activation_name(k));
    ASSERT_TRUE(back.has_value()) << activation_name(k);
    EXPECT_EQ(*back, k);
  }
  EXPECT_FALSE(parse_activation_name("relu").has_value());  // names are case-sensitive, as ONNX op types
  EXPECT_FALSE(parse_fused_activation("Swish", {}).has_value());
}

TEST(ActivationKind, DefaultsAreTheOnnxOnes) {
  // ONNX: LeakyRelu alpha 0.01; HardSigmoid alpha 0.2, beta 0.5; Clip unbounded.
  auto leaky = parse_fused_activation("LeakyRelu", {});
  ASSERT_TRUE(leaky);
  EXPECT_FLOAT_EQ(leaky->p0, 0.01f);
  auto hs = parse_fused_activation("HardSigmoid", {});
  ASSERT_TRUE(hs);
  EXPECT_FLOAT_EQ(hs->p0, 0.2f);
  EXPECT_FLOAT_EQ(hs->p1, 0.5f);
  const std::vector<float> bounds{-1.5f, 2.f};
  auto clip = parse_fused_activation("Clip", bounds);
  ASSERT_TRUE(clip);
  EXPECT_FLOAT_EQ(clip->p0, -1.5f);
  EXPECT_FLOAT_EQ(clip->p1, 2.f);
}

// apply_activation against the unfused cpu.ref kernel of the same op.
void expect_matches_ref(const std::string& domain, const std::string& op, int opset, AttributeMap attrs,
                        const FusedActivation& act) {
  std::mt19937 rng(3);
  std::vector<float> x(257);
  std::uniform_real_distribution<float> u(-6.f, 6.f);
  for (float& v : x) v = u(rng);
  KernelCall c = make_call(op, opset, {Tensor::from_vector<float>(x, {257})});
  c.domain = domain;
  c.attrs = std::move(attrs);
  auto out = run_kernel(c);
  ASSERT_TRUE(out.ok()) << op << ": " << out.status().to_string();
  const float* y = out.value()[0].data<float>();
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(apply_activation(act, static_cast<double>(x[i])), static_cast<double>(y[i]), 1e-5)
        << op << " at x = " << x[i];
}

TEST(ActivationKind, ApplyAgreesWithTheReferenceKernels) {
  using A = ActivationKind;
  expect_matches_ref("", "Relu", 14, {}, {A::Relu});
  expect_matches_ref("", "Sigmoid", 13, {}, {A::Sigmoid});
  expect_matches_ref("", "Tanh", 13, {}, {A::Tanh});
  expect_matches_ref("", "HardSwish", 14, {}, {A::HardSwish});
  expect_matches_ref("", "LeakyRelu", 16, {{"alpha", attr_float(0.3f)}}, {A::LeakyRelu, 0.3f});
  expect_matches_ref("", "HardSigmoid", 6, {{"alpha", attr_float(0.25f)}, {"beta", attr_float(0.4f)}},
                     {A::HardSigmoid, 0.25f, 0.4f});
  expect_matches_ref("", "Clip", 6, {{"min", attr_float(-1.f)}, {"max", attr_float(2.5f)}}, {A::Clip, -1.f, 2.5f});
  expect_matches_ref(std::string(kGearboxDomain), "Gelu", 1, {}, {A::Gelu});
  expect_matches_ref(std::string(kGearboxDomain), "Gelu", 1, {{"approximate", attr_string("tanh")}}, {A::GeluTanh});
}

TEST(ActivationKind, FusableActivationsInTheTable) {
  // The ops a fusion may absorb after a Conv/MatMul/Gemm, and nothing else.
  std::set<std::string> fusable;
  for (const OpDescriptor& d : all_op_descriptors())
    if (d.activation != ActivationKind::None) fusable.insert(std::string(d.op_type));
  EXPECT_EQ(fusable, (std::set<std::string>{"Clip", "Gelu", "HardSigmoid", "HardSwish", "LeakyRelu", "Relu", "Sigmoid",
                                            "Tanh"}));
}

}  // namespace
}  // namespace gearbox
