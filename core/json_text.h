// Writing JSON text directly, for the few places that write many small values (a job's events:
// `autopar events --json`, published journal segments): no Json::Value built and written per
// value, which is most of what jsoncpp costs there (bench/bench_journal). The output is what a
// JSON parser reads back to the same values: strings escaped (", \, control characters) with
// valid UTF-8 kept as it is and every byte of invalid UTF-8 written as U+FFFD (its UTF-8 bytes),
// so the text is always valid JSON and writing what was read back gives the same text; doubles in the shortest form that reads back to the same double (non-finite
// ones as null, as jsoncpp writes them). Pure; reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace autopar {

// Appends `s` as a quoted JSON string.
void AppendJsonString(std::string* out, std::string_view s);
// Appends `x` as a JSON number (null when it is NaN or infinite).
void AppendJsonNumber(std::string* out, double x);
void AppendJsonInt(std::string* out, int64_t x);

}  // namespace autopar
