// Status, Result and the error catalogue.
#include "base/status.h"

#include <gtest/gtest.h>

#include <set>

namespace gearbox {
namespace {

TEST(Status, OkHasNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::OK);
  EXPECT_EQ(s.to_string(), "OK");
}

TEST(Status, ErrorFormatsCodeNameAndMessage) {
  Status s = make_error(ErrorCode::SHAPE_MISMATCH, "a ", 3, " vs ", 4);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.to_string(), "GBX-E3003 SHAPE_MISMATCH: a 3 vs 4");
  EXPECT_NE(s.to_string_with_help().find("fix:"), std::string::npos);
}

TEST(Status, ContextIsPrefixed) {
  Status s = make_error(ErrorCode::INTERNAL, "boom").with_context("node 'x': ");
  EXPECT_EQ(s.message(), "node 'x': boom");
  EXPECT_TRUE(Status().with_context("ignored").ok());
}

TEST(Result, CarriesValueOrStatus) {
  Result<int> good = 5;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good.value(), 5);
  Result<int> bad = make_error(ErrorCode::USAGE, "nope");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::USAGE);
}

TEST(ErrorCatalogue, CodesAndNamesAreUniqueAndComplete) {
  size_t n = 0;
  const ErrorInfo* all = all_errors(&n);
  ASSERT_GT(n, 10u);
  std::set<int> codes;
  std::set<std::string_view> names;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(codes.insert(all[i].code).second) << all[i].code;
    EXPECT_TRUE(names.insert(all[i].name).second) << all[i].name;
    EXPECT_FALSE(all[i].cause.empty()) << all[i].name;
    EXPECT_FALSE(all[i].fix.empty()) << all[i].name;
    EXPECT_EQ(find_error(all[i].code), &all[i]);
    EXPECT_EQ(find_error(all[i].name), &all[i]);
  }
  EXPECT_EQ(find_error(424242), nullptr);
}

}  // namespace
}  // namespace gearbox
