// --dump-tensors patterns: parsing (suffixes, errors) and which nodes a pattern matches.
// The dumps themselves (values against numpy/torch, subgraph calls, fused nodes) are checked
// end to end by tests/profile/check_dump.py.
#include "runtime/tensor_dump.h"

#include <gtest/gtest.h>

namespace gearbox {
namespace {

Node node(std::string name, std::string op, std::string domain = "") {
  Node n;
  n.name = std::move(name);
  n.op_type = std::move(op);
  n.domain = std::move(domain);
  return n;
}

TEST(DumpPattern, Suffixes) {
  auto post = parse_dump_pattern("Conv:post");
  ASSERT_TRUE(post.ok());
  EXPECT_EQ(post->target, "Conv");
  EXPECT_TRUE(post->post);
  EXPECT_FALSE(post->pre);
  auto pre = parse_dump_pattern("com.gearbox.FusedConv:pre");
  ASSERT_TRUE(pre.ok());
  EXPECT_EQ(pre->target, "com.gearbox.FusedConv");
  EXPECT_TRUE(pre->pre);
  EXPECT_FALSE(pre->post);
  auto plain = parse_dump_pattern("relu");  // no colon: outputs
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->target, "relu");
  EXPECT_TRUE(plain->post);
  // The last colon separates the suffix, so node names with colons work with one.
  auto colon = parse_dump_pattern("block:1/add:post");
  ASSERT_TRUE(colon.ok());
  EXPECT_EQ(colon->target, "block:1/add");
}

TEST(DumpPattern, BadPatternsAreUsageErrors) {
  for (const char* bad : {"Conv:middle", "Conv:", ":post", "", "Conv:POST"}) {
    auto r = parse_dump_pattern(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), ErrorCode::USAGE) << bad;
  }
  auto r = parse_dump_pattern("Conv:middle");
  EXPECT_NE(r.status().message().find("':middle'"), std::string::npos) << r.status().message();
}

TEST(DumpPattern, MatchesNameOrPlainOrQualifiedOpType) {
  const Node conv = node("conv1", "Conv"), fused = node("relu/FusedConv", "FusedConv", "com.gearbox");
  auto p = [](const char* s) { return parse_dump_pattern(s).value(); };
  EXPECT_TRUE(p("Conv").matches(conv));
  EXPECT_FALSE(p("Conv").matches(fused));
  EXPECT_TRUE(p("FusedConv").matches(fused));
  EXPECT_TRUE(p("com.gearbox.FusedConv").matches(fused));
  EXPECT_FALSE(p("com.gearbox.Conv").matches(conv));
  EXPECT_TRUE(p("conv1").matches(conv));
  EXPECT_TRUE(p("relu/FusedConv:post").matches(fused));
  EXPECT_FALSE(p("conv").matches(conv));  // names and op types are case-sensitive
  EXPECT_TRUE(p("*").matches(conv));
  EXPECT_TRUE(p("*:pre").matches(fused));
}

}  // namespace
}  // namespace gearbox
