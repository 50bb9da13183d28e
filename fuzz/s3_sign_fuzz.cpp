// SigV4 canonicalisation of outside strings (service/storage/s3_sign.h): AwsUriEncode and S3Url.
// Line 1 is the object path, the next lines name=value query parameters. The encoding must hold
// only unreserved bytes and %XX and decode back to the input; the query must come out sorted.
#include "fuzz/fuzz_util.h"
#include "service/storage/s3_sign.h"

namespace {

bool Unreserved(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;  // lowercase hex is not canonical
}

std::string Decode(const std::string& s, bool keep_slash) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      FUZZ_CHECK(i + 2 < s.size());
      const int hi = Hex(s[i + 1]), lo = Hex(s[i + 2]);
      FUZZ_CHECK(hi >= 0 && lo >= 0);
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      FUZZ_CHECK(Unreserved(s[i]) || (keep_slash && s[i] == '/'));
      out += s[i];
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = autopar::fuzz::AsString(data, size);
  FUZZ_CHECK(Decode(autopar::AwsUriEncode(text, false), false) == text);
  FUZZ_CHECK(Decode(autopar::AwsUriEncode(text, true), true) == text);

  auto lines = autopar::fuzz::SplitLines(text);
  autopar::HttpFields query;
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t eq = lines[i].find('=');
    if (eq == std::string::npos)
      query.emplace_back(lines[i], "");
    else
      query.emplace_back(lines[i].substr(0, eq), lines[i].substr(eq + 1));
  }
  const std::string url = autopar::S3Url("https://s3.example.com", lines[0], query);
  const std::string prefix = "https://s3.example.com";
  FUZZ_CHECK(url.compare(0, prefix.size(), prefix) == 0);
  const size_t q = url.find('?');
  if (q != std::string::npos) {
    // Canonical query: name=value pairs joined by '&', sorted by encoded name.
    std::string prev;
    size_t start = q + 1;
    while (start <= url.size()) {
      size_t end = url.find('&', start);
      if (end == std::string::npos) end = url.size();
      const std::string pair = url.substr(start, end - start);
      const size_t eq = pair.find('=');
      FUZZ_CHECK(eq != std::string::npos);
      const std::string name = pair.substr(0, eq);
      (void)Decode(name, false);
      (void)Decode(pair.substr(eq + 1), false);
      FUZZ_CHECK(prev <= name);
      prev = name;
      start = end + 1;
    }
  }
  return 0;
}
