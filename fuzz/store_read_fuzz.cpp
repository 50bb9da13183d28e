// What autopard reads from a store whose content a user controls (a file:// store is theirs):
// listings with any keys and sizes, manifests of any size and shape. The input is the store, one
// object per line "KEY<TAB>SIZE<TAB>CONTENT": SIZE is what the store claims (Head, listings),
// which need not be the content's length (a sparse terabyte "manifest", an object that changed).
// Listing the steps, reading each step's manifest and completing a step must stay within what
// was read: no allocation of a claimed size (libFuzzer's -malloc_limit_mb catches one), no
// crash, and a step marked COMPLETE only with every rank's files listed.
#include <algorithm>
#include <map>
#include <mutex>

#include "core/ckpt/ckpt_layout.h"
#include "core/ckpt/ckpt_store.h"
#include "core/ckpt/storage.h"
#include "fuzz/fuzz_util.h"

namespace autopar {
namespace {

class ClaimingStore : public ObjectStore {
 public:
  struct Object {
    uint64_t claimed = 0;
    std::string data;
  };
  std::string Describe() const override { return "fuzz://store"; }
  StoreStatus PutObject(const std::string& key, std::string_view data, const Md5Digest&) override {
    objects[key] = {data.size(), std::string(data)};
    return StoreStatus::Ok();
  }
  StoreStatus CreateUpload(const std::string&, std::string*) override { return StoreStatus::Fatal("no"); }
  StoreStatus UploadPart(const std::string&, const std::string&, int, uint64_t, std::string_view,
                         const Md5Digest&, std::string*) override {
    return StoreStatus::Fatal("no");
  }
  StoreStatus CompleteUpload(const std::string&, const std::string&, const std::vector<std::string>&,
                             std::string*) override {
    return StoreStatus::Fatal("no");
  }
  StoreStatus AbortUpload(const std::string&, const std::string&) override { return StoreStatus::Ok(); }
  StoreStatus GetRange(const std::string& key, uint64_t offset, uint64_t length,
                       const RangeSink& sink) override {
    auto it = objects.find(key);
    if (it == objects.end()) return StoreStatus::NotFound("NoSuchKey");
    const std::string& d = it->second.data;
    // A store may send what it has, more or less than asked; in pieces.
    uint64_t end = std::min<uint64_t>(d.size(), offset + length + 3);
    for (uint64_t at = offset; at < end; at += 7) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(7, end - at));
      if (!sink(at, d.data() + at, n)) return StoreStatus::Fatal("sink refused");
    }
    return StoreStatus::Ok();
  }
  StoreStatus Head(const std::string& key, ObjectInfo* info) override {
    auto it = objects.find(key);
    if (it == objects.end()) return StoreStatus::NotFound("NoSuchKey");
    *info = {key, it->second.claimed, ""};
    return StoreStatus::Ok();
  }
  StoreStatus List(const std::string& prefix, std::vector<ObjectInfo>* out) override {
    for (const auto& [k, o] : objects) {
      if (k.compare(0, prefix.size(), prefix) == 0) out->push_back({k, o.claimed, ""});
    }
    return StoreStatus::Ok();
  }
  StoreStatus Delete(const std::vector<std::string>& keys) override {
    for (const auto& k : keys) objects.erase(k);
    return StoreStatus::Ok();
  }
  std::map<std::string, Object> objects;
};

}  // namespace
}  // namespace autopar

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autopar;
  ClaimingStore store;
  for (const std::string& line : fuzz::SplitLines(fuzz::AsString(data, size))) {
    const size_t t1 = line.find('\t');
    const size_t t2 = t1 == std::string::npos ? std::string::npos : line.find('\t', t1 + 1);
    if (t2 == std::string::npos) continue;
    ClaimingStore::Object o;
    o.claimed = std::strtoull(line.substr(t1 + 1, t2 - t1 - 1).c_str(), nullptr, 10);
    o.data = line.substr(t2 + 1);
    store.objects[line.substr(0, t1)] = std::move(o);
  }
  TransferOptions opts;
  opts.backoff.max_attempts = 1;
  opts.clock.sleep = [](std::chrono::milliseconds) {};
  opts.max_small_object = 1 << 20;
  auto steps = ListSteps(store, "", opts);
  if (!steps.ok()) return 0;
  for (const StepRef& s : *steps) {
    auto m = ReadStepManifest(store, s.job_id, s.step, opts);
    if (m.ok()) FUZZ_CHECK(CheckCompleteness(*m).complete);
    auto c = TryCompleteStep(store, s.job_id, s.step, opts);
    if (!c.ok() || !c->complete) continue;
    // Complete: the manifest (written now or found) names only files that are listed.
    auto written = ReadStepManifest(store, s.job_id, s.step, opts);
    if (!written.ok() || s.has_manifest) continue;
    for (const auto& [rank, entry] : written->ranks) {
      for (const auto& f : entry.files) {
        FUZZ_CHECK(store.objects.count(RankFileKey(s.job_id, s.step, rank, f.path)) == 1);
      }
    }
  }
  return 0;
}
