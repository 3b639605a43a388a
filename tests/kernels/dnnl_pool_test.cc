// cpu.dnnl MaxPool, AveragePool and GlobalAveragePool against the cpu.ref kernels: randomized
// 2-D cases (odd sizes, pads, strides, MaxPool dilations, ceil_mode, count_include_pad, every
// auto_pad), the ceil_mode end-pad translation at its edges, and the configurations that fall
// back to the reference inside the kernel (asserted through DnnlPath::Reference).
#include <random>
#include <string>
#include <vector>

#include "kernels/dnnl_test_util.h"

namespace gearbox {
namespace {

using testing::attr_int;
using testing::attr_ints;
using testing::attr_string;
using testing::dnnl_random;
using testing::DnnlPath;
using testing::expect_dnnl_matches_ref;
using testing::KernelCall;
using testing::make_call;

TEST(DnnlPool, RandomizedAgainstReference) {
  std::mt19937 g(20261130);
  auto pick = [&](std::vector<int64_t> v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(g)]; };
  const std::vector<std::string> auto_pads{"NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
  int ran = 0;
  for (int it = 0; it < 120; ++it) {
    const bool is_max = it % 2 == 0;
    const int64_t n = pick({1, 2}), c = pick({1, 3, 16, 17, 64});
    const int64_t kh = pick({1, 2, 3, 5}), kw = pick({1, 2, 3});
    const int64_t dh = is_max ? pick({1, 1, 2}) : 1, dw = is_max ? pick({1, 2, 3}) : 1;
    const int64_t exth = (kh - 1) * dh + 1, extw = (kw - 1) * dw + 1;
    const int64_t h = exth + pick({0, 1, 4, 12, 30}), w = extw + pick({0, 2, 7, 20});
    KernelCall call = make_call(is_max ? "MaxPool" : "AveragePool", is_max ? 12 : 11, {dnnl_random({n, c, h, w}, g)});
    call.attrs["kernel_shape"] = attr_ints({kh, kw});
    call.attrs["strides"] = attr_ints({pick({1, 2, 3}), pick({1, 2})});
    if (is_max) call.attrs["dilations"] = attr_ints({dh, dw});
    const bool include_pad = !is_max && pick({0, 1}) == 1;
    if (!is_max) call.attrs["count_include_pad"] = attr_int(include_pad ? 1 : 0);
    const std::string ap = auto_pads[static_cast<size_t>(it / 2) % auto_pads.size()];
    if (ap == "NOTSET") {
      // Pads below the window extent (a window wholly in padding is a fall-back case below).
      auto pad = [&](int64_t ext) { return std::uniform_int_distribution<int64_t>(0, ext - 1)(g); };
      call.attrs["pads"] = attr_ints({pad(exth), pad(extw), pad(exth), pad(extw)});
      // ceil_mode with count_include_pad is covered by CeilModeEndPads.
      if (!include_pad) call.attrs["ceil_mode"] = attr_int(pick({0, 1}));
    } else {
      call.attrs["auto_pad"] = attr_string(ap);
    }
    expect_dnnl_matches_ref(call, kh * kw, std::string(is_max ? "max" : "avg") + " case " + std::to_string(it));
    ++ran;
  }
  EXPECT_EQ(ran, 120);
}

TEST(DnnlPool, ResNetAndMobileNetShapes) {
  std::mt19937 g(50);
  KernelCall mp = make_call("MaxPool", 12, {dnnl_random({1, 64, 112, 112}, g)});
  mp.attrs["kernel_shape"] = attr_ints({3, 3});
  mp.attrs["strides"] = attr_ints({2, 2});
  mp.attrs["pads"] = attr_ints({1, 1, 1, 1});
  expect_dnnl_matches_ref(mp, 9, "resnet maxpool");
  expect_dnnl_matches_ref(make_call("GlobalAveragePool", 1, {dnnl_random({1, 2048, 7, 7}, g)}), 49, "resnet gap");
  expect_dnnl_matches_ref(make_call("GlobalAveragePool", 1, {dnnl_random({2, 1280, 7, 7}, g)}), 49, "mobilenet gap");
  expect_dnnl_matches_ref(make_call("GlobalAveragePool", 1, {dnnl_random({3, 5, 1, 13}, g)}), 13, "odd gap");
}

TEST(DnnlPool, CeilModeEndPads) {
  std::mt19937 g(51);
  // 6 wide, kernel 3, stride 2, no pads: floor gives 2 outputs, ceil 3 (the last window reads
  // one column past the end). Max and exclude-padding average run on oneDNN with a larger end
  // pad; count_include_pad would divide that last window by 3 on oneDNN but by 2 on the
  // reference (padding beyond the declared pads does not count), so it falls back.
  for (const char* op : {"MaxPool", "AveragePool"})
    for (int64_t include_pad : {0, 1}) {
      KernelCall call = make_call(op, 11, {dnnl_random({1, 5, 6, 6}, g)});
      call.attrs["kernel_shape"] = attr_ints({3, 3});
      call.attrs["strides"] = attr_ints({2, 2});
      call.attrs["ceil_mode"] = attr_int(1);
      if (std::string(op) == "AveragePool") call.attrs["count_include_pad"] = attr_int(include_pad);
      const bool falls_back = std::string(op) == "AveragePool" && include_pad == 1;
      expect_dnnl_matches_ref(call, 9, std::string(op) + " ceil include_pad=" + std::to_string(include_pad),
                              falls_back ? DnnlPath::Reference : DnnlPath::OneDnn);
    }
  // 7 wide: ceil and floor agree (3 outputs), so count_include_pad stays on oneDNN.
  KernelCall exact = make_call("AveragePool", 11, {dnnl_random({1, 5, 7, 7}, g)});
  exact.attrs["kernel_shape"] = attr_ints({3, 3});
  exact.attrs["strides"] = attr_ints({2, 2});
  exact.attrs["ceil_mode"] = attr_int(1);
  exact.attrs["count_include_pad"] = attr_int(1);
  expect_dnnl_matches_ref(exact, 9, "ceil exact include_pad");
}

// The layout pass's channels-last pools: [N, H, W, C] in and out.
TEST(DnnlPool, ChannelsLastAgainstReference) {
  std::mt19937 g(53);
  auto pick = [&](std::vector<int64_t> v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(g)]; };
  for (int it = 0; it < 30; ++it) {
    const int64_t n = pick({1, 2}), c = pick({3, 16, 24, 64}), h = pick({4, 9, 16}), w = pick({5, 8, 13});
    const std::vector<std::string> ops{"NhwcMaxPool", "NhwcAveragePool", "NhwcGlobalAveragePool"};
    const std::string op = ops[static_cast<size_t>(it) % 3];
    KernelCall call = make_call(op, 1, {dnnl_random({n, h, w, c}, g)});
    call.domain = "com.gearbox";
    int64_t k = h * w;
    if (op != "NhwcGlobalAveragePool") {
      const int64_t kh = pick({2, 3}), kw = pick({1, 3});
      k = kh * kw;
      call.attrs["kernel_shape"] = attr_ints({kh, kw});
      call.attrs["strides"] = attr_ints({pick({1, 2}), pick({1, 2})});
      call.attrs["pads"] = attr_ints({pick({0, 1}), 0, pick({0, 1}), 0});
      if (op == "NhwcAveragePool") call.attrs["count_include_pad"] = attr_int(pick({0, 1}));
      else
        call.attrs["ceil_mode"] = attr_int(pick({0, 1}));
    }
    expect_dnnl_matches_ref(call, k, op + " case " + std::to_string(it));
  }
}

TEST(DnnlPool, UnhandledConfigurationsRunTheReference) {
  std::mt19937 g(52);
  // 1-D and 3-D windows.
  KernelCall p1 = make_call("MaxPool", 12, {dnnl_random({2, 3, 17}, g)});
  p1.attrs["kernel_shape"] = attr_ints({3});
  expect_dnnl_matches_ref(p1, 3, "1-D", DnnlPath::Reference);
  KernelCall p3 = make_call("AveragePool", 11, {dnnl_random({1, 2, 5, 6, 7}, g)});
  p3.attrs["kernel_shape"] = attr_ints({2, 2, 2});
  expect_dnnl_matches_ref(p3, 8, "3-D", DnnlPath::Reference);
  expect_dnnl_matches_ref(make_call("GlobalAveragePool", 1, {dnnl_random({1, 4, 9}, g)}), 9, "1-D global",
                          DnnlPath::Reference);
  // MaxPool's Indices output.
  KernelCall idx = make_call("MaxPool", 12, {dnnl_random({1, 4, 9, 9}, g)});
  idx.attrs["kernel_shape"] = attr_ints({2, 2});
  idx.num_outputs = 2;
  expect_dnnl_matches_ref(idx, 4, "indices", DnnlPath::Reference);
  // A pad as large as the window (windows wholly in padding).
  for (const char* op : {"MaxPool", "AveragePool"}) {
    KernelCall big = make_call(op, 11, {dnnl_random({1, 4, 9, 9}, g)});
    big.attrs["kernel_shape"] = attr_ints({2, 2});
    big.attrs["pads"] = attr_ints({2, 0, 0, 0});
    expect_dnnl_matches_ref(big, 4, std::string(op) + " pad >= kernel", DnnlPath::Reference);
  }
  // Errors: both paths fail with the same code (input smaller than the window, no kernel_shape).
  KernelCall small = make_call("MaxPool", 12, {dnnl_random({1, 2, 2, 2}, g)});
  small.attrs["kernel_shape"] = attr_ints({3, 3});
  expect_dnnl_matches_ref(small, 9, "input smaller than kernel");
  expect_dnnl_matches_ref(make_call("AveragePool", 11, {dnnl_random({1, 2, 4, 4}, g)}), 1, "no kernel_shape");
}

}  // namespace
}  // namespace gearbox
