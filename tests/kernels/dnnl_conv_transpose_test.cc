// cpu.dnnl ConvTranspose (oneDNN deconvolution) against the cpu.ref kernel: randomized 2-D
// cases (groups, strides, dilations, asymmetric pads, output_padding, output_shape, every
// auto_pad, with and without bias, odd sizes), checked to have run on oneDNN; then what it
// hands to the reference (1-D, float64, an output_shape past the natural size, which needs
// a negative pad) and invalid input, which both paths report alike.
#include <algorithm>
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

TEST(DnnlConvTranspose, RandomizedAgainstReference) {
  std::mt19937 g(20261130);
  auto pick = [&](std::vector<int64_t> v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(g)]; };
  const std::vector<std::string> auto_pads{"NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
  for (int it = 0; it < 60; ++it) {
    const int64_t n = pick({1, 2}), group = pick({1, 1, 2, 3}), cg = pick({1, 3, 16}), mg = pick({1, 2, 5, 16});
    const int64_t h = pick({1, 3, 7, 12}), w = pick({1, 4, 9});
    int64_t kh = pick({1, 2, 3, 4}), kw = pick({1, 3});
    const int64_t sh = pick({1, 2, 3}), sw = pick({1, 2});
    const std::string ap = auto_pads[static_cast<size_t>(it) % auto_pads.size()];
    const bool derived_pads = ap == "SAME_UPPER" || ap == "SAME_LOWER" || it % 10 == 7;
    if (derived_pads) {  // a kernel at least the stride: the derived pads are >= 0 (cases below)
      kh = std::max(kh, sh);
      kw = std::max(kw, sw);
    }
    KernelCall call = make_call("ConvTranspose", 11,
                                {dnnl_random({n, group * cg, h, w}, g), dnnl_random({group * cg, mg, kh, kw}, g)});
    call.constant_inputs = {false, true, true};
    if (it % 2 == 0) call.inputs.push_back(dnnl_random({group * mg}, g));
    call.attrs["group"] = attr_int(group);
    call.attrs["strides"] = attr_ints({sh, sw});
    if (ap == "NOTSET") {
      call.attrs["dilations"] = attr_ints({pick({1, 2}), pick({1, 2})});
      call.attrs["pads"] = attr_ints({pick({0, 1}), pick({0, 1}), pick({0, 1}), 0});
      // output_padding must stay below the stride (or dilation) to be valid.
      call.attrs["output_padding"] = attr_ints({pick({0, sh - 1}), pick({0, sw - 1})});
    } else {
      call.attrs["auto_pad"] = attr_string(ap);
    }
    if (it % 10 == 7) call.attrs["output_shape"] = attr_ints({h * sh, w * sw});  // SAME-sized output, pads derived
    expect_dnnl_matches_ref(call, cg * kh * kw, "case " + std::to_string(it));
  }
}

TEST(DnnlConvTranspose, OtherCasesRunTheReference) {
  std::mt19937 g(9);
  KernelCall one_d = make_call("ConvTranspose", 11, {dnnl_random({1, 4, 9}, g), dnnl_random({4, 2, 3}, g)});
  expect_dnnl_matches_ref(one_d, 12, "1-D", DnnlPath::Reference);
  KernelCall wide = make_call("ConvTranspose", 11, {dnnl_random({1, 2, 3, 3}, g), dnnl_random({2, 2, 3, 3}, g)});
  wide.attrs["output_shape"] = attr_ints({7, 7});  // natural size 5: two extra positions, a negative end pad
  expect_dnnl_matches_ref(wide, 18, "output_shape past the natural size", DnnlPath::Reference);
  // SAME_UPPER one position past the natural size (kernel 2 < stride 3): the end pad is -1,
  // which oneDNN takes; SAME_LOWER puts it at the begin, which goes to the reference.
  for (const char* ap : {"SAME_UPPER", "SAME_LOWER"}) {
    KernelCall same = make_call("ConvTranspose", 11, {dnnl_random({1, 2, 3, 3}, g), dnnl_random({2, 3, 2, 2}, g)});
    same.attrs["strides"] = attr_ints({3, 3});
    same.attrs["auto_pad"] = attr_string(ap);
    expect_dnnl_matches_ref(same, 8, ap, ap == std::string("SAME_UPPER") ? DnnlPath::OneDnn : DnnlPath::Reference);
  }
  KernelCall bad_group = make_call("ConvTranspose", 11, {dnnl_random({1, 4, 5, 5}, g), dnnl_random({4, 2, 3, 3}, g)});
  bad_group.attrs["group"] = attr_int(3);
  expect_dnnl_matches_ref(bad_group, 9, "channels not divisible by group");  // both report it
}

}  // namespace
}  // namespace gearbox
