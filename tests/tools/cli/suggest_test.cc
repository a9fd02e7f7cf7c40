// tools/cli/suggest.h: the edit distance behind "did you mean ...?" and the names it suggests.
#include "tools/cli/suggest.h"

#include <gtest/gtest.h>

namespace wharf::cli {
namespace {

TEST(SuggestTest, EditDistanceCountsEachKindOfEdit) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("stat", "stat"), 0u);
  EXPECT_EQ(EditDistance("", "tail"), 4u);
  EXPECT_EQ(EditDistance("tail", ""), 4u);
  EXPECT_EQ(EditDistance("stat", "stats"), 1u);  // insertion
  EXPECT_EQ(EditDistance("lst", "list"), 1u);    // deletion
  EXPECT_EQ(EditDistance("tall", "tail"), 1u);   // substitution
  EXPECT_EQ(EditDistance("stta", "stat"), 1u);   // transposition
  EXPECT_EQ(EditDistance("--tpye", "--type"), 1u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("ca", "abc"), 3u);  // restricted: no edit of a transposed pair
}

TEST(SuggestTest, SuggestsTheNearestCloseName) {
  const std::vector<std::string> commands = {"version", "help", "stat", "cursor", "tail",
                                             "dead",    "trim", "top",  "bench",  "check"};
  EXPECT_EQ(Suggest("stta", commands), "stat");
  EXPECT_EQ(Suggest("tial", commands), "tail");
  EXPECT_EQ(Suggest("cusror", commands), "cursor");
  EXPECT_EQ(Suggest("benhc", commands), "bench");
  EXPECT_EQ(Suggest("vers", commands), "version");  // a unique prefix
  EXPECT_EQ(Suggest("tpo", commands), "top");
  EXPECT_EQ(Suggest("frobnicate", commands), std::nullopt);
  EXPECT_EQ(Suggest("x", commands), std::nullopt);     // 1 edit from nothing, but 1 character
  EXPECT_EQ(Suggest("t", commands), std::nullopt);     // prefix of several
  EXPECT_EQ(Suggest("stat", commands), std::nullopt);  // not mistyped
  EXPECT_EQ(Suggest("--tpye", {"--type", "--partition", "--from"}), "--type");
  EXPECT_EQ(Suggest("tea", {"ten", "tee"}), "ten");  // a tie goes to the first
}

TEST(SuggestTest, DidYouMeanAndNameList) {
  EXPECT_EQ(DidYouMean("lst", {"list", "retry", "purge"}), " (did you mean 'list'?)");
  EXPECT_EQ(DidYouMean("zzz", {"list"}), "");
  EXPECT_EQ(NameList({}), "none");
  EXPECT_EQ(NameList({"A", "B"}), "A, B");
  EXPECT_EQ(NameList({"A", "B", "C", "D"}, 2), "A, B, ... (2 more)");
}

}  // namespace
}  // namespace wharf::cli
