#include "core/json_text.h"

#include <gtest/gtest.h>
#include <json/json.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

namespace autopar {
namespace {

std::string Str(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

std::string Num(double x) {
  std::string out;
  AppendJsonNumber(&out, x);
  return out;
}

Json::Value Parse(const std::string& text) {
  Json::CharReaderBuilder b;
  b["strictRoot"] = false;
  std::unique_ptr<Json::CharReader> r(b.newCharReader());
  Json::Value v;
  std::string err;
  EXPECT_TRUE(r->parse(text.data(), text.data() + text.size(), &v, &err)) << text << ": " << err;
  return v;
}

TEST(JsonTextTest, StringsAreEscapedAndValidUtf8Kept) {
  EXPECT_EQ(Str(""), "\"\"");
  EXPECT_EQ(Str("plan=\"tp=1\" a\\b"), R"("plan=\"tp=1\" a\\b")");
  EXPECT_EQ(Str("a\nb\tc\r\b\f"), R"("a\nb\tc\r\b\f")");
  EXPECT_EQ(Str(std::string("\x01\x1f\0", 3)), R"("\u0001\u001f\u0000")");
  EXPECT_EQ(Str("node\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80"), "\"node\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80\"");
}

TEST(JsonTextTest, InvalidUtf8BecomesTheReplacementCharacter) {
  const std::string r = "\xef\xbf\xbd";  // U+FFFD
  EXPECT_EQ(Str("a\xff" "b"), "\"a" + r + "b\"");
  EXPECT_EQ(Str("\xc3"), "\"" + r + "\"");                    // cut short
  EXPECT_EQ(Str("\xc0\xaf"), "\"" + r + r + "\"");            // overlong
  EXPECT_EQ(Str("\xed\xa0\x80"), "\"" + r + r + r + "\"");    // a surrogate
  EXPECT_EQ(Str("\xf4\x90\x80\x80"), "\"" + r + r + r + r + "\"");  // above U+10FFFF
  // Written again from what a parser reads back: the same text.
  const std::string once = Str("n\xb1" "de1");
  EXPECT_EQ(Str(Parse(once).asString()), once);
}

TEST(JsonTextTest, AnyBytesGiveJsonThatReadsBack) {
  // Random bytes: always valid JSON; what was valid UTF-8 without escapes reads back the same.
  std::mt19937 rng(7);
  for (int n = 0; n < 2000; ++n) {
    std::string s(rng() % 24, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    const Json::Value v = Parse(Str(s));
    ASSERT_TRUE(v.isString());
  }
  for (const char* s : {"x", "a \"b\" \\c\n", "\xe2\x82\xac 12", "\x7f"}) {
    EXPECT_EQ(Parse(Str(s)).asString(), s);
  }
}

TEST(JsonTextTest, NumbersAreTheShortestThatReadBackTheSame) {
  EXPECT_EQ(Num(1796264753.357), "1796264753.357");
  EXPECT_EQ(Num(0.1), "0.1");
  EXPECT_EQ(Num(1001), "1001");
  EXPECT_EQ(Num(-2.5), "-2.5");
  EXPECT_EQ(Num(std::nan("")), "null");
  EXPECT_EQ(Num(std::numeric_limits<double>::infinity()), "null");
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> times(1.7e9, 1.9e9);
  for (int n = 0; n < 1000; ++n) {
    const double x = times(rng);
    EXPECT_EQ(Parse(Num(x)).asDouble(), x) << Num(x);
  }
  std::string i;
  AppendJsonInt(&i, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(i, "-9223372036854775808");
}

}  // namespace
}  // namespace autopar
