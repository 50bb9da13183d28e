// Small text helpers shared by the option, config and environment code. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace autopar {

std::string Trim(std::string_view s);
// Splits on `sep`; keeps empty fields ("a,,b" -> {"a","","b"}); "" -> {""}.
std::vector<std::string> Split(std::string_view s, char sep);
std::string Join(const std::vector<std::string>& parts, std::string_view sep);
bool StartsWith(std::string_view s, std::string_view prefix);
// a == b in a time that depends on their lengths only, not on where they first differ (secrets
// such as tokens: a guess must not learn from how long its refusal took).
bool ConstantTimeEquals(std::string_view a, std::string_view b);
// `s` safe to print on a terminal: control characters (C0, DEL, and C1 as UTF-8: U+0080..U+009F)
// become "\xNN" / "\u00NN", so a job's event details cannot move the cursor, retitle the window
// or inject keystrokes into the terminal of an admin reading them. With `keep_newlines`, '\n'
// stays as it is (a multi-line report).
std::string EscapeControl(std::string_view s, bool keep_newlines = false);
bool EndsWith(std::string_view s, std::string_view suffix);
std::string ToLower(std::string_view s);

// Parses a whole decimal integer (optional leading '-', no spaces, no trailing text) within
// [min, max]. Returns nullopt on any other input.
std::optional<int64_t> ParseInt(std::string_view s, int64_t min, int64_t max);
// Parses a whole number as strtod reads it ("1.5", "-2e3"; no trailing text, not empty).
// Returns nullopt on any other input.
std::optional<double> ParseDouble(const std::string& s);
// `v` with `digits` decimals ("%.*f"): FormatFixed(2.345, 1) == "2.3".
std::string FormatFixed(double v, int digits);

}  // namespace autopar
