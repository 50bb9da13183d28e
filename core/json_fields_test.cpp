#include "core/json_fields.h"

#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <string>

namespace autopar {
namespace {

Json::Value Parse(const std::string& text) {
  Json::CharReaderBuilder b;
  std::string errs;
  Json::Value v;
  std::istringstream in(text);
  EXPECT_TRUE(Json::parseFromStream(b, in, &v, &errs)) << errs;
  return v;
}

TEST(JsonFieldsTest, ReadsEachTypeOrNamesTheKeyThatIsWrong) {
  struct Case {
    const char* json;
    std::function<std::string(JsonFields&)> read;  // the value read, as text
    std::string want_value;
    std::string want_error;  // empty: OK
  } cases[] = {
      {R"({"a":"x"})", [](JsonFields& f) { return f.Str("a"); }, "x", ""},
      {R"({})", [](JsonFields& f) { return f.Str("a"); }, "", ""},
      {R"({})", [](JsonFields& f) { return f.Str("a", true); }, "", "req: a: missing"},
      {R"({"a":1})", [](JsonFields& f) { return f.Str("a"); }, "", "req: a: must be a string"},
      {R"({"n":-5})", [](JsonFields& f) { return std::to_string(f.Int("n", 7)); }, "-5", ""},
      {R"({})", [](JsonFields& f) { return std::to_string(f.Int("n", 7)); }, "7", ""},
      {R"({"n":null})", [](JsonFields& f) { return std::to_string(f.Int("n", 7, true)); }, "7",
       "req: n: missing"},
      {R"({"n":1.5})", [](JsonFields& f) { return std::to_string(f.Int("n", 7)); }, "7",
       "req: n: must be an integer"},
      {R"({"u":3})", [](JsonFields& f) { return std::to_string(f.UInt("u")); }, "3", ""},
      {R"({"u":-3})", [](JsonFields& f) { return std::to_string(f.UInt("u")); }, "0",
       "req: u: must be a non-negative integer"},
      {R"({"r":2})", [](JsonFields& f) { return std::to_string(f.Real("r", -1)); }, "2.000000", ""},
      {R"({"r":"2"})", [](JsonFields& f) { return std::to_string(f.Real("r", -1)); }, "-1.000000",
       "req: r: must be a number"},
      {R"({"b":true})", [](JsonFields& f) { return std::to_string(f.Bool("b")); }, "1", ""},
      {R"({"b":1})", [](JsonFields& f) { return std::to_string(f.Bool("b")); }, "0",
       "req: b: must be true or false"},
      {R"({"s":100000000})", [](JsonFields& f) { return std::to_string(f.SmallInt("s", 0)); },
       "100000000", ""},
      {R"({"s":-2})", [](JsonFields& f) { return std::to_string(f.SmallInt("s", 0)); }, "0",
       "req: s: out of range"},
  };
  for (const auto& c : cases) {
    Json::Value v = Parse(c.json);
    JsonFields f(v, "req");
    EXPECT_EQ(c.read(f), c.want_value) << c.json;
    EXPECT_EQ(f.status().message(), c.want_error) << c.json;
    EXPECT_EQ(f.status().ok(), c.want_error.empty()) << c.json;
  }
}

TEST(JsonFieldsTest, KeepsTheFirstError) {
  Json::Value v = Parse(R"({"a":1,"b":"x"})");
  JsonFields f(v, "reply");
  f.Str("a");
  f.Int("b", 0);
  EXPECT_EQ(f.status().message(), "reply: a: must be a string");
}

TEST(JsonFieldsTest, CompactJsonIsOneLineWithUtf8AsItIs) {
  Json::Value v(Json::objectValue);
  v["name"] = "n\xc3\xb6" "de";
  v["list"] = Json::Value(Json::arrayValue);
  v["list"].append(1);
  EXPECT_EQ(CompactJson(v), "{\"list\":[1],\"name\":\"n\xc3\xb6" "de\"}");
}

TEST(JsonParseError, OneLineWithWhereAndWhat) {
  EXPECT_EQ(JsonParseError("* Line 1, Column 68\n  Missing ',' or '}' in object declaration\n"
                           "* Line 2, Column 1\n  Something else\n"),
            "line 1, column 68: Missing ',' or '}' in object declaration");
  EXPECT_EQ(JsonParseError(""), "not valid JSON");
}

}  // namespace
}  // namespace autopar
