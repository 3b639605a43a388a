// cpu.dnnl Conv and FusedConv against the cpu.ref kernels: randomized 2-D cases (odd sizes,
// groups incl. depthwise, strides, dilations, asymmetric pads, every auto_pad), every fused
// activation with and without bias and residual, the weight cache (a repeated run does not
// reorder again), and configurations that fall back to the reference inside the kernel.
#include <random>
#include <string>
#include <vector>

#include "kernels/dnnl_test_util.h"
#include "kernels/kernel_options.h"

namespace gearbox {
namespace {

using testing::attr_float;
using testing::attr_int;
using testing::attr_ints;
using testing::attr_string;
using testing::dnnl_random;
using testing::DnnlPath;
using testing::expect_dnnl_matches_ref;
using testing::KernelCall;
using testing::make_call;

TEST(DnnlConv, RandomizedAgainstReference) {
  std::mt19937 g(20261130);
  auto pick = [&](std::vector<int64_t> v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(g)]; };
  const std::vector<std::string> auto_pads{"NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
  int ran = 0;
  for (int it = 0; it < 80; ++it) {
    const int64_t n = pick({1, 2});
    const bool depthwise = it % 4 == 3;
    const int64_t group = depthwise ? pick({3, 7, 17}) : pick({1, 1, 2, 3});
    const int64_t cg = depthwise ? 1 : pick({1, 2, 3, 5});
    const int64_t mg = depthwise ? 1 : pick({1, 2, 7});
    const int64_t h = pick({1, 3, 7, 17, 33}), w = pick({1, 3, 7, 17});
    const int64_t kh = pick({1, 3, 5}), kw = pick({1, 2, 3});
    KernelCall call =
        make_call("Conv", 11, {dnnl_random({n, group * cg, h, w}, g), dnnl_random({group * mg, cg, kh, kw}, g)});
    if (it % 2 == 0) call.inputs.push_back(dnnl_random({group * mg}, g));
    call.attrs["group"] = attr_int(group);
    call.attrs["strides"] = attr_ints({pick({1, 2, 3}), pick({1, 2})});
    call.attrs["dilations"] = attr_ints({pick({1, 2}), pick({1, 3})});
    const std::string ap = auto_pads[static_cast<size_t>(it) % auto_pads.size()];
    if (ap == "NOTSET") call.attrs["pads"] = attr_ints({pick({0, 1, 2}), pick({0, 1}), pick({0, 2}), pick({0, 1, 2})});
    else call.attrs["auto_pad"] = attr_string(ap);
    expect_dnnl_matches_ref(call, cg * kh * kw, "case " + std::to_string(it));
    ++ran;
  }
  EXPECT_EQ(ran, 80);
}

TEST(DnnlConv, LargerChannelsUseBlockedLayouts) {
  // Channel counts where oneDNN picks blocked layouts (so the src/dst reorders run).
  std::mt19937 g(7);
  for (int64_t c : {16, 33, 64}) {
    KernelCall call =
        make_call("Conv", 11, {dnnl_random({1, c, 17, 15}, g), dnnl_random({32, c, 3, 3}, g), dnnl_random({32}, g)});
    call.attrs["pads"] = attr_ints({1, 1, 1, 1});
    expect_dnnl_matches_ref(call, c * 9, "C=" + std::to_string(c));
  }
}

TEST(DnnlConv, FusedActivationsBiasAndResidual) {
  std::mt19937 g(11);
  struct Act {
    std::string name;
    std::vector<float> params;
  };
  const std::vector<Act> acts{{"", {}},
                              {"Relu", {}},
                              {"LeakyRelu", {0.1f}},
                              {"Sigmoid", {}},
                              {"Tanh", {}},
                              {"Clip", {0.f, 6.f}},
                              {"HardSigmoid", {0.25f, 0.4f}},
                              {"HardSwish", {}},
                              {"Silu", {}},
                              {"Gelu", {}},
                              {"GeluTanh", {}}};
  for (const Act& a : acts)
    for (int variant = 0; variant < 3; ++variant) {
      const bool bias = variant != 1, residual = variant != 0;
      const int64_t c = 24, m = 16;
      KernelCall call = make_call("FusedConv", 1, {dnnl_random({2, c, 9, 11}, g), dnnl_random({m, c, 3, 3}, g)});
      call.domain = "com.gearbox";
      call.inputs.push_back(bias ? dnnl_random({m}, g) : Tensor());
      if (residual) call.inputs.push_back(dnnl_random({2, m, 5, 6}, g));
      call.attrs["strides"] = attr_ints({2, 2});
      call.attrs["pads"] = attr_ints({1, 1, 1, 1});
      if (!a.name.empty()) {
        call.attrs["activation"] = attr_string(a.name);
        Attribute p;
        p.type = AttrType::Floats;
        p.floats = a.params;
        call.attrs["activation_params"] = p;
      }
      expect_dnnl_matches_ref(call, c * 9, a.name + " variant " + std::to_string(variant));
    }
}

TEST(DnnlConv, DepthwiseFusedClip) {
  // MobileNet's block: depthwise 3x3 stride 2 + bias + Clip(0, 6).
  std::mt19937 g(3);
  KernelCall call =
      make_call("FusedConv", 1, {dnnl_random({1, 32, 17, 17}, g), dnnl_random({32, 1, 3, 3}, g), dnnl_random({32}, g)});
  call.domain = "com.gearbox";
  call.attrs["group"] = attr_int(32);
  call.attrs["strides"] = attr_ints({2, 2});
  call.attrs["pads"] = attr_ints({1, 1, 1, 1});
  call.attrs["activation"] = attr_string("Clip");
  Attribute p;
  p.type = AttrType::Floats;
  p.floats = {0.f, 6.f};
  call.attrs["activation_params"] = p;
  expect_dnnl_matches_ref(call, 9, "depthwise");
}

TEST(DnnlConv, WeightsAreReorderedOncePerWeightTensor) {
  std::mt19937 g(5);
  const Tensor w = dnnl_random({64, 32, 3, 3}, g);
  KernelCall call = make_call("Conv", 11, {dnnl_random({1, 32, 14, 14}, g), w});
  call.engine = std::string(kEngineDnnl);
  call.constant_inputs = {false, true};  // the weight stands for an initializer
  const int64_t before = dnnl_engine::weight_reorder_count();
  ASSERT_TRUE(testing::run_kernel(call).ok());
  const int64_t after_first = dnnl_engine::weight_reorder_count();
  // oneDNN's AVX2/AVX-512 convolutions want blocked weights for 32 -> 64 channels, so the
  // first run reorders (this also shows the oneDNN path ran, not the reference fall-back).
  EXPECT_EQ(after_first, before + 1);
  for (int i = 0; i < 3; ++i) {
    call.inputs[0] = dnnl_random({1, 32, 14, 14}, g);  // new activations, same weights
    auto out = testing::run_kernel(call);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
  }
  EXPECT_EQ(dnnl_engine::weight_reorder_count(), after_first);
  expect_dnnl_matches_ref(call, 32 * 9, "cached weights");
  // Different weight values in a different tensor: reordered again, and the result follows them.
  call.inputs[1] = dnnl_random({64, 32, 3, 3}, g);
  expect_dnnl_matches_ref(call, 32 * 9, "new weights");
  EXPECT_EQ(dnnl_engine::weight_reorder_count(), after_first + 1);
}

// A weight computed at run time (not an initializer) differs every run: it is reordered each
// run and never cached, so the cache does not fill with dead weights.
TEST(DnnlConv, RunTimeWeightsAreNotCached) {
  std::mt19937 g(6);
  const size_t cached_before = dnnl_engine::weight_cache_size();
  const int64_t reorders_before = dnnl_engine::weight_reorder_count();
  for (int i = 0; i < 3; ++i) {
    KernelCall call = make_call("Conv", 11, {dnnl_random({1, 32, 14, 14}, g), dnnl_random({64, 32, 3, 3}, g)});
    expect_dnnl_matches_ref(call, 32 * 9, "run-time weight " + std::to_string(i));
  }
  EXPECT_EQ(dnnl_engine::weight_cache_size(), cached_before);
  EXPECT_EQ(dnnl_engine::weight_reorder_count(), reorders_before + 3);  // blocked layout: one reorder a run
}

// 3x3 stride-1 convolutions with >= 64 channels and outputs of >= 7x7 run as oneDNN's
// Winograd algorithm (conv.cc):
// NCHW, FusedConv with residual and activation, and channels-last, odd spatial sizes; checked
// against the reference and through winograd_conv_runs, so a silent switch back to the
// direct kernel cannot pass. Not eligible (stride 2, too few channels, 5x6) or turned off by
// SessionOptions::conv_winograd = 0: the direct kernel, same results.
TEST(DnnlConv, Winograd3x3AgainstReference) {
  std::mt19937 g(33);
  auto conv3x3 = [&](const char* op, Dims x, int64_t m, bool residual, const char* act) {
    const bool nhwc = std::string(op) == "NhwcConv";
    const int64_t c = nhwc ? x[3] : x[1];
    KernelCall call = make_call(op, op == std::string("Conv") ? 11 : 1,
                                {dnnl_random(x, g), dnnl_random({m, c, 3, 3}, g), dnnl_random({m}, g)});
    if (op != std::string("Conv")) call.domain = "com.gearbox";
    call.constant_inputs = {false, true, true};
    call.attrs["pads"] = attr_ints({1, 1, 1, 1});
    if (residual) call.inputs.push_back(dnnl_random(nhwc ? Dims{x[0], x[1], x[2], m} : Dims{x[0], m, x[2], x[3]}, g));
    if (act) call.attrs["activation"] = attr_string(act);
    return call;
  };
  const std::vector<KernelCall> eligible{
      conv3x3("Conv", {1, 64, 14, 15}, 64, false, nullptr),
      conv3x3("FusedConv", {2, 64, 16, 17}, 80, true, "Relu"),
      conv3x3("FusedConv", {1, 128, 28, 28}, 128, false, "Relu"),  // F(4x4,3x3) on this CPU
      conv3x3("NhwcConv", {2, 14, 20, 128}, 64, true, "Relu"),
      conv3x3("NhwcConv", {1, 15, 15, 96}, 96, false, nullptr),
      conv3x3("FusedConv", {1, 128, 7, 7}, 128, true, "Relu"),  // ResNet-50's layer4 shape, fewer channels
  };
  int64_t before = dnnl_engine::winograd_conv_runs();
  for (size_t i = 0; i < eligible.size(); ++i) {
    const int64_t k = eligible[i].op_type == "NhwcConv" ? eligible[i].inputs[0].dim(3) : eligible[i].inputs[0].dim(1);
    expect_dnnl_matches_ref(eligible[i], k * 9, "winograd case " + std::to_string(i));
  }
  // Where oneDNN has no Winograd (it needs AVX-512), the same cases ran the direct kernel.
  const int64_t wino = dnnl_engine::winograd_available() ? 1 : 0;
  EXPECT_EQ(dnnl_engine::winograd_conv_runs() - before, wino * static_cast<int64_t>(eligible.size()));

  KernelCall strided = conv3x3("Conv", {1, 64, 14, 14}, 64, false, nullptr);
  strided.attrs["strides"] = attr_ints({2, 2});
  before = dnnl_engine::winograd_conv_runs();
  expect_dnnl_matches_ref(strided, 64 * 9, "stride 2");
  expect_dnnl_matches_ref(conv3x3("Conv", {1, 32, 14, 14}, 64, false, nullptr), 32 * 9, "32 input channels");
  expect_dnnl_matches_ref(conv3x3("Conv", {1, 64, 5, 6}, 64, false, nullptr), 64 * 9, "5x6 output");
  {
    KernelOptions off;
    off.conv_winograd = false;
    KernelOptionsScope scope(&off);
    expect_dnnl_matches_ref(eligible[1], 64 * 9, "winograd off");
  }
  EXPECT_EQ(dnnl_engine::winograd_conv_runs(), before);
}

// A node of a plan keeps its primitive and reordered weights between runs (conv.cc
// ConvNodeState) and reuses them only while they fit: other X dims, other weights, a Z or
// none, or the Winograd switch flipped each make the kernel derive everything again.
TEST(DnnlConv, NodeCacheReusedOnlyWhileItFits) {
  std::mt19937 g(71);
  NodeCache cache;
  auto nhwc_call = [&](Dims x, const Tensor& w, const Tensor& b, bool residual) {
    KernelCall call = make_call("NhwcConv", 1, {dnnl_random(x, g), w, b});
    call.domain = "com.gearbox";
    call.constant_inputs = {false, true, true};
    call.attrs["pads"] = attr_ints({1, 1, 1, 1});
    call.attrs["activation"] = attr_string("Relu");
    if (residual) call.inputs.push_back(dnnl_random({x[0], x[1], x[2], w.dim(0)}, g));
    call.node_cache = &cache;
    return call;
  };
  const Tensor w1 = dnnl_random({48, 32, 3, 3}, g), w2 = dnnl_random({48, 32, 3, 3}, g), b = dnnl_random({48}, g);
  const KernelCall first = nhwc_call({1, 8, 8, 32}, w1, b, true);
  int64_t reuses = dnnl_engine::conv_state_reuses();
  expect_dnnl_matches_ref(first, 32 * 9, "first run");  // stores the state
  EXPECT_EQ(dnnl_engine::conv_state_reuses(), reuses);
  expect_dnnl_matches_ref(first, 32 * 9, "same inputs again");
  EXPECT_EQ(dnnl_engine::conv_state_reuses(), reuses + 1) << "the state was not reused";

  // Each change below must miss (the reuse count stays) and still match the reference.
  reuses = dnnl_engine::conv_state_reuses();
  expect_dnnl_matches_ref(nhwc_call({1, 10, 9, 32}, w1, b, true), 32 * 9, "other X dims");
  expect_dnnl_matches_ref(nhwc_call({1, 10, 9, 32}, w2, b, true), 32 * 9, "other weights");
  expect_dnnl_matches_ref(nhwc_call({1, 10, 9, 32}, w2, b, false), 32 * 9, "no residual");
  KernelCall runtime_w = nhwc_call({1, 10, 9, 32}, w2, b, false);
  runtime_w.constant_inputs = {false, false, true};
  expect_dnnl_matches_ref(runtime_w, 32 * 9, "weights computed at run time");
  EXPECT_EQ(dnnl_engine::conv_state_reuses(), reuses);

  // The Winograd switch is part of the fit.
  const Tensor w3 = dnnl_random({64, 64, 3, 3}, g), b3 = dnnl_random({64}, g);
  const KernelCall wino = nhwc_call({1, 15, 15, 64}, w3, b3, false);
  expect_dnnl_matches_ref(wino, 64 * 9, "winograd, first run");
  int64_t wino_runs = dnnl_engine::winograd_conv_runs();
  {
    KernelOptions off;
    off.conv_winograd = false;
    KernelOptionsScope scope(&off);
    expect_dnnl_matches_ref(wino, 64 * 9, "winograd switched off");
  }
  EXPECT_EQ(dnnl_engine::winograd_conv_runs(), wino_runs) << "a kept Winograd primitive ran with Winograd off";
  expect_dnnl_matches_ref(wino, 64 * 9, "winograd on again");
  EXPECT_EQ(dnnl_engine::winograd_conv_runs(), wino_runs + (dnnl_engine::winograd_available() ? 1 : 0));
}

// A strided 1x1 NhwcConv without padding runs at unit stride on the pixels at its strides,
// gathered first (conv.cc strided_1x1), also from the node's kept state; with padding it runs
// the strided primitive. Odd sizes, unequal strides, groups, residual and activation.
TEST(DnnlConv, Strided1x1GathersItsPixelsFirst) {
  std::mt19937 g(1201);
  struct Case {
    Dims x;
    int64_t m, group, sh, sw;
    bool residual;
  };
  const std::vector<Case> cases{{{1, 14, 14, 32}, 48, 1, 2, 2, true},
                                {{2, 9, 13, 16}, 24, 1, 3, 1, false},
                                {{1, 7, 5, 12}, 8, 2, 1, 2, true},
                                {{1, 15, 15, 64}, 128, 1, 3, 3, false},
                                {{2, 1, 6, 8}, 16, 1, 2, 2, true}};
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const int64_t oh = (c.x[1] - 1) / c.sh + 1, ow = (c.x[2] - 1) / c.sw + 1;
    NodeCache cache;
    KernelCall call = make_call(
        "NhwcConv", 1, {dnnl_random(c.x, g), dnnl_random({c.m, c.x[3] / c.group, 1, 1}, g), dnnl_random({c.m}, g)});
    call.domain = "com.gearbox";
    call.constant_inputs = {false, true, true};
    call.node_cache = &cache;
    call.attrs["group"] = attr_int(c.group);
    call.attrs["strides"] = attr_ints({c.sh, c.sw});
    call.attrs["activation"] = attr_string("Relu");
    if (c.residual) call.inputs.push_back(dnnl_random({c.x[0], oh, ow, c.m}, g));
    const std::string what = "case " + std::to_string(i);
    const int64_t before = dnnl_engine::strided_1x1_subsamples();
    expect_dnnl_matches_ref(call, c.x[3] / c.group, what);
    const int64_t reuses = dnnl_engine::conv_state_reuses();
    expect_dnnl_matches_ref(call, c.x[3] / c.group, what + ", from the node state");
    EXPECT_EQ(dnnl_engine::conv_state_reuses(), reuses + 1) << what << ": the node state was not used";
    EXPECT_EQ(dnnl_engine::strided_1x1_subsamples(), before + 2) << what;
  }
  // Padding: the strided primitive itself (no gather), still equal to the reference.
  KernelCall padded = make_call("NhwcConv", 1, {dnnl_random({1, 9, 9, 16}, g), dnnl_random({8, 16, 1, 1}, g)});
  padded.domain = "com.gearbox";
  padded.attrs["strides"] = attr_ints({2, 2});
  padded.attrs["pads"] = attr_ints({1, 0, 1, 0});
  const int64_t before = dnnl_engine::strided_1x1_subsamples();
  expect_dnnl_matches_ref(padded, 16, "padded");
  EXPECT_EQ(dnnl_engine::strided_1x1_subsamples(), before);
}

// com.gearbox.NhwcConv (the layout pass's channels-last form): X, Z and Y are [N, H, W, C];
// the reference transposes around cpu.ref FusedConv, the oneDNN kernel reads NHWC directly.
TEST(DnnlConv, ChannelsLastAgainstReference) {
  std::mt19937 g(12);
  auto pick = [&](std::vector<int64_t> v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(g)]; };
  for (int it = 0; it < 30; ++it) {
    const bool depthwise = it % 3 == 2;
    const int64_t n = pick({1, 2}), c = depthwise ? pick({16, 24, 7}) : pick({3, 16, 33}),
                  m = depthwise ? c : pick({8, 24, 64});
    const int64_t h = pick({5, 14, 17}), w = pick({5, 9, 16}), k = pick({1, 3}), s = pick({1, 2});
    const int64_t oh = (h + 2 * (k / 2) - k) / s + 1, ow = (w + 2 * (k / 2) - k) / s + 1;
    KernelCall call =
        make_call("NhwcConv", 1,
                  {dnnl_random({n, h, w, c}, g), dnnl_random({m, depthwise ? 1 : c, k, k}, g), dnnl_random({m}, g)});
    call.domain = "com.gearbox";
    call.constant_inputs = {false, true, true};
    if (depthwise) call.attrs["group"] = attr_int(c);
    call.attrs["strides"] = attr_ints({s, s});
    call.attrs["pads"] = attr_ints({k / 2, k / 2, k / 2, k / 2});
    if (it % 2 == 0) call.inputs.push_back(dnnl_random({n, oh, ow, m}, g));  // residual
    if (it % 4 < 2) {
      call.attrs["activation"] = attr_string(it % 4 == 0 ? "Relu" : "Clip");
      Attribute p;
      p.type = AttrType::Floats;
      if (it % 4 == 1) p.floats = {0.f, 6.f};
      call.attrs["activation_params"] = p;
    }
    expect_dnnl_matches_ref(call, (depthwise ? 1 : c) * k * k, "nhwc case " + std::to_string(it));
  }
  // Not channels-last rank 4: the reference's error on both paths.
  KernelCall bad = make_call("NhwcConv", 1, {dnnl_random({1, 5, 4}, g), dnnl_random({2, 4, 3}, g)});
  bad.domain = "com.gearbox";
  expect_dnnl_matches_ref(bad, 12, "rank 3");
}

