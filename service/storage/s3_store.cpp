// S3 backend: single S3 requests over libcurl, signed with SigV4 (storage_backends.h).
#include <curl/curl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/ckpt/sha256.h"
#include "service/storage/storage_backends.h"
#include "idle_pool.h"
#include "s3_sign.h"
#include "s3_xml.h"

namespace autopar {
namespace {

struct Endpoint {
  std::string scheme;  // "http" or "https"
  std::string host;    // "host[:port]", also the signed Host header
};

Result<Endpoint> ParseEndpoint(const std::string& text) {
  Endpoint e;
  std::string rest;
  if (text.rfind("http://", 0) == 0) {
    e.scheme = "http";
    rest = text.substr(7);
  } else if (text.rfind("https://", 0) == 0) {
    e.scheme = "https";
    rest = text.substr(8);
  } else {
    return Status::Error("s3 endpoint: '" + text + "' must start with http:// or https://");
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.empty() || rest.find('/') != std::string::npos || rest.find('@') != std::string::npos ||
      rest.find_first_of(" \t\r\n?#") != std::string::npos) {
    return Status::Error("s3 endpoint: '" + text + "' must be scheme://host[:port] without a path");
  }
  e.host = rest;
  return e;
}


struct Request {
  std::string method;  // GET HEAD PUT POST DELETE
  std::string path;    // raw, "/bucket/key"
  HttpFields query;    // raw names and values
  HttpFields headers;  // signed and sent; distinct names (s3_sign.h)
  std::string_view body;
  int body_fd = -1;  // >= 0: the body is [body_offset, +body_length) of this file, streamed
  uint64_t body_offset = 0;
  uint64_t body_length = 0;
  bool md5_body = false;  // compute the MD5 of a streamed body (Response::body_md5)
  std::string payload_hash = kEmptyPayloadSha256;
  const RangeSink* sink = nullptr;  // GET: receives 2xx body bytes
  uint64_t sink_offset = 0;
};

struct Response {
  long status = 0;
  std::string body;  // non-sink bodies (XML), capped
  std::string etag;
  curl_off_t content_length = -1;
  std::string body_md5;  // hex MD5 of a streamed request body (Request::md5_body)
};

struct Transfer {
  CURL* handle = nullptr;
  const Request* request = nullptr;
  Response* response = nullptr;
  size_t read_pos = 0;
  uint64_t sink_pos = 0;
  bool sink_failed = false;
  bool bad_range_reply = false;
  bool file_read_failed = false;
  EVP_MD_CTX* md5 = nullptr;
};

size_t ReadCallback(char* buffer, size_t size, size_t nitems, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  if (t->request->body_fd >= 0) {
    size_t want = static_cast<size_t>(
        std::min<uint64_t>(size * nitems, t->request->body_length - t->read_pos));
    if (want == 0) return 0;
    ssize_t n;
    do {
      n = ::pread(t->request->body_fd, buffer, want,
                  static_cast<off_t>(t->request->body_offset + t->read_pos));
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
      t->file_read_failed = true;
      return CURL_READFUNC_ABORT;
    }
    if (t->md5) EVP_DigestUpdate(t->md5, buffer, static_cast<size_t>(n));
    t->read_pos += static_cast<size_t>(n);
    return static_cast<size_t>(n);
  }
  std::string_view body = t->request->body;
  size_t n = std::min(size * nitems, body.size() - t->read_pos);
  std::memcpy(buffer, body.data() + t->read_pos, n);
  t->read_pos += n;
  return n;
}

int SeekCallback(void* userdata, curl_off_t offset, int origin) {
  auto* t = static_cast<Transfer*>(userdata);
  if (t->request->body_fd >= 0) {
    // A streamed body restarts only from its beginning (the running MD5 cannot rewind).
    if (origin != SEEK_SET || offset != 0) return CURL_SEEKFUNC_CANTSEEK;
    if (t->md5) EVP_DigestInit_ex(t->md5, EVP_md5(), nullptr);
    t->read_pos = 0;
    return CURL_SEEKFUNC_OK;
  }
  if (origin != SEEK_SET || offset < 0 || static_cast<size_t>(offset) > t->request->body.size()) {
    return CURL_SEEKFUNC_CANTSEEK;
  }
  t->read_pos = static_cast<size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

size_t WriteCallback(char* data, size_t size, size_t nmemb, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  size_t n = size * nmemb;
  long status = 0;
  curl_easy_getinfo(t->handle, CURLINFO_RESPONSE_CODE, &status);
  if (t->request->sink && status / 100 == 2) {
    // A 200 to a ranged GET carries the whole object: only usable when the range starts at 0.
    if (status == 200 && t->request->sink_offset != 0) {
      t->bad_range_reply = true;
      return 0;
    }
    if (!(*t->request->sink)(t->request->sink_offset + t->sink_pos, data, n)) {
      t->sink_failed = true;
      return 0;
    }
    t->sink_pos += n;
    return n;
  }
  if (t->response->body.size() < (1u << 20)) t->response->body.append(data, n);
  return n;
}

size_t HeaderCallback(char* data, size_t size, size_t nitems, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  size_t n = size * nitems;
  std::string_view line(data, n);
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == "etag") {
      std::string_view v = line.substr(colon + 1);
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' '))
        v.remove_suffix(1);
      t->response->etag = s3xml::StripQuotes(v);
    }
  }
  return n;
}

