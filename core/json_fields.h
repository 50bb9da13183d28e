// Reading the fields of a parsed JSON object (jsoncpp) with errors that name the key, and writing
// compact one-line JSON: shared by the autopard wire format (protocol.h) and the tools that print
// JSON (autopar-slurm-actions).
//
// JsonFields: an absent (or null) field gives the default, or the error "WHERE: KEY: missing" when
// required; a field of the wrong type gives the default and the error "WHERE: KEY: must be a string"
// (an integer, a non-negative integer, a number, true or false; SmallInt also "out of range"
// outside [-1, 100000000]). Only the first error is kept: read every field, then check status().
//
// Thread safety: a JsonFields belongs to one thread and must not outlive the value it reads;
// CompactJson is reentrant.
#pragma once

#include <json/json.h>

#include <cstdint>
#include <string>

#include "autopar/status.h"

namespace autopar {

class JsonFields {
 public:
  // `object`: the JSON object read; `where`: the error messages' prefix ("request", "commit").
  JsonFields(const Json::Value& object, std::string where);

  // Ok, or the first error met by the readers below.
  Status status() const;

  std::string Str(const char* key, bool required = false);
  int64_t Int(const char* key, int64_t dflt, bool required = false);
  uint64_t UInt(const char* key);  // default 0
  double Real(const char* key, double dflt);
  bool Bool(const char* key);  // default false
  int SmallInt(const char* key, int dflt, bool required = false);

 private:
  void Fail(const char* key, const char* why);
  const Json::Value& v_;
  std::string where_;
  std::string error_;
};

// jsoncpp's parse errors ("* Line 1, Column 68\n  Missing ',' or '}' in object declaration\n...")
// as one line naming where and what: "line 1, column 68: Missing ',' or '}' in object
// declaration" (the first error only).
std::string JsonParseError(const std::string& jsoncpp_errors);

// `value` as one line of JSON: no indentation, no trailing newline, UTF-8 left as it is.
std::string CompactJson(const Json::Value& value);

}  // namespace autopar
