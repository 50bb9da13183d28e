#include "core/ckpt/ckpt_layout.h"

#include "core/text.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <tuple>

namespace autopar {
namespace {

std::optional<int64_t> ParseDecimal(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  if (s.size() > 1 && s[0] == '0') return std::nullopt;  // one spelling per number
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// "<tag>-<value>" -> value.
std::optional<std::string_view> After(std::string_view seg, std::string_view tag) {
  if (seg.substr(0, tag.size()) != tag) return std::nullopt;
  return seg.substr(tag.size());
}

}  // namespace

Status ValidateJobId(std::string_view job_id) {
  bool ok = !job_id.empty() && job_id.size() <= 64 && job_id != "." && job_id != "..";
  for (char c : job_id) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-')) {
      ok = false;
    }
  }
  if (!ok) {
    return Status::Error("invalid job id '" + std::string(job_id) +
                         "': use 1-64 letters, digits, '_', '.' and '-'");
  }
  return Status::Ok();
}

Status ValidateRelativePath(std::string_view path) {
  // The path is quoted escaped: this error reaches the program, its job's output and logs.
  auto bad = [&](const std::string& why) {
    return Status::Error("invalid checkpoint file path '" + EscapeControl(path) + "': " + why);
  };
  if (path.empty()) return bad("empty");
  if (path.size() > 1024) return bad("longer than 1024 bytes");
  if (path.front() == '/') return bad("must be relative to the checkpoint directory");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view seg = path.substr(start, end - start);
    if (seg.empty()) return bad("empty path segment");
    if (seg == "." || seg == "..") return bad("'" + std::string(seg) + "' segment");
    for (size_t i = 0; i < seg.size(); ++i) {
      const auto c = static_cast<unsigned char>(seg[i]);
      // C0, DEL, and C1 as UTF-8 (U+0080..U+009F: 0xC2 0x80..0x9F, an 8-bit CSI among them).
      const bool c1 = c == 0xc2 && i + 1 < seg.size() && static_cast<unsigned char>(seg[i + 1]) >= 0x80 &&
                      static_cast<unsigned char>(seg[i + 1]) <= 0x9f;
      if (c < 0x20 || c == 0x7f || c1) return bad("control character");
    }
    start = end + 1;
  }
  return Status::Ok();
}

std::string JobKeyPrefix(std::string_view job_id) { return "job-" + std::string(job_id) + "/"; }
std::string StepKeyPrefix(std::string_view job_id, int64_t step) {
  return JobKeyPrefix(job_id) + "step-" + std::to_string(step) + "/";
}
std::string RankKeyPrefix(std::string_view job_id, int64_t step, int rank) {
  return StepKeyPrefix(job_id, step) + "rank-" + std::to_string(rank) + "/";
}
std::string RankFileKey(std::string_view job_id, int64_t step, int rank, std::string_view path) {
  return RankKeyPrefix(job_id, step, rank) + std::string(path);
}
std::string RankManifestKey(std::string_view job_id, int64_t step, int rank) {
  return StepKeyPrefix(job_id, step) + "rank-" + std::to_string(rank) + ".json";
}
std::string StepManifestKey(std::string_view job_id, int64_t step) {
  return StepKeyPrefix(job_id, step) + "manifest.json";
}

std::optional<CheckpointKey> ParseCheckpointKey(std::string_view key) {
  // job-J / step-N / (manifest.json | rank-R.json | rank-R/path...)
  size_t s1 = key.find('/');
  if (s1 == std::string_view::npos) return std::nullopt;
  size_t s2 = key.find('/', s1 + 1);
  if (s2 == std::string_view::npos) return std::nullopt;
  auto job = After(key.substr(0, s1), "job-");
  auto step_text = After(key.substr(s1 + 1, s2 - s1 - 1), "step-");
  if (!job || !step_text || !ValidateJobId(*job).ok()) return std::nullopt;
  auto step = ParseDecimal(*step_text);
  if (!step) return std::nullopt;
  CheckpointKey out;
  out.job_id = std::string(*job);
  out.step = *step;
  std::string_view rest = key.substr(s2 + 1);
  if (rest == "manifest.json") {
    out.kind = CheckpointKey::Kind::kStepManifest;
    return out;
  }
  auto rank_part = After(rest, "rank-");
  if (!rank_part) return std::nullopt;
  size_t slash = rank_part->find('/');
  std::string_view rank_text;
  if (slash == std::string_view::npos) {
    if (rank_part->size() < 6 || rank_part->substr(rank_part->size() - 5) != ".json") {
      return std::nullopt;
    }
    rank_text = rank_part->substr(0, rank_part->size() - 5);
    out.kind = CheckpointKey::Kind::kRankManifest;
  } else {
    rank_text = rank_part->substr(0, slash);
    out.path = std::string(rank_part->substr(slash + 1));
    if (!ValidateRelativePath(out.path).ok()) return std::nullopt;
    out.kind = CheckpointKey::Kind::kRankFile;
  }
  auto rank = ParseDecimal(rank_text);
  if (!rank || *rank > 10000000) return std::nullopt;
  out.rank = static_cast<int>(*rank);
  return out;
}

std::vector<StepRef> StepsInListing(const std::vector<ListedObject>& objects,
                                    std::string_view job_id) {
  std::map<std::pair<int64_t, std::string>, StepRef> steps;
  for (const auto& obj : objects) {
    auto key = ParseCheckpointKey(obj.key);
    if (!key) continue;
    if (!job_id.empty() && key->job_id != job_id) continue;
    StepRef& ref = steps[{key->step, key->job_id}];
    ref.job_id = key->job_id;
    ref.step = key->step;
    ref.bytes += obj.size;
    if (key->kind == CheckpointKey::Kind::kStepManifest) ref.has_manifest = true;
    if (key->kind == CheckpointKey::Kind::kRankManifest) ref.rank_manifests.push_back(key->rank);
  }
  std::vector<StepRef> out;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    std::sort(it->second.rank_manifests.begin(), it->second.rank_manifests.end());
    out.push_back(std::move(it->second));
  }
  return out;
}

}  // namespace autopar