// com.gearbox.Nchw16cConv (the layout_blocked pass's form): X, Z and Y are [N, C/16, H, W, 16];
// the reference rearranges around cpu.ref FusedConv, the oneDNN kernel reads the blocks
// directly. Includes Winograd-shaped 3x3 layers, which need no reorder in this layout.
TEST(DnnlConv, BlockedAgainstReference) {
  std::mt19937 g(16);
  auto pick = [&](std::vector<int64_t> v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(g)]; };
  int winograd_cases = 0;
  const int64_t winograd_before = dnnl_engine::winograd_conv_runs();
  for (int it = 0; it < 30; ++it) {
    const int64_t n = pick({1, 2}), c = pick({16, 32, 64, 128}), m = pick({16, 48, 64, 128});
    const int64_t h = pick({5, 14, 15, 17}), w = pick({7, 14, 16}), k = pick({1, 3}), s = pick({1, 1, 2});
    const int64_t oh = (h + 2 * (k / 2) - k) / s + 1, ow = (w + 2 * (k / 2) - k) / s + 1;
    KernelCall call = make_call(
        "Nchw16cConv", 1, {dnnl_random({n, c / 16, h, w, 16}, g), dnnl_random({m, c, k, k}, g), dnnl_random({m}, g)});
    call.domain = "com.gearbox";
    call.constant_inputs = {false, true, true};
    call.attrs["strides"] = attr_ints({s, s});
    call.attrs["pads"] = attr_ints({k / 2, k / 2, k / 2, k / 2});
    if (it % 2 == 0) call.inputs.push_back(dnnl_random({n, m / 16, oh, ow, 16}, g));  // residual
    if (it % 3 != 2) call.attrs["activation"] = attr_string("Relu");
    if (k == 3 && s == 1 && c >= 64 && m >= 64 && oh >= 7 && ow >= 7) ++winograd_cases;
    expect_dnnl_matches_ref(call, c * k * k, "blocked case " + std::to_string(it));
  }
  EXPECT_GT(winograd_cases, 0);
  EXPECT_EQ(dnnl_engine::winograd_conv_runs() - winograd_before,
            dnnl_engine::winograd_available() ? winograd_cases : 0);
  // Not the blocked form (rank 4, a last dim other than 16) or output channels that do not
  // fill whole blocks: the reference's error on both paths.
  KernelCall rank4 = make_call("Nchw16cConv", 1, {dnnl_random({1, 5, 5, 16}, g), dnnl_random({16, 16, 1, 1}, g)});
  rank4.domain = "com.gearbox";
  expect_dnnl_matches_ref(rank4, 16, "rank 4");
  KernelCall block8 = make_call("Nchw16cConv", 1, {dnnl_random({1, 2, 5, 5, 8}, g), dnnl_random({16, 16, 1, 1}, g)});
  block8.domain = "com.gearbox";
  expect_dnnl_matches_ref(block8, 16, "blocks of 8");
  KernelCall m24 = make_call("Nchw16cConv", 1, {dnnl_random({1, 1, 5, 5, 16}, g), dnnl_random({24, 16, 1, 1}, g)});
  m24.domain = "com.gearbox";
  expect_dnnl_matches_ref(m24, 16, "24 output channels");
  KernelCall wc = make_call("Nchw16cConv", 1, {dnnl_random({1, 2, 5, 5, 16}, g), dnnl_random({16, 16, 1, 1}, g)});
  wc.domain = "com.gearbox";
  expect_dnnl_matches_ref(wc, 16, "W for 16 channels, X with 32");
}

