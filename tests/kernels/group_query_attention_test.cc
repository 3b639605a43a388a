// com.microsoft GroupQueryAttention (reference kernel): its values are judged against ONNX Runtime
// by the oracle suite (ms_GroupQueryAttention_*); here, properties that hold whatever ORT does
// (one key gives its value back, a query head reads its group's kv head, the KV cache keeps the
// past rows) and the refusals.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace gearbox::testing {
namespace {

// Inputs in ONNX Runtime's slots: query, key, value, past_key, past_value, seqlens_k,
// total_sequence_length (an undefined Tensor omits an optional input).
KernelCall gqa(int64_t heads, int64_t kv_heads, std::vector<Tensor> inputs) {
  KernelCall c = make_call("GroupQueryAttention", 1, std::move(inputs));
  c.domain = "com.microsoft";
  c.num_outputs = 3;
  c.attrs["num_heads"] = attr_int(heads);
  c.attrs["kv_num_heads"] = attr_int(kv_heads);
  return c;
}

ErrorCode code_of(const KernelCall& c) {
  auto r = run_kernel(c);
  return r.ok() ? ErrorCode::OK : r.status().code();
}

std::string message_of(const KernelCall& c) {
  auto r = run_kernel(c);
  return r.ok() ? "" : r.status().to_string();
}

// Deterministic values in [-1, 1).
std::vector<float> ramp(int64_t n, int64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(((i * 37 + seed * 11) % 23) - 11) / 11.5f;
  return v;
}

// [B, S, heads * H] (or [B, heads, P, H]) with each kv head copied `times` times in a row.
std::vector<float> repeat_heads(const std::vector<float>& v, int64_t outer, int64_t heads, int64_t inner,
                                int64_t times) {
  std::vector<float> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t t = 0; t < times; ++t)
        for (int64_t i = 0; i < inner; ++i) out.push_back(v[size_t((o * heads + h) * inner + i)]);
  return out;
}

