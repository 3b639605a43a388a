// split_list, the one parser of comma lists (GEARBOX_ENGINES, GEARBOX_DISABLE_PASSES, ISA lists), and join.
#include "base/strings.h"

#include <gtest/gtest.h>

namespace gearbox {
namespace {

TEST(SplitList, TrimsAndDropsEmptyItems) {
  EXPECT_EQ(split_list("cpu.dnnl,cpu.ref"), (std::vector<std::string>{"cpu.dnnl", "cpu.ref"}));
  EXPECT_EQ(split_list(" a ,\tb,, ,c,"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(split_list("x:y", ':'), (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(split_list("").empty());
  EXPECT_TRUE(split_list(" , ,").empty());
}

TEST(Join, InverseOfSplitList) {
  EXPECT_EQ(join({}), "");
  EXPECT_EQ(join({"cpu.ref"}), "cpu.ref");
  EXPECT_EQ(join({"cpu.simd", "cpu.dnnl", "cpu.ref"}, ","), "cpu.simd,cpu.dnnl,cpu.ref");
  EXPECT_EQ(split_list(join({"a", "b", "c"}, ", ")), (std::vector<std::string>{"a", "b", "c"}));
}

}  // namespace
}  // namespace gearbox
