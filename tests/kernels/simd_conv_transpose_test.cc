// cpu.simd ConvTranspose (the upsampling form: kernel equal to the strides, no pads) against
// cpu.ref: square and non-square kernels, one and many output channels, batches, with and
// without a bias, constant and run-time weights, and auto_pad VALID; every other form is left
// to the next engine.
#include <random>
#include <string>
#include <vector>

#include "kernels/simd_test_util.h"

namespace gearbox {
namespace {

using testing::attr_int;
using testing::attr_ints;
using testing::attr_string;
using testing::expect_simd_matches_ref;
using testing::KernelCall;
using testing::make_call;
using testing::simd_random;
using testing::SimdPath;

KernelCall upsampling(const Dims& x, int64_t m, int64_t kh, int64_t kw, bool bias, std::mt19937& g) {
  std::vector<Tensor> in{simd_random(x, g), simd_random({x[1], m, kh, kw}, g)};
  if (bias) in.push_back(simd_random({m}, g));
  KernelCall c = make_call("ConvTranspose", 11, in);
  c.attrs["strides"] = attr_ints({kh, kw});
  c.attrs["kernel_shape"] = attr_ints({kh, kw});
  return c;
}

TEST(SimdConvTranspose, UpsamplingFormMatchesTheReference) {
  std::mt19937 g(17);
  struct Case {
    Dims x;
    int64_t m, kh, kw;
  };
  for (const Case& k : std::vector<Case>{{{1, 24, 20, 20}, 24, 2, 2},  // db_text_detector's head, scaled down
                                         {{1, 24, 40, 40}, 1, 2, 2},
                                         {{2, 5, 7, 9}, 3, 3, 3},
                                         {{1, 3, 6, 5}, 4, 2, 3},
                                         {{3, 16, 4, 4}, 8, 1, 1},
                                         {{1, 64, 13, 11}, 32, 4, 4}})
    for (const bool bias : {false, true})
      for (const bool constant : {false, true}) {
        KernelCall c = upsampling(k.x, k.m, k.kh, k.kw, bias, g);
        c.constant_inputs = {false, constant, constant};
        expect_simd_matches_ref(c,
                                to_string(k.x) + " -> " + std::to_string(k.m) + " k" + std::to_string(k.kh) + "x" +
                                    std::to_string(k.kw) + (bias ? " bias" : "") + (constant ? " constant" : ""),
                                SimdPath::Simd, 1e-5 * static_cast<double>(k.x[1]));
      }
  KernelCall valid = upsampling({1, 4, 5, 5}, 2, 2, 2, true, g);
  valid.attrs["auto_pad"] = attr_string("VALID");
  expect_simd_matches_ref(valid, "auto_pad VALID", SimdPath::Simd, 1e-4);
}

TEST(SimdConvTranspose, OtherFormsRunElsewhere) {
  std::mt19937 g(18);
  KernelCall pads = upsampling({1, 4, 5, 5}, 2, 2, 2, false, g);
  pads.attrs["pads"] = attr_ints({1, 0, 0, 1});
  expect_simd_matches_ref(pads, "pads", SimdPath::Reference, 1e-4);
  KernelCall strides = upsampling({1, 4, 5, 5}, 2, 3, 3, false, g);
  strides.attrs["strides"] = attr_ints({2, 2});
  expect_simd_matches_ref(strides, "overlapping taps", SimdPath::Reference, 1e-4);
  KernelCall groups = make_call("ConvTranspose", 11, {simd_random({1, 4, 5, 5}, g), simd_random({4, 1, 2, 2}, g)});
  groups.attrs["strides"] = attr_ints({2, 2});
  groups.attrs["group"] = attr_int(2);
  expect_simd_matches_ref(groups, "groups", SimdPath::Reference, 1e-4);
  KernelCall outpad = upsampling({1, 4, 5, 5}, 2, 2, 2, false, g);
  outpad.attrs["output_padding"] = attr_ints({1, 1});
  expect_simd_matches_ref(outpad, "output_padding", SimdPath::Reference, 1e-4);
  // W that does not fit X: the reference reports it.
  KernelCall bad = make_call("ConvTranspose", 11, {simd_random({1, 4, 5, 5}, g), simd_random({3, 2, 2, 2}, g)});
  bad.attrs["strides"] = attr_ints({2, 2});
  expect_simd_matches_ref(bad, "W misfit", SimdPath::Reference);
}

}  // namespace
}  // namespace gearbox