TEST(DnnlConv, OneAndThreeDimensionalConvolutions) {
  // Audio front ends (an STFT as a strided 1-D Conv, then Conv1d layers) and volumetric
  // models: strides, pads, dilations, groups, auto_pad, bias and FusedConv's epilogue.
  std::mt19937 g(21);
  struct Case {
    Dims x, w;
    std::vector<int64_t> strides, pads, dilations;
    int64_t group;
    std::string auto_pad;
  };
  const std::vector<Case> cases{
      {{2, 3, 17}, {4, 3, 3}, {1}, {0, 0}, {1}, 1, ""},
      {{1, 1, 640}, {258, 1, 256}, {64}, {0, 0}, {1}, 1, ""},  // the STFT of bench/corpus's vad models
      {{1, 129, 9}, {128, 129, 3}, {2}, {1, 1}, {1}, 1, ""},
      {{3, 8, 31}, {8, 2, 5}, {3}, {2, 1}, {2}, 4, ""},
      {{1, 6, 20}, {6, 1, 4}, {1}, {}, {1}, 6, "SAME_UPPER"},
      {{1, 2, 5, 6, 7}, {3, 2, 3, 3, 3}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, {1, 1, 1}, 1, ""},
      {{2, 4, 6, 5, 9}, {6, 2, 2, 3, 1}, {2, 1, 3}, {1, 0, 0, 0, 1, 0}, {1, 2, 1}, 2, ""},
  };
  for (const Case& c : cases) {
    const int64_t k = dims_numel(c.w) / c.w[0];
    for (int fused = 0; fused < 2; ++fused) {
      const std::string what = std::string(fused ? "FusedConv " : "Conv ") + to_string(c.x) + " * " + to_string(c.w);
      std::vector<Tensor> in{dnnl_random(c.x, g), dnnl_random(c.w, g), dnnl_random({c.w[0]}, g)};
      KernelCall call = make_call(fused ? "FusedConv" : "Conv", fused ? 1 : 11, in);
      if (fused) {
        call.domain = "com.gearbox";
        call.attrs["activation"] = attr_string("Relu");
      }
      call.attrs["strides"] = attr_ints(c.strides);
      call.attrs["dilations"] = attr_ints(c.dilations);
      call.attrs["group"] = attr_int(c.group);
      if (c.auto_pad.empty()) call.attrs["pads"] = attr_ints(c.pads);
      else call.attrs["auto_pad"] = attr_string(c.auto_pad);
      call.constant_inputs = {false, fused == 1, fused == 1};
      expect_dnnl_matches_ref(call, k, what);
    }
  }
}

