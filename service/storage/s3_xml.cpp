#include "s3_xml.h"

#include <tinyxml2.h>

#include <cstdlib>

namespace autopar::s3xml {
namespace {

using tinyxml2::XMLDocument;
using tinyxml2::XMLElement;

// The root element when `xml` parses and its root is named `root`, else nullptr.
const XMLElement* Root(XMLDocument* doc, std::string_view xml, const char* root) {
  if (doc->Parse(xml.data(), xml.size()) != tinyxml2::XML_SUCCESS) return nullptr;
  const XMLElement* e = doc->RootElement();
  return e && std::string_view(e->Name()) == root ? e : nullptr;
}

std::string Text(const XMLElement* parent, const char* child) {
  const XMLElement* e = parent->FirstChildElement(child);
  const char* text = e ? e->GetText() : nullptr;
  return text ? text : "";
}

S3Error ErrorOf(const XMLElement* e) {
  return S3Error{Text(e, "Code"), Text(e, "Message"), Text(e, "Key")};
}

}  // namespace

std::string StripQuotes(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return std::string(etag);
}

std::optional<ListPage> ParseListV2(std::string_view xml) {
  XMLDocument doc;
  const XMLElement* root = Root(&doc, xml, "ListBucketResult");
  if (!root) return std::nullopt;
  ListPage page;
  for (const XMLElement* c = root->FirstChildElement("Contents"); c;
       c = c->NextSiblingElement("Contents")) {
    ObjectInfo info;
    info.key = Text(c, "Key");
    info.size = std::strtoull(Text(c, "Size").c_str(), nullptr, 10);
    info.etag = StripQuotes(Text(c, "ETag"));
    page.objects.push_back(std::move(info));
  }
  page.truncated = Text(root, "IsTruncated") == "true";
  page.next_token = Text(root, "NextContinuationToken");
  return page;
}

std::optional<std::string> ParseUploadId(std::string_view xml) {
  XMLDocument doc;
  const XMLElement* root = Root(&doc, xml, "InitiateMultipartUploadResult");
  std::string id = root ? Text(root, "UploadId") : "";
  if (id.empty()) return std::nullopt;
  return id;
}

std::optional<std::string> ParseCompletedEtag(std::string_view xml) {
  XMLDocument doc;
  const XMLElement* root = Root(&doc, xml, "CompleteMultipartUploadResult");
  if (!root) return std::nullopt;
  return StripQuotes(Text(root, "ETag"));
}

std::optional<S3Error> ParseError(std::string_view xml) {
  XMLDocument doc;
  const XMLElement* root = Root(&doc, xml, "Error");
  if (!root) return std::nullopt;
  return ErrorOf(root);
}

std::vector<S3Error> ParseDeleteErrors(std::string_view xml) {
  std::vector<S3Error> out;
  XMLDocument doc;
  const XMLElement* root = Root(&doc, xml, "DeleteResult");
  if (!root) return out;
  for (const XMLElement* e = root->FirstChildElement("Error"); e;
       e = e->NextSiblingElement("Error")) {
    out.push_back(ErrorOf(e));
  }
  return out;
}

std::string CompleteMultipartBody(const std::vector<std::string>& part_etags) {
  tinyxml2::XMLPrinter p(nullptr, /*compact=*/true);
  p.OpenElement("CompleteMultipartUpload", /*compactMode=*/true);
  for (size_t i = 0; i < part_etags.size(); ++i) {
    p.OpenElement("Part", /*compactMode=*/true);
    p.OpenElement("PartNumber", /*compactMode=*/true);
    p.PushText(static_cast<int>(i + 1));
    p.CloseElement(/*compactMode=*/true);
    p.OpenElement("ETag", /*compactMode=*/true);
    p.PushText(("\"" + part_etags[i] + "\"").c_str());
    p.CloseElement(/*compactMode=*/true);
    p.CloseElement(/*compactMode=*/true);
  }
  p.CloseElement(/*compactMode=*/true);
  return std::string(p.CStr(), static_cast<size_t>(p.CStrSize() - 1));
}

std::string DeleteObjectsBody(const std::vector<std::string>& full_keys) {
  tinyxml2::XMLPrinter p(nullptr, /*compact=*/true);
  p.OpenElement("Delete", /*compactMode=*/true);
  p.OpenElement("Quiet", /*compactMode=*/true);
  p.PushText("true");
  p.CloseElement(/*compactMode=*/true);
  for (const auto& k : full_keys) {
    p.OpenElement("Object", /*compactMode=*/true);
    p.OpenElement("Key", /*compactMode=*/true);
    p.PushText(k.c_str());
    p.CloseElement(/*compactMode=*/true);
    p.CloseElement(/*compactMode=*/true);
  }
  p.CloseElement(/*compactMode=*/true);
  return std::string(p.CStr(), static_cast<size_t>(p.CStrSize() - 1));
}

}  // namespace autopar::s3xml