// A single token with nothing before it attends only to itself: softmax over one key is 1, so the
// output is V (whatever Q and K are), and the present cache is the new K and V.
TEST(GroupQueryAttention, OneTokenWithoutPastReturnsItsValue) {
  const int64_t n = 2, h = 4;
  Tensor q = Tensor::from_vector<float>(ramp(n * h, 1), {1, 1, n * h});
  Tensor k = Tensor::from_vector<float>(ramp(n * h, 2), {1, 1, n * h});
  Tensor v = Tensor::from_vector<float>(ramp(n * h, 3), {1, 1, n * h});
  auto r = run_kernel(gqa(
      n, n, {q, k, v, Tensor(), Tensor(), Tensor::from_vector<int32_t>({0}, {1}), Tensor::from_vector<int32_t>({1})}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto& out = r.value();
  ASSERT_EQ(out[0].dims(), Dims({1, 1, n * h}));
  ASSERT_EQ(out[1].dims(), Dims({1, n, 1, h}));
  for (int64_t i = 0; i < n * h; ++i) {
    EXPECT_NEAR(out[0].at_double(i), v.at_double(i), 1e-6) << i;
    EXPECT_NEAR(out[1].at_double(i), k.at_double(i), 0) << i;
    EXPECT_NEAR(out[2].at_double(i), v.at_double(i), 0) << i;
  }
}

// Grouped heads are a storage saving, not a different computation: 4 query heads over 2 kv heads
// give what 4 query heads over 4 kv heads give when each kv head (new and past) is repeated for its
// group. Decoding one token over a past of different lengths per batch, and a 3-token prompt, in
// which token 0 sees only itself (the causal mask) and so returns its kv head's value.
TEST(GroupQueryAttention, GroupedHeadsEqualExplicitlyRepeatedHeads) {
  const int64_t b = 2, n = 4, kvn = 2, h = 4, p = 3;
  for (const int64_t s : {int64_t(1), int64_t(3)}) {
    const bool decode = s == 1;
    const std::vector<float> qv = ramp(b * s * n * h, 5), kv = ramp(b * s * kvn * h, 6), vv = ramp(b * s * kvn * h, 7);
    const std::vector<float> pk = ramp(b * kvn * p * h, 8), pv = ramp(b * kvn * p * h, 9);
    const Tensor seqlens =
        Tensor::from_vector<int32_t>(decode ? std::vector<int32_t>{2, 3} : std::vector<int32_t>{2, 2}, {b});
    const Tensor total = Tensor::from_vector<int32_t>({decode ? 4 : 3});
    auto past = [&](const std::vector<float>& x, int64_t heads) {
      return decode ? Tensor::from_vector<float>(x, {b, heads, p, h}) : Tensor();
    };
    const Tensor q = Tensor::from_vector<float>(qv, {b, s, n * h});
    auto grouped = run_kernel(
        gqa(n, kvn,
            {q, Tensor::from_vector<float>(kv, {b, s, kvn * h}), Tensor::from_vector<float>(vv, {b, s, kvn * h}),
             past(pk, kvn), past(pv, kvn), seqlens, total}));
    const int64_t rep = n / kvn;
    auto full = run_kernel(gqa(n, n,
                               {q, Tensor::from_vector<float>(repeat_heads(kv, b * s, kvn, h, rep), {b, s, n * h}),
                                Tensor::from_vector<float>(repeat_heads(vv, b * s, kvn, h, rep), {b, s, n * h}),
                                past(repeat_heads(pk, b, kvn, p * h, rep), n),
                                past(repeat_heads(pv, b, kvn, p * h, rep), n), seqlens, total}));
    ASSERT_TRUE(grouped.ok()) << grouped.status().to_string();
    ASSERT_TRUE(full.ok()) << full.status().to_string();
    const Tensor& y = grouped.value()[0];
    ASSERT_EQ(y.dims(), full.value()[0].dims());
    for (int64_t i = 0; i < y.numel(); ++i)
      EXPECT_NEAR(y.at_double(i), full.value()[0].at_double(i), 1e-6) << s << ":" << i;
    if (!decode)
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t hi = 0; hi < n; ++hi)
          for (int64_t i = 0; i < h; ++i)
            EXPECT_NEAR(y.at_double((bi * s * n + hi) * h + i), vv[size_t((bi * s * kvn + hi / rep) * h + i)], 1e-6)
                << "token 0 of batch " << bi << ", head " << hi;
    // The cache: batch 0 had 2 past tokens (seqlens_k 2 = 3 tokens with the new one), so its row 2
    // holds the new key and nothing past it; batch 1 keeps all 3 past rows, then the new key.
    if (decode) {
      const Tensor& present = grouped.value()[1];
      ASSERT_EQ(present.dims(), Dims({b, kvn, 4, h}));
      for (int64_t i = 0; i < h; ++i) {
        EXPECT_EQ(present.at_double(2 * h + i), kv[size_t(i)]);
        EXPECT_EQ(present.at_double(3 * h + i), 0.0);
        EXPECT_EQ(present.at_double((2 * 4 + 2) * h + i), pk[size_t((2 * p + 2) * h + i)]);
        EXPECT_EQ(present.at_double((2 * 4 + 3) * h + i), kv[size_t(kvn * h + i)]);
      }
    }
  }
}

TEST(GroupQueryAttention, RefusesBadHeadsSeqlensAndUnsupportedForms) {
  const int64_t h = 4;
  Tensor q = Tensor::from_vector<float>(ramp(3 * h, 1), {1, 1, 3 * h});
  Tensor kv = Tensor::from_vector<float>(ramp(h, 2), {1, 1, h});
  Tensor past = Tensor::from_vector<float>(ramp(2 * h, 3), {1, 1, 2, h});
  auto call = [&](std::vector<int32_t> seqlens, int32_t total) {
    return gqa(3, 1,
               {q, kv, kv, past, past, Tensor::from_vector<int32_t>(seqlens, {int64_t(seqlens.size())}),
                Tensor::from_vector<int32_t>({total})});
  };
  EXPECT_EQ(code_of(call({2}, 3)), ErrorCode::OK);

  auto c = call({2}, 3);
  c.attrs["kv_num_heads"] = attr_int(2);
  EXPECT_EQ(code_of(c), ErrorCode::ATTRIBUTE_INVALID) << "3 heads do not split into 2 groups";

  EXPECT_EQ(code_of(call({2, 2}, 3)), ErrorCode::INVALID_ARGUMENT) << "two seqlens_k for one batch";
  EXPECT_EQ(code_of(call({3}, 3)), ErrorCode::INVALID_ARGUMENT) << "3 past tokens from a 2-row past buffer";
  EXPECT_EQ(code_of(call({-1}, 3)), ErrorCode::INVALID_ARGUMENT) << "a negative seqlens_k";
  // total_sequence_length sizes the present buffers: it may not ask for more than past + new rows.
  EXPECT_EQ(code_of(call({2}, 1 << 30)), ErrorCode::INVALID_ARGUMENT) << "a present buffer of 2^30 rows";

  c = call({2}, 3);
  c.attrs["qk_output"] = attr_int(1);
  EXPECT_EQ(code_of(c), ErrorCode::OP_UNSUPPORTED);
  EXPECT_NE(message_of(c).find("qk_output"), std::string::npos) << message_of(c);

  c = call({2}, 3);
  c.attrs["sliding_window_cache"] = attr_int(1);
  EXPECT_EQ(code_of(c), ErrorCode::OP_UNSUPPORTED);
  EXPECT_NE(message_of(c).find("sliding_window_cache"), std::string::npos) << message_of(c);

  c = call({2}, 3);
  c.inputs.resize(15);
  c.inputs[14] = Tensor::from_vector<float>(std::vector<float>(size_t(h), 1.0f), {h});
  EXPECT_EQ(code_of(c), ErrorCode::OP_UNSUPPORTED);
  EXPECT_NE(message_of(c).find("q_norm_weight"), std::string::npos) << message_of(c);

  c = call({2}, 3);
  c.attrs["causal"] = attr_int(0);
  c.attrs["local_window_size"] = attr_int(2);
  EXPECT_EQ(code_of(c), ErrorCode::ATTRIBUTE_INVALID) << "a local window needs the causal mask";

  c = call({2}, 3);
  c.attrs["do_rotary"] = attr_int(1);
  EXPECT_EQ(code_of(c), ErrorCode::INVALID_ARGUMENT) << "do_rotary without cos/sin caches";
}

}  // namespace
}  // namespace gearbox::testing