TEST(DnnlConv, UnhandledConfigurationsRunTheReference) {
  std::mt19937 g(9);
  // A 4-D convolution, a residual that broadcasts, an unknown activation (ref error), a
  // group that does not divide C (ref error) and a too-small input (ref error).
  expect_dnnl_matches_ref(
      make_call("Conv", 11, {dnnl_random({1, 2, 3, 3, 3, 4}, g), dnnl_random({2, 2, 2, 2, 2, 2}, g)}), 32, "4-D",
      DnnlPath::Reference);
  KernelCall bz =
      make_call("FusedConv", 1,
                {dnnl_random({1, 4, 7, 7}, g), dnnl_random({8, 4, 3, 3}, g), Tensor(), dnnl_random({8, 1, 1}, g)});
  bz.domain = "com.gearbox";
  expect_dnnl_matches_ref(bz, 36, "broadcast residual", DnnlPath::Reference);
  KernelCall unk = make_call("FusedConv", 1, {dnnl_random({1, 4, 7, 7}, g), dnnl_random({8, 4, 3, 3}, g)});
  unk.domain = "com.gearbox";
  unk.attrs["activation"] = attr_string("Mystery");
  expect_dnnl_matches_ref(unk, 36, "unknown activation", DnnlPath::Reference);
  KernelCall badg = make_call("Conv", 11, {dnnl_random({1, 5, 7, 7}, g), dnnl_random({4, 2, 3, 3}, g)});
  badg.attrs["group"] = attr_int(2);
  expect_dnnl_matches_ref(badg, 18, "bad group", DnnlPath::Reference);
  expect_dnnl_matches_ref(make_call("Conv", 11, {dnnl_random({1, 2, 2, 2}, g), dnnl_random({3, 2, 3, 3}, g)}), 18,
                          "input smaller than kernel", DnnlPath::Reference);
}

}  // namespace
}  // namespace gearbox
