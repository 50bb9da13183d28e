#include "core/ckpt/ckpt_manifest.h"

#include <json/json.h>

#include <algorithm>
#include <memory>
#include <set>
#include <sstream>

#include "core/ckpt/ckpt_layout.h"
#include "core/ckpt/sha256.h"

namespace autopar {
namespace {

constexpr int kMaxWorldSize = 1000000;

std::string Where(std::string_view origin, const std::string& field) {
  return std::string(origin) + ": " + field;
}

std::string JoinInts(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out;
}

}  // namespace

uint64_t CheckpointManifest::TotalBytes() const {
  uint64_t total = 0;
  for (const auto& [rank, entry] : ranks) {
    for (const auto& f : entry.files) total += f.size;
  }
  return total;
}

Status ValidateManifest(const CheckpointManifest& m, std::string_view origin) {
  if (Status s = ValidateJobId(m.job_id); !s.ok())
    return Status::Error(Where(origin, "job_id: " + s.message()));
  if (m.step < 0) return Status::Error(Where(origin, "step: must be >= 0"));
  if (m.world_size < 1 || m.world_size > kMaxWorldSize) {
    return Status::Error(
        Where(origin, "world_size: must be in 1.." + std::to_string(kMaxWorldSize)));
  }
  for (const auto& [rank, entry] : m.ranks) {
    std::string r = "ranks[" + std::to_string(rank) + "]";
    if (rank < 0 || rank >= m.world_size) {
      return Status::Error(
          Where(origin, r + ": rank outside 0.." + std::to_string(m.world_size - 1)));
    }
    std::set<std::string> seen;
    for (size_t i = 0; i < entry.files.size(); ++i) {
      const auto& f = entry.files[i];
      std::string fi = r + ".files[" + std::to_string(i) + "]";
      if (Status s = ValidateRelativePath(f.path); !s.ok())
        return Status::Error(Where(origin, fi + ".path: " + s.message()));
      if (!seen.insert(f.path).second)
        return Status::Error(Where(origin, fi + ".path: duplicate '" + f.path + "'"));
      if (!IsLowerHex(f.sha256, 64))
        return Status::Error(Where(origin, fi + ".sha256: not 64 lowercase hex digits"));
    }
  }
  return Status::Ok();
}

std::string ManifestToJson(const CheckpointManifest& m) {
  Json::Value root(Json::objectValue);
  root["format"] = kManifestFormat;
  root["job_id"] = m.job_id;
  root["step"] = Json::Int64(m.step);
  root["world_size"] = m.world_size;
  Json::Value ranks(Json::arrayValue);
  for (const auto& [rank, entry] : m.ranks) {
    Json::Value r(Json::objectValue);
    r["rank"] = rank;
    r["verified"] = entry.verified;
    std::vector<CheckpointFile> files = entry.files;
    std::sort(files.begin(), files.end(),
              [](const CheckpointFile& a, const CheckpointFile& b) { return a.path < b.path; });
    Json::Value fs(Json::arrayValue);
    for (const auto& f : files) {
      Json::Value jf(Json::objectValue);
      jf["path"] = f.path;
      jf["size"] = Json::UInt64(f.size);
      jf["sha256"] = f.sha256;
      if (f.mode != 0) jf["mode"] = Json::UInt(f.mode);
      fs.append(jf);
    }
    r["files"] = fs;
    ranks.append(r);
  }
  root["ranks"] = ranks;
  Json::StreamWriterBuilder w;
  w["indentation"] = " ";
  return Json::writeString(w, root) + "\n";
}

namespace {

// `json` as a JSON object; errors name `origin`.
Result<Json::Value> ParseObject(std::string_view json, std::string_view origin) {
  Json::CharReaderBuilder builder;
  builder["collectComments"] = false;
  builder["rejectDupKeys"] = true;
  std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
  Json::Value root;
  std::string errs;
  if (!reader->parse(json.data(), json.data() + json.size(), &root, &errs)) {
    std::string first = errs.substr(0, errs.find('\n', errs.find('\n') + 1));
    while (!first.empty() && (first.back() == '\n' || first.back() == ' ')) first.pop_back();
    for (char& c : first)
      if (c == '\n') c = ' ';
    return Status::Error(std::string(origin) + ": invalid JSON: " + first);
  }
  if (!root.isObject()) return Status::Error(std::string(origin) + ": not a JSON object");
  return root;
}

// The member `key` of `obj`, present and of the type `is` tests (`type` names it in the error);
// `where` is the path to `obj` ("ranks[0].").
Result<Json::Value> Need(std::string_view origin, const Json::Value& obj, const char* key,
                         const std::string& where, bool (Json::Value::*is)() const,
                         const char* type) {
  if (!obj.isMember(key)) return Status::Error(Where(origin, where + key + ": missing"));
  const Json::Value& v = obj[key];
  if (!(v.*is)()) return Status::Error(Where(origin, where + key + ": expected " + type));
  return v;
}

// One entry of a rank's files; `where` is its path ("ranks[0].files[1].").
Result<CheckpointFile> ParseFile(std::string_view origin, const Json::Value& f,
                                 const std::string& where) {
  if (!f.isObject())
    return Status::Error(Where(origin, where.substr(0, where.size() - 1) + ": expected an object"));
  auto path = Need(origin, f, "path", where, &Json::Value::isString, "a string");
  if (!path.ok()) return path.status();
  auto size = Need(origin, f, "size", where, &Json::Value::isUInt64, "a non-negative integer");
  if (!size.ok()) return size.status();
  auto sha = Need(origin, f, "sha256", where, &Json::Value::isString, "a string");
  if (!sha.ok()) return sha.status();
  uint32_t mode = 0;
  if (f.isMember("mode")) {
    if (!f["mode"].isUInt() || f["mode"].asUInt() > 0777) {
      return Status::Error(Where(origin, where + "mode: expected permission bits in [0, 0777]"));
    }
    mode = f["mode"].asUInt();
  }
  return CheckpointFile{path->asString(), size->asUInt64(), sha->asString(), mode};
}

// ranks[i] into `m`, its files sorted by path; a rank listed twice is an error.
Status ParseRank(std::string_view origin, const Json::Value& r, Json::ArrayIndex i,
                 CheckpointManifest* m) {
  std::string where = "ranks[" + std::to_string(i) + "].";
  if (!r.isObject())
    return Status::Error(Where(origin, "ranks[" + std::to_string(i) + "]: expected an object"));
  auto rank = Need(origin, r, "rank", where, &Json::Value::isInt, "an integer");
  if (!rank.ok()) return rank.status();
  auto verified = Need(origin, r, "verified", where, &Json::Value::isBool, "true or false");
  if (!verified.ok()) return verified.status();
  auto files = Need(origin, r, "files", where, &Json::Value::isArray, "an array");
  if (!files.ok()) return files.status();
  RankEntry entry;
  entry.verified = verified->asBool();
  for (Json::ArrayIndex j = 0; j < files->size(); ++j) {
    auto file = ParseFile(origin, (*files)[j], where + "files[" + std::to_string(j) + "].");
    if (!file.ok()) return file.status();
    entry.files.push_back(std::move(*file));
  }
  std::sort(entry.files.begin(), entry.files.end(),
            [](const CheckpointFile& a, const CheckpointFile& b) { return a.path < b.path; });
  if (!m->ranks.emplace(rank->asInt(), std::move(entry)).second) {
    return Status::Error(
        Where(origin, where + "rank: rank " + std::to_string(rank->asInt()) + " listed twice"));
  }
  return Status::Ok();
}

// The manifest's format (which must be this one's), job, step and world size into `m`.
Status ParseHeader(std::string_view origin, const Json::Value& root, CheckpointManifest* m) {
  auto format = Need(origin, root, "format", "", &Json::Value::isString, "a string");
  if (!format.ok()) return format.status();
  if (format->asString() != kManifestFormat) {
    return Status::Error(
        Where(origin, "format: '" + format->asString() + "' is not '" + kManifestFormat + "'"));
  }
  auto job = Need(origin, root, "job_id", "", &Json::Value::isString, "a string");
  if (!job.ok()) return job.status();
  m->job_id = job->asString();
  auto step = Need(origin, root, "step", "", &Json::Value::isInt64, "an integer");
  if (!step.ok()) return step.status();
  m->step = step->asInt64();
  auto world = Need(origin, root, "world_size", "", &Json::Value::isInt, "an integer");
  if (!world.ok()) return world.status();
  m->world_size = world->asInt();
  return Status::Ok();
}

}  // namespace

Result<CheckpointManifest> ParseManifest(std::string_view json, std::string_view origin) {
  auto root = ParseObject(json, origin);
  if (!root.ok()) return root.status();
  CheckpointManifest m;
  if (Status s = ParseHeader(origin, *root, &m); !s.ok()) return s;
  auto ranks = Need(origin, *root, "ranks", "", &Json::Value::isArray, "an array");
  if (!ranks.ok()) return ranks.status();
  for (Json::ArrayIndex i = 0; i < ranks->size(); ++i) {
    if (Status s = ParseRank(origin, (*ranks)[i], i, &m); !s.ok()) return s;
  }
  if (Status s = ValidateManifest(m, origin); !s.ok()) return s;
  return m;
}

Status MergeManifest(CheckpointManifest* step, const CheckpointManifest& part) {
  if (step->world_size == 0 && step->ranks.empty()) {
    step->job_id = part.job_id;
    step->step = part.step;
    step->world_size = part.world_size;
  }
  std::string what = "job " + part.job_id + " step " + std::to_string(part.step);
  if (step->job_id != part.job_id || step->step != part.step) {
    return Status::Error("cannot merge manifest of " + what + " into job " + step->job_id +
                         " step " + std::to_string(step->step));
  }
  if (step->world_size != part.world_size) {
    return Status::Error(what + ": world size " + std::to_string(part.world_size) +
                         " differs from " + std::to_string(step->world_size) +
                         " committed earlier for this step");
  }
  for (const auto& [rank, entry] : part.ranks) {
    auto it = step->ranks.find(rank);
    if (it == step->ranks.end()) {
      step->ranks.emplace(rank, entry);
    } else if (!(it->second == entry)) {
      return Status::Error(what + ": rank " + std::to_string(rank) +
                           " was committed twice with different files");
    }
  }
  return Status::Ok();
}

Completeness CheckCompleteness(const CheckpointManifest& m) {
  Completeness c;
  for (int r = 0; r < m.world_size; ++r) {
    auto it = m.ranks.find(r);
    if (it == m.ranks.end()) {
      c.missing_ranks.push_back(r);
    } else if (!it->second.verified) {
      c.unverified_ranks.push_back(r);
    }
  }
  c.complete = m.world_size > 0 && c.missing_ranks.empty() && c.unverified_ranks.empty();
  return c;
}

std::string Completeness::Describe() const {
  if (complete) return "complete";
  std::string out = "incomplete";
  std::string sep = ": ";
  if (!missing_ranks.empty()) {
    out += sep + (missing_ranks.size() == 1 ? "rank " : "ranks ") + JoinInts(missing_ranks) +
           " missing";
    sep = "; ";
  }
  if (!unverified_ranks.empty()) {
    out += sep + (unverified_ranks.size() == 1 ? "rank " : "ranks ") + JoinInts(unverified_ranks) +
           " not verified";
    sep = "; ";
  }
  if (!missing_files.empty()) {
    out += sep + std::to_string(missing_files.size()) + " file(s) no longer in storage (" +
           missing_files.front() + (missing_files.size() > 1 ? ", ..." : "") + ")";
  }
  return out;
}

bool IsDcpStep(const CheckpointManifest& m) {
  auto rank0 = m.ranks.find(0);
  if (rank0 == m.ranks.end()) return false;
  bool metadata = false, data = false;
  for (const CheckpointFile& f : rank0->second.files) {
    metadata = metadata || f.path == ".metadata";
    data = data || (f.path.rfind("__", 0) == 0 && f.path.size() > 7 &&
                    f.path.compare(f.path.size() - 7, 7, ".distcp") == 0 && f.path.find('/') == std::string::npos);
  }
  return metadata && data;
}

}  // namespace autopar
