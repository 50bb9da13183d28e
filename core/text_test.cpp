#include "core/text.h"

#include <gtest/gtest.h>

#include <limits>

namespace autopar {
namespace {

TEST(Text, Trim) {
  EXPECT_EQ(Trim("  a b \t\n"), "a b");
  EXPECT_EQ(Trim(""), "");
  EXPECT_EQ(Trim("   "), "");
}

TEST(Text, ParseDoubleTakesOnlyAWholeNumber) {
  EXPECT_EQ(ParseDouble("1.5"), 1.5);
  EXPECT_EQ(ParseDouble("-2e3"), -2000.0);
  EXPECT_EQ(ParseDouble("0"), 0.0);
  EXPECT_FALSE(ParseDouble(""));
  EXPECT_FALSE(ParseDouble("1.5s"));
  EXPECT_FALSE(ParseDouble("1 "));
  EXPECT_FALSE(ParseDouble("seconds"));
}

TEST(Text, SplitKeepsEmptyFields) {
  EXPECT_EQ(Split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(Split("", ','), (std::vector<std::string>{""}));
  EXPECT_EQ(Split("x", ','), (std::vector<std::string>{"x"}));
}

TEST(Text, JoinAndAffixes) {
  EXPECT_EQ(Join({"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_TRUE(StartsWith("s3://b", "s3://"));
  EXPECT_FALSE(StartsWith("s3", "s3://"));
  EXPECT_TRUE(EndsWith("m.json", ".json"));
  EXPECT_EQ(ToLower("LLaMA-2"), "llama-2");
}

TEST(Text, ParseInt) {
  struct Case {
    const char* in;
    int64_t min, max;
    std::optional<int64_t> want;
  } cases[] = {
      {"42", 0, 100, 42},     {"-1", 0, 100, std::nullopt}, {"-1", -5, 5, -1},
      {"", 0, 9, std::nullopt}, {"4x", 0, 9, std::nullopt}, {" 4", 0, 9, std::nullopt},
      {"101", 0, 100, std::nullopt},
      {"99999999999999999999", 0, std::numeric_limits<int64_t>::max(), std::nullopt},
  };
  for (const auto& c : cases) EXPECT_EQ(ParseInt(c.in, c.min, c.max), c.want) << c.in;
}

}  // namespace
}  // namespace autopar

namespace autopar {
namespace {

// What a job's program writes into an event must not reach an admin's terminal as control codes.
TEST(Text, EscapeControl) {
  EXPECT_EQ(EscapeControl("plain text, ünïcode ok"), "plain text, ünïcode ok");
  EXPECT_EQ(EscapeControl("\x1b]0;pwned\x07" "a\tb\r\n"), "\\x1b]0;pwned\\x07a\\x09b\\x0d\\x0a");
  EXPECT_EQ(EscapeControl("x\ny", true), "x\ny");
  EXPECT_EQ(EscapeControl("\x7f"), "\\x7f");
  EXPECT_EQ(EscapeControl("csi \xc2\x9b" "31m"), "csi \\u009b31m");  // C1 CSI as UTF-8
  EXPECT_EQ(EscapeControl("\xc2\xa0"), "\xc2\xa0");                  // NBSP is text
}

}  // namespace
}  // namespace autopar
