// JSON field readers and the compact writer (json_fields.h).
#include "core/json_fields.h"

#include <memory>
#include <sstream>
#include <utility>

#include "core/text.h"

namespace autopar {

JsonFields::JsonFields(const Json::Value& object, std::string where)
    : v_(object), where_(std::move(where)) {}

Status JsonFields::status() const {
  return error_.empty() ? Status::Ok() : Status::Error(error_);
}

std::string JsonFields::Str(const char* key, bool required) {
  const Json::Value& f = v_[key];
  if (f.isNull()) {
    if (required) Fail(key, "missing");
    return "";
  }
  if (!f.isString()) {
    Fail(key, "must be a string");
    return "";
  }
  return f.asString();
}

int64_t JsonFields::Int(const char* key, int64_t dflt, bool required) {
  const Json::Value& f = v_[key];
  if (f.isNull()) {
    if (required) Fail(key, "missing");
    return dflt;
  }
  if (!f.isInt64()) {
    Fail(key, "must be an integer");
    return dflt;
  }
  return f.asInt64();
}

uint64_t JsonFields::UInt(const char* key) {
  const Json::Value& f = v_[key];
  if (f.isNull()) return 0;
  if (!f.isUInt64()) {
    Fail(key, "must be a non-negative integer");
    return 0;
  }
  return f.asUInt64();
}

double JsonFields::Real(const char* key, double dflt) {
  const Json::Value& f = v_[key];
  if (f.isNull()) return dflt;
  if (!f.isNumeric()) {
    Fail(key, "must be a number");
    return dflt;
  }
  return f.asDouble();
}

bool JsonFields::Bool(const char* key) {
  const Json::Value& f = v_[key];
  if (f.isNull()) return false;
  if (!f.isBool()) {
    Fail(key, "must be true or false");
    return false;
  }
  return f.asBool();
}

int JsonFields::SmallInt(const char* key, int dflt, bool required) {
  int64_t x = Int(key, dflt, required);
  if (x < -1 || x > 100000000) {
    Fail(key, "out of range");
    return dflt;
  }
  return static_cast<int>(x);
}

void JsonFields::Fail(const char* key, const char* why) {
  if (error_.empty()) error_ = where_ + ": " + key + ": " + why;
}

std::string JsonParseError(const std::string& jsoncpp_errors) {
  std::string where, what;
  for (const std::string& line : Split(jsoncpp_errors, '\n')) {
    const std::string t = Trim(line);
    if (StartsWith(t, "* ")) {
      if (!where.empty()) break;  // the next error
      where = ToLower(t.substr(2));
    } else if (!t.empty() && what.empty()) {
      what = t;
    }
  }
  if (where.empty()) return what.empty() ? "not valid JSON" : what;
  return what.empty() ? where : where + ": " + what;
}

std::string CompactJson(const Json::Value& value) {
  // One writer per thread: building a StreamWriterBuilder (a settings Value) and a writer for
  // each call cost ~10 us, most of the time of encoding a journal event (bench/bench_journal).
  static thread_local std::unique_ptr<Json::StreamWriter> writer = [] {
    Json::StreamWriterBuilder b;
    b["indentation"] = "";
    b["emitUTF8"] = true;
    return std::unique_ptr<Json::StreamWriter>(b.newStreamWriter());
  }();
  std::ostringstream out;
  writer->write(value, &out);
  return out.str();
}

}  // namespace autopar
