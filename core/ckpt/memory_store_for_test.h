// Test-only: an in-memory ObjectStore and a failure-injecting wrapper, shared by the ckpt tests.
#pragma once

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/ckpt/storage.h"

namespace autopar {

class MemoryStore : public ObjectStore {
 public:
  std::string Describe() const override { return "mem://test"; }
  StoreStatus PutObject(const std::string& key, std::string_view data,
                        const Md5Digest& md5) override {
    if (Md5Of(data) != md5) return StoreStatus::Fatal("BadDigest");
    std::lock_guard<std::mutex> l(mu);
    objects[key] = std::string(data);
    put_order.push_back(key);
    return StoreStatus::Ok();
  }
  StoreStatus CreateUpload(const std::string& key, std::string* upload_id) override {
    std::lock_guard<std::mutex> l(mu);
    *upload_id = "u" + std::to_string(++next_upload);
    uploads[*upload_id].key = key;
    return StoreStatus::Ok();
  }
  StoreStatus UploadPart(const std::string& key, const std::string& upload_id, int part_number,
                         uint64_t offset, std::string_view data, const Md5Digest& md5,
                         std::string* etag) override {
    std::lock_guard<std::mutex> l(mu);
    if (expected_part_size &&
        offset != static_cast<uint64_t>(part_number - 1) * expected_part_size) {
      return StoreStatus::Fatal("bad offset");
    }
    auto it = uploads.find(upload_id);
    if (it == uploads.end() || it->second.key != key) return StoreStatus::NotFound("NoSuchUpload");
    if (Md5Of(data) != md5) return StoreStatus::Fatal("BadDigest");
    it->second.parts[part_number] = std::string(data);
    *etag = HexEncode(md5);
    return StoreStatus::Ok();
  }
  StoreStatus CompleteUpload(const std::string& key, const std::string& upload_id,
                             const std::vector<std::string>& part_etags,
                             std::string* etag) override {
    std::lock_guard<std::mutex> l(mu);
    auto it = uploads.find(upload_id);
    if (it == uploads.end()) return StoreStatus::NotFound("NoSuchUpload");
    std::string all;
    std::vector<Md5Digest> md5s;
    for (size_t i = 0; i < part_etags.size(); ++i) {
      auto p = it->second.parts.find(static_cast<int>(i + 1));
      if (p == it->second.parts.end() || HexEncode(Md5Of(p->second)) != part_etags[i]) {
        return StoreStatus::Fatal("InvalidPart " + std::to_string(i + 1));
      }
      all += p->second;
      md5s.push_back(Md5Of(p->second));
    }
    objects[key] = all;
    *etag = MultipartEtag(md5s);
    uploads.erase(it);
    return StoreStatus::Ok();
  }
  StoreStatus AbortUpload(const std::string&, const std::string& upload_id) override {
    std::lock_guard<std::mutex> l(mu);
    aborted.insert(upload_id);
    uploads.erase(upload_id);
    return StoreStatus::Ok();
  }
  StoreStatus GetRange(const std::string& key, uint64_t offset, uint64_t length,
                       const RangeSink& sink) override {
    std::string data;
    {
      std::lock_guard<std::mutex> l(mu);
      auto it = objects.find(key);
      if (it == objects.end()) return StoreStatus::NotFound("NoSuchKey");
      data = it->second.substr(offset, length);
    }
    // Deliver in two pieces, like a network would.
    size_t half = data.size() / 2;
    if (!sink(offset, data.data(), half) ||
        !sink(offset + half, data.data() + half, data.size() - half)) {
      return StoreStatus::Fatal("sink refused");
    }
    return StoreStatus::Ok();
  }
  StoreStatus Head(const std::string& key, ObjectInfo* info) override {
    std::lock_guard<std::mutex> l(mu);
    auto it = objects.find(key);
    if (it == objects.end()) return StoreStatus::NotFound("NoSuchKey");
    *info = {key, it->second.size(), ""};
    return StoreStatus::Ok();
  }
  StoreStatus List(const std::string& prefix, std::vector<ObjectInfo>* out) override {
    std::lock_guard<std::mutex> l(mu);
    for (const auto& [k, v] : objects) {
      if (k.compare(0, prefix.size(), prefix) == 0) out->push_back({k, v.size(), ""});
    }
    return StoreStatus::Ok();
  }
  StoreStatus Delete(const std::vector<std::string>& keys) override {
    std::lock_guard<std::mutex> l(mu);
    max_delete_batch = std::max(max_delete_batch, keys.size());
    for (const auto& k : keys) objects.erase(k);
    return StoreStatus::Ok();
  }

  struct Upload {
    std::string key;
    std::map<int, std::string> parts;
  };
  std::mutex mu;
  std::map<std::string, std::string> objects;
  std::map<std::string, Upload> uploads;
  std::set<std::string> aborted;
  int next_upload = 0;
  size_t max_delete_batch = 0;
  uint64_t expected_part_size = 0;     // checked against UploadPart offsets when set
  std::vector<std::string> put_order;  // keys of PutObject calls, in order
};

// Fails part `part` of every upload (UploadPart and UploadPartFromFile): `times` times (then
// succeeds; negative: always), with `code`. Counts the attempts at that part and every abort.
class FailPart : public ObjectStoreWrapper {
 public:
  FailPart(ObjectStore* t, int part, int times, StoreStatus::Code code)
      : ObjectStoreWrapper(t), part_(part), times_(times), code_(code) {}
  StoreStatus UploadPart(const std::string& key, const std::string& upload_id, int part_number,
                         uint64_t offset, std::string_view data, const Md5Digest& md5,
                         std::string* etag) override {
    if (Inject(part_number)) return {code_, "HTTP 500 InternalError (injected)"};
    return ObjectStoreWrapper::UploadPart(key, upload_id, part_number, offset, data, md5, etag);
  }
  StoreStatus UploadPartFromFile(const std::string& key, const std::string& upload_id,
                                 int part_number, uint64_t offset, int fd, uint64_t length,
                                 std::string* etag) override {
    if (Inject(part_number)) return {code_, "HTTP 500 InternalError (injected)"};
    return ObjectStoreWrapper::UploadPartFromFile(key, upload_id, part_number, offset, fd, length,
                                                  etag);
  }
  StoreStatus AbortUpload(const std::string& key, const std::string& upload_id) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      ++aborts;
    }
    return ObjectStoreWrapper::AbortUpload(key, upload_id);
  }
  int attempts = 0;
  int aborts = 0;

 private:
  // True when this attempt at `part_number` is to fail.
  bool Inject(int part_number) {
    if (part_number != part_) return false;
    std::lock_guard<std::mutex> l(mu_);
    ++attempts;
    if (times_ == 0) return false;
    if (times_ > 0) --times_;
    return true;
  }
  std::mutex mu_;
  int part_, times_;
  StoreStatus::Code code_;
};

}  // namespace autopar