// The options that depend on the request's method (a GET needs none): no body for HEAD, the
// body's source for PUT and POST.
void SetUpMethod(CURL* h, const Request& req, Transfer* t) {
  if (req.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (req.method == "PUT") {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, ReadCallback);
    curl_easy_setopt(h, CURLOPT_READDATA, t);
    curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, SeekCallback);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, t);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
                     static_cast<curl_off_t>(req.body_fd >= 0 ? req.body_length : req.body.size()));
    if (req.body_fd >= 0 && req.md5_body) {
      t->md5 = EVP_MD_CTX_new();
      EVP_DigestInit_ex(t->md5, EVP_md5(), nullptr);
    }
  } else if (req.method == "POST") {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  } else if (req.method == "DELETE") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
  }
}

// The hex MD5 of a streamed body; frees `md5`.
std::string FinishMd5(EVP_MD_CTX* md5) {
  Md5Digest d{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(md5, d.data(), &len);
  EVP_MD_CTX_free(md5);
  return HexEncode(d);
}

bool RetryableCurlCode(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_SEND_FAIL_REWIND:
      return true;
    default:
      return false;
  }
}

// Classifies an S3 error reply.
StoreStatus FromHttp(long status, const std::string& body, const std::string& what) {
  auto err = s3xml::ParseError(body);
  std::string code = err ? err->code : "";
  std::string msg = "HTTP " + std::to_string(status) + (code.empty() ? "" : " " + code) +
                    (err && !err->message.empty() ? ": " + err->message : "") + " (" + what + ")";
  if (code == "NoSuchBucket") return StoreStatus::Fatal(msg);
  if (status == 404) return StoreStatus::NotFound(msg);
  if (status >= 500 || status == 429 || status == 408 || code == "RequestTimeout" ||
      code == "BadDigest" || code == "SlowDown" || code == "InternalError") {
    return StoreStatus::Retryable(msg);
  }
  return StoreStatus::Fatal(msg);
}

class S3Store : public ObjectStore {
 public:
  S3Store(CheckpointUri uri, S3Config config, Endpoint endpoint)
      : uri_(std::move(uri)), config_(std::move(config)), endpoint_(std::move(endpoint)) {}

  std::string Describe() const override { return uri_.ToString(); }
  bool UsesMd5() const override { return config_.content_md5; }

  StoreStatus PutObject(const std::string& key, std::string_view data,
                        const Md5Digest& md5) override {
    Request req;
    req.method = "PUT";
    req.path = ObjectPath(key);
    req.body = data;
    req.payload_hash = PayloadHash(data);
    if (config_.content_md5) req.headers.emplace_back("content-md5", Base64Encode(md5));
    Response resp;
    StoreStatus s = Perform(req, &resp, "PutObject");
    if (!s.ok()) return s;
    return CheckEtag(resp.etag, md5, "PutObject");
  }

  bool ReadsFiles() const override { return true; }

  StoreStatus PutObjectFromFile(const std::string& key, int fd, uint64_t length) override {
    Request req;
    req.method = "PUT";
    req.path = ObjectPath(key);
    std::string etag;
    return PutFromFile(&req, fd, 0, length, "PutObject", &etag);
  }

  StoreStatus UploadPartFromFile(const std::string& key, const std::string& upload_id,
                                 int part_number, uint64_t offset, int fd, uint64_t length,
                                 std::string* etag) override {
    Request req;
    req.method = "PUT";
    req.path = ObjectPath(key);
    req.query = {{"partNumber", std::to_string(part_number)}, {"uploadId", upload_id}};
    return PutFromFile(&req, fd, offset, length, "UploadPart " + std::to_string(part_number), etag);
  }

