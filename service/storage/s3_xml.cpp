#include "s3_xml.h"

#include <cstdlib>

namespace autopar::s3xml {

std::string Escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {
void AppendUtf8(std::string* out, unsigned long cp) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}
}  // namespace

std::string Unescape(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out += text[i];
      continue;
    }
    size_t semi = text.find(';', i);
    if (semi == std::string_view::npos || semi - i > 10) {
      out += text[i];
      continue;
    }
    std::string_view ent = text.substr(i + 1, semi - i - 1);
    if (ent == "amp")
      out += '&';
    else if (ent == "lt")
      out += '<';
    else if (ent == "gt")
      out += '>';
    else if (ent == "quot")
      out += '"';
    else if (ent == "apos")
      out += '\'';
    else if (!ent.empty() && ent[0] == '#') {
      std::string num(ent.substr(1));
      unsigned long cp = (!num.empty() && (num[0] == 'x' || num[0] == 'X'))
                             ? std::strtoul(num.c_str() + 1, nullptr, 16)
                             : std::strtoul(num.c_str(), nullptr, 10);
      AppendUtf8(&out, cp);
    } else {
      out += text.substr(i, semi - i + 1);
    }
    i = semi;
  }
  return out;
}

std::vector<std::string_view> All(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> out;
  std::string open = "<" + std::string(tag);
  std::string close = "</" + std::string(tag) + ">";
  size_t pos = 0;
  while ((pos = xml.find(open, pos)) != std::string_view::npos) {
    size_t after = pos + open.size();
    if (after >= xml.size()) break;
    char c = xml[after];
    if (c != '>' && c != ' ' && c != '\t' && c != '\n' && c != '\r') {  // <KeyCount> is not <Key>
      pos = after;
      continue;
    }
    size_t gt = xml.find('>', after);
    if (gt == std::string_view::npos) break;
    if (xml[gt - 1] == '/') {  // <Tag/>: empty
      out.emplace_back();
      pos = gt + 1;
      continue;
    }
    size_t end = xml.find(close, gt + 1);
    if (end == std::string_view::npos) break;
    out.push_back(xml.substr(gt + 1, end - gt - 1));
    pos = end + close.size();
  }
  return out;
}

std::optional<std::string> First(std::string_view xml, std::string_view tag) {
  auto all = All(xml, tag);
  if (all.empty()) return std::nullopt;
  return Unescape(all.front());
}

std::string StripQuotes(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return std::string(etag);
}

ListPage ParseListV2(std::string_view xml) {
  ListPage page;
  for (std::string_view c : All(xml, "Contents")) {
    ObjectInfo info;
    info.key = First(c, "Key").value_or("");
    info.size = std::strtoull(First(c, "Size").value_or("0").c_str(), nullptr, 10);
    info.etag = StripQuotes(First(c, "ETag").value_or(""));
    page.objects.push_back(std::move(info));
  }
  page.truncated = First(xml, "IsTruncated").value_or("false") == "true";
  page.next_token = First(xml, "NextContinuationToken").value_or("");
  return page;
}

std::optional<S3Error> ParseError(std::string_view xml) {
  auto errors = All(xml, "Error");
  if (errors.empty()) return std::nullopt;
  return S3Error{First(errors.front(), "Code").value_or(""),
                 First(errors.front(), "Message").value_or(""),
                 First(errors.front(), "Key").value_or("")};
}

std::vector<S3Error> ParseDeleteErrors(std::string_view xml) {
  std::vector<S3Error> out;
  for (std::string_view e : All(xml, "Error")) {
    out.push_back({First(e, "Code").value_or(""), First(e, "Message").value_or(""),
                   First(e, "Key").value_or("")});
  }
  return out;
}

std::string CompleteMultipartBody(const std::vector<std::string>& part_etags) {
  std::string out = "<CompleteMultipartUpload>";
  for (size_t i = 0; i < part_etags.size(); ++i) {
    out += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>&quot;" +
           Escape(part_etags[i]) + "&quot;</ETag></Part>";
  }
  out += "</CompleteMultipartUpload>";
  return out;
}

std::string DeleteObjectsBody(const std::vector<std::string>& full_keys) {
  std::string out = "<Delete><Quiet>true</Quiet>";
  for (const auto& k : full_keys) out += "<Object><Key>" + Escape(k) + "</Key></Object>";
  out += "</Delete>";
  return out;
}

}  // namespace autopar::s3xml
