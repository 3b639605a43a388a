// KernelContext::may_overwrite_input: the executor lets a kernel write into an input's
// buffer only where nothing else can see it. A probe engine ("test.overwrite": Neg and Add
// that record what the context answered, and compute the right values) sits in front of
// cpu.ref; each case is one reason the answer must be no, next to the one case where it is
// yes. Then the kernel that uses it: cpu.dnnl's FusedConv adds a residual read for the last
// time into the residual's own buffer, and a residual still needed later must come through
// intact (both against cpu.ref).
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>

#include "graph/pass_test_util.h"
#include "kernels/cpu/dnnl/dnnl_util.h"
#include "runtime/session.h"

namespace gearbox {
namespace {

using testing::attr_string;
using testing::GraphBuilder;
using testing::random_tensor;
using testing::unoptimized_on;

std::mutex g_seen_mu;
std::map<std::string, std::vector<bool>> g_seen;  // node name -> may_overwrite_input per input

void remember(const KernelContext& ctx) {
  std::vector<bool> v;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) v.push_back(ctx.may_overwrite_input(i));
  std::lock_guard<std::mutex> lock(g_seen_mu);
  g_seen[std::string(ctx.op().name)] = v;
}

Status probe_neg(KernelContext& ctx) {
  remember(ctx);
  const Tensor& x = ctx.input(0);
  Tensor y(DType::F32, x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = -x.data<float>()[i];
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status probe_add(KernelContext& ctx) {
  remember(ctx);
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor y(DType::F32, a.dims());
  for (int64_t i = 0; i < a.numel(); ++i) y.data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

GBX_REGISTER_KERNEL({"", "Neg", 6, 17, "test.overwrite", {DType::F32}, probe_neg});
GBX_REGISTER_KERNEL({"", "Add", 14, 17, "test.overwrite", {DType::F32}, probe_add});

TEST(OverwriteInput, OnlyALastReadComputedUnsharedValue) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {2, 3});
  Value* w = b.constant("w", random_tensor({2, 3}, 1));
  std::map<std::string, Node*> probes;
  auto probe = [&](const std::string& what, std::vector<Value*> in) {
    const char* op = in.size() == 1 ? "Neg" : "Add";
    Node* n = b.node(op, std::move(in));
    probes[what] = n;
    b.output(n->outputs[0]);
    return n;
  };
  probe("graph input", {x});
  probe("initializer", {w});
  probe("last read", {b.op("Relu", {x})});
  Value* again = b.op("Relu", {x});
  probe("read again later", {again});
  b.output(b.op("Relu", {again}));
  Value* twice = b.op("Relu", {x});
  probe("same value twice", {twice, twice});
  Value* shared = b.op("Relu", {x});
  probe("buffer shared with a live value", {b.op("Reshape", {shared, b.constant("shape", testing::ints({3, 2}))})});
  b.output(b.op("Relu", {shared}));
  Value* out = b.op("Relu", {x});
  b.output(out);
  probe("graph output", {out});

  auto s = Session::create(b.take(), unoptimized_on("test.overwrite,cpu.ref"));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Tensor xv = random_tensor({2, 3}, 2);
  auto got = (*s)->run({{"x", xv}});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  // The probes computed the right values (so their answers came from real runs).
  EXPECT_FLOAT_EQ(got->at(0).data<float>()[4], -xv.data<float>()[4]);

  std::lock_guard<std::mutex> lock(g_seen_mu);
  const std::map<std::string, std::vector<bool>> want{
      {"graph input", {false}},          {"initializer", {false}},      {"last read", {true}},
      {"read again later", {false}},     {"same value twice", {false, false}},
      {"buffer shared with a live value", {false}}, {"graph output", {false}},
  };
  for (const auto& [what, expect] : want) {
    ASSERT_TRUE(g_seen.count(probes.at(what)->name)) << what << ": the probe did not run";
    EXPECT_EQ(g_seen.at(probes.at(what)->name), expect) << what;
  }
}

// NhwcConv(x, W, B, z) (channels-last, so oneDNN writes Y in the tensor's own layout) with
// z computed in the graph: read last by the conv (its buffer
// becomes the output) or read again afterwards (it must not change).
Model conv_with_residual(bool residual_read_later) {
  GraphBuilder b;
  Value* x = b.input("x", DType::F32, {1, 9, 9, 16});
  Value* z = b.op("Relu", {b.input("r", DType::F32, {1, 9, 9, 32})});
  AttributeMap attrs;
  attrs["pads"] = testing::attr_ints({1, 1, 1, 1});
  attrs["activation"] = attr_string("Relu");
  Node* conv = b.node("NhwcConv",
                      {x, b.constant("w", random_tensor({32, 16, 3, 3}, 3)), b.constant("b", random_tensor({32}, 4)), z},
                      1, attrs, "com.gearbox");
  b.output(conv->outputs[0]);
  if (residual_read_later) b.output(b.op("Sigmoid", {z}));
  return b.take();
}

TEST(OverwriteInput, DnnlConvResidualInPlaceMatchesReference) {
  const std::map<std::string, Tensor> feeds{{"x", random_tensor({1, 9, 9, 16}, 5)},
                                            {"r", random_tensor({1, 9, 9, 32}, 6)}};
  for (bool later : {false, true}) {
    auto ref = Session::create(conv_with_residual(later), unoptimized_on("cpu.ref"));
    auto dnnl = Session::create(conv_with_residual(later), unoptimized_on("cpu.dnnl,cpu.ref"));
    ASSERT_TRUE(ref.ok() && dnnl.ok());
    auto want = (*ref)->run(feeds);
    for (int run = 0; run < 2; ++run) {  // the second run reuses recycled buffers and the conv's node state
      const int64_t reuses = dnnl_engine::conv_state_reuses();
      auto got = (*dnnl)->run(feeds);
      if (run == 0) EXPECT_EQ(dnnl_engine::conv_state_reuses(), reuses) << "nothing to reuse in the first run";
      ASSERT_TRUE(want.ok() && got.ok()) << got.status().to_string();
      ASSERT_EQ(got->size(), want->size());
      for (size_t o = 0; o < got->size(); ++o)
        for (int64_t i = 0; i < (*want)[o].numel(); ++i)
          ASSERT_NEAR((*got)[o].data<float>()[i], (*want)[o].data<float>()[i], 1e-3)
              << "read later " << later << ", output " << o << ", element " << i;
    }
  }
}

// The second run of a plan reuses the conv's node state (primitive + reordered weights) instead
// of deriving it again. The residual here is computed in the graph and, without shape and
// type inference, has no static dtype: the kernel must not refuse it for that (it once did,
// and the node silently ran on cpu.ref's NCHW detour).
TEST(OverwriteInput, DnnlConvNodeStateReusedOnTheSecondRun) {
  const std::map<std::string, Tensor> feeds{{"x", random_tensor({1, 9, 9, 16}, 5)},
                                            {"r", random_tensor({1, 9, 9, 32}, 6)}};
  auto dnnl = Session::create(conv_with_residual(false), unoptimized_on("cpu.dnnl,cpu.ref"));
  ASSERT_TRUE(dnnl.ok());
  ASSERT_TRUE((*dnnl)->run(feeds).ok());
  const int64_t reuses = dnnl_engine::conv_state_reuses();
  ASSERT_TRUE((*dnnl)->run(feeds).ok());
  EXPECT_GT(dnnl_engine::conv_state_reuses(), reuses) << "the plan's node cache was not used";
}

}  // namespace
}  // namespace gearbox