  StoreStatus CreateUpload(const std::string& key, std::string* upload_id) override {
    Request req;
    req.method = "POST";
    req.path = ObjectPath(key);
    req.query = {{"uploads", ""}};
    Response resp;
    StoreStatus s = Perform(req, &resp, "CreateMultipartUpload");
    if (!s.ok()) return s;
    auto id = s3xml::ParseUploadId(resp.body);
    if (!id) {
      return StoreStatus::Retryable("CreateMultipartUpload: no UploadId in the reply");
    }
    *upload_id = *id;
    return StoreStatus::Ok();
  }

  StoreStatus UploadPart(const std::string& key, const std::string& upload_id, int part_number,
                         uint64_t /*offset*/, std::string_view data, const Md5Digest& md5,
                         std::string* etag) override {
    Request req;
    req.method = "PUT";
    req.path = ObjectPath(key);
    req.query = {{"partNumber", std::to_string(part_number)}, {"uploadId", upload_id}};
    req.body = data;
    req.payload_hash = PayloadHash(data);
    if (config_.content_md5) req.headers.emplace_back("content-md5", Base64Encode(md5));
    Response resp;
    std::string what = "UploadPart " + std::to_string(part_number);
    StoreStatus s = Perform(req, &resp, what);
    if (!s.ok()) return s;
    if (resp.etag.empty()) return StoreStatus::Retryable(what + ": no ETag in the reply");
    *etag = resp.etag;
    return CheckEtag(resp.etag, md5, what);
  }

  StoreStatus CompleteUpload(const std::string& key, const std::string& upload_id,
                             const std::vector<std::string>& part_etags,
                             std::string* etag) override {
    std::string body = s3xml::CompleteMultipartBody(part_etags);
    Request req;
    req.method = "POST";
    req.path = ObjectPath(key);
    req.query = {{"uploadId", upload_id}};
    req.body = body;
    req.payload_hash = Sha256Hex(body);
    req.headers.emplace_back("content-type", "application/xml");
    Response resp;
    StoreStatus s = Perform(req, &resp, "CompleteMultipartUpload");
    if (!s.ok()) return s;
    auto completed = s3xml::ParseCompletedEtag(resp.body);
    if (!completed) {
      return StoreStatus::Retryable("CompleteMultipartUpload: the reply is not a "
                                    "CompleteMultipartUploadResult");
    }
    *etag = *completed;
    return StoreStatus::Ok();
  }

  StoreStatus AbortUpload(const std::string& key, const std::string& upload_id) override {
    Request req;
    req.method = "DELETE";
    req.path = ObjectPath(key);
    req.query = {{"uploadId", upload_id}};
    Response resp;
    StoreStatus s = Perform(req, &resp, "AbortMultipartUpload");
    if (s.code == StoreStatus::Code::kNotFound) return StoreStatus::Ok();
    return s;
  }

  StoreStatus GetRange(const std::string& key, uint64_t offset, uint64_t length,
                       const RangeSink& sink) override {
    if (length == 0) return StoreStatus::Ok();
    Request req;
    req.method = "GET";
    req.path = ObjectPath(key);
    req.headers.emplace_back(
        "range", "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1));
    req.sink = &sink;
    req.sink_offset = offset;
    Response resp;
    return Perform(req, &resp, "GetObject");
  }

  StoreStatus Head(const std::string& key, ObjectInfo* info) override {
    Request req;
    req.method = "HEAD";
    req.path = ObjectPath(key);
    Response resp;
    StoreStatus s = Perform(req, &resp, "HeadObject");
    if (!s.ok()) return s;
    if (resp.content_length < 0) return StoreStatus::Retryable("HeadObject: no Content-Length");
    *info = {key, static_cast<uint64_t>(resp.content_length), resp.etag};
    return StoreStatus::Ok();
  }

  StoreStatus List(const std::string& prefix, std::vector<ObjectInfo>* objects) override {
    std::string root = RootPrefix();
    std::string token;
    for (;;) {
      Request req;
      req.method = "GET";
      req.path = "/" + uri_.bucket;
      req.query = {{"list-type", "2"}, {"prefix", root + prefix}, {"max-keys", "1000"}};
      if (!token.empty()) req.query.emplace_back("continuation-token", token);
      Response resp;
      StoreStatus s = Perform(req, &resp, "ListObjectsV2");
      if (!s.ok()) return s;
      std::optional<s3xml::ListPage> parsed = s3xml::ParseListV2(resp.body);
      if (!parsed) return StoreStatus::Retryable("ListObjectsV2: the reply is not a ListBucketResult");
      s3xml::ListPage& page = *parsed;
      for (auto& o : page.objects) {
        if (o.key.compare(0, root.size(), root) != 0) continue;
        o.key = o.key.substr(root.size());
        objects->push_back(std::move(o));
      }
      if (!page.truncated) break;
      if (page.next_token.empty() || page.next_token == token) {
        return StoreStatus::Retryable(
            "ListObjectsV2: truncated listing without a new continuation token");
      }
      token = page.next_token;
    }
    std::sort(objects->begin(), objects->end(),
              [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    return StoreStatus::Ok();
  }

  StoreStatus Delete(const std::vector<std::string>& keys) override {
    if (keys.empty()) return StoreStatus::Ok();
    if (!multi_delete_unsupported_.load()) {
      std::vector<std::string> full;
      for (const auto& k : keys) full.push_back(RootPrefix() + k);
      std::string body = s3xml::DeleteObjectsBody(full);
      Request req;
      req.method = "POST";
      req.path = "/" + uri_.bucket;
      req.query = {{"delete", ""}};
      req.body = body;
      req.payload_hash = Sha256Hex(body);
      req.headers.emplace_back("content-md5", Base64Encode(Md5Of(body)));
      req.headers.emplace_back("content-type", "application/xml");
      Response resp;
      StoreStatus s = Perform(req, &resp, "DeleteObjects");
      if (s.ok()) {
        auto errors = s3xml::ParseDeleteErrors(resp.body);
        for (const auto& e : errors) {
          if (e.code == "NoSuchKey") continue;
          std::string msg = "DeleteObjects: " + e.key + ": " + e.code + " " + e.message;
          if (e.code == "InternalError" || e.code == "SlowDown") return StoreStatus::Retryable(msg);
          return StoreStatus::Fatal(msg);
        }
        return StoreStatus::Ok();
      }
      // Servers without DeleteObjects answer 501 NotImplemented or 405: fall back to one DELETE
      // per object.
      if (s.message.find("HTTP 501") == std::string::npos &&
          s.message.find("HTTP 405") == std::string::npos &&
          s.message.find("NotImplemented") == std::string::npos) {
        return s;
      }
      multi_delete_unsupported_ = true;
    }
    for (const auto& k : keys) {
      Request req;
      req.method = "DELETE";
      req.path = ObjectPath(k);
      Response resp;
      StoreStatus s = Perform(req, &resp, "DeleteObject");
      if (!s.ok() && s.code != StoreStatus::Code::kNotFound) return s;
    }
    return StoreStatus::Ok();
  }

 private:
  // PUT with the body streamed from a file range; the MD5 is computed while sending and checked
  // against the ETag afterwards (no Content-MD5: it would need a pass over the bytes first).
  StoreStatus PutFromFile(Request* req, int fd, uint64_t offset, uint64_t length,
                          const std::string& what, std::string* etag) {
    req->body_fd = fd;
    req->body_offset = offset;
    req->body_length = length;
    req->md5_body = config_.content_md5;
    req->payload_hash = kUnsignedPayload;
    if (config_.sign_payload) {
      Sha256 h;
      std::string buf(1 << 20, '\0');
      for (uint64_t done = 0; done < length;) {
        size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), length - done));
        ssize_t n = ::pread(fd, buf.data(), want, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return StoreStatus::Fatal(what + ": reading the local file failed");
        h.Update(buf.data(), static_cast<size_t>(n));
        done += static_cast<uint64_t>(n);
      }
      req->payload_hash = h.FinishHex();
    }
    Response resp;
    StoreStatus s = Perform(*req, &resp, what);
    if (!s.ok()) return s;
    if (resp.etag.empty()) return StoreStatus::Retryable(what + ": no ETag in the reply");
    *etag = resp.etag;
    if (config_.content_md5 && IsLowerHex(resp.etag, 32) && resp.etag != resp.body_md5) {
      return StoreStatus::Retryable(what + ": ETag " + resp.etag + " does not match the MD5 of " +
                                    "the bytes sent (" + resp.body_md5 + ")");
    }
    return StoreStatus::Ok();
  }

  std::string RootPrefix() const { return uri_.prefix.empty() ? "" : uri_.prefix + "/"; }
  std::string ObjectPath(const std::string& key) const {
    return "/" + uri_.bucket + "/" + RootPrefix() + key;
  }
  std::string PayloadHash(std::string_view data) const {
    return (config_.sign_payload || data.size() <= (64u << 10)) ? Sha256Hex(data)
                                                                : std::string(kUnsignedPayload);
  }
  StoreStatus CheckEtag(const std::string& etag, const Md5Digest& md5,
                        const std::string& what) const {
    if (config_.content_md5 && IsLowerHex(etag, 32) && etag != HexEncode(md5)) {
      return StoreStatus::Retryable(what + ": ETag " + etag + " does not match the MD5 sent (" +
                                    HexEncode(md5) + ")");
    }
    return StoreStatus::Ok();
  }

  StoreStatus Perform(const Request& req, Response* resp, const std::string& what) {
    std::string url = S3Url(endpoint_.scheme + "://" + endpoint_.host, req.path, req.query);
    HttpFields fields = req.headers;
    if (req.method == "PUT") fields.emplace_back("content-type", "application/octet-stream");
    curl_slist* headers = S3Headers(fields, req.payload_hash, config_.credentials);

    CURL* h = pool_.Take().value_or(nullptr);
    if (!h) h = curl_easy_init();
    if (!h) {
      curl_slist_free_all(headers);
      return StoreStatus::Retryable(what + ": curl_easy_init failed");
    }
    Transfer t;
    t.handle = h;
    t.request = &req;
    t.response = resp;
    SetUp(h, url, headers, &t);
    SetUpMethod(h, req, &t);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
    curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &resp->content_length);
    pool_.Give(h);
    curl_slist_free_all(headers);
    if (t.md5) resp->body_md5 = FinishMd5(t.md5);
    return Outcome(req, *resp, t, rc, what);
  }

  // The handle's options for every request: signing, timeouts, TLS, buffers and the callbacks
  // that read the reply into `t`.
  void SetUp(CURL* h, const std::string& url, curl_slist* headers, Transfer* t) const {
    curl_easy_reset(h);
    SignWithSigV4(h, config_.credentials, config_.region, "s3");
    // Curl sends "Expect: 100-continue" before large bodies; waiting 0 ms for the 100 sends the
    // body at once (no round trip) without removing the header (s3_sign.h says why not).
    curl_easy_setopt(h, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, config_.connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, config_.stall_timeout_s);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024L);
    curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, 2L * 1024L * 1024L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, config_.verify_tls ? 1L : 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, config_.verify_tls ? 2L : 0L);
    if (!config_.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, config_.ca_file.c_str());
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteCallback);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, HeaderCallback);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, t);
  }

  // What the request's status, curl's result and the transfer's flags make of it.
  StoreStatus Outcome(const Request& req, const Response& resp, const Transfer& t, CURLcode rc,
                      const std::string& what) const {
    if (t.file_read_failed) {
      return StoreStatus::Fatal(what + ": reading the local file failed: " + std::strerror(errno));
    }

    if (t.bad_range_reply)
      return StoreStatus::Fatal(what + ": the server ignored the Range header");
    if (t.sink_failed) return StoreStatus::Fatal(what + ": writing the received data failed");
    if (rc != CURLE_OK) {
      std::string msg = what + ": " + curl_easy_strerror(rc) + " (" + endpoint_.scheme + "://" +
                        endpoint_.host + ")";
      return RetryableCurlCode(rc) ? StoreStatus::Retryable(msg) : StoreStatus::Fatal(msg);
    }
    if (resp.status / 100 != 2) return FromHttp(resp.status, resp.body, what);
    // CompleteMultipartUpload (and DeleteObjects) may report errors inside a 200 reply.
    if (req.method == "POST" && s3xml::ParseError(resp.body)) {
      return FromHttp(500, resp.body, what);
    }
    return StoreStatus::Ok();
  }

  CheckpointUri uri_;
  S3Config config_;
  Endpoint endpoint_;
  // Easy handles reused so each keeps its keep-alive connection: at most 16 idle, none idle
  // longer than 30 s (each holds 2.5 MiB of buffers).
  IdlePool<CURL*> pool_{16, std::chrono::seconds(30), [](CURL* h) { curl_easy_cleanup(h); }};
  std::atomic<bool> multi_delete_unsupported_{false};
};

}  // namespace

Result<std::unique_ptr<ObjectStore>> MakeS3Store(const CheckpointUri& uri, const S3Config& config) {
  if (uri.kind != CheckpointUri::Kind::kS3) {
    return Status::Error("--ckpt-upload: '" + uri.ToString() + "' is not an s3:// URI");
  }
  auto endpoint = ParseEndpoint(config.endpoint);
  if (!endpoint.ok()) return endpoint.status();
  if (config.credentials.access_key_id.empty() || config.credentials.secret_access_key.empty()) {
    return Status::Error("s3 credentials: access key id and secret access key must both be set");
  }
  if (config.region.empty()) return Status::Error("s3 region: must not be empty");
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  return std::unique_ptr<ObjectStore>(new S3Store(uri, config, *endpoint));
}

}  // namespace autopar
