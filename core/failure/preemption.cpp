// Preemption notes and Slurm's preemption record; see preemption.h.
#include "core/failure/preemption.h"

#include <algorithm>
#include <cstring>

#include "core/text.h"

namespace autopar {
namespace {
constexpr const char* kTag = "autopar-preempted ";

// The note's span in `text`: [at, end), or at == npos.
std::pair<size_t, size_t> NoteSpan(std::string_view text) {
  size_t at = text.rfind(kTag);
  if (at == std::string_view::npos) return {at, at};
  size_t end = text.find_first_of(";\n", at);
  return {at, end == std::string_view::npos ? text.size() : end};
}
}  // namespace

Preemption PreemptionOf(double preempt_time, double end_time) {
  Preemption p;
  if (preempt_time <= 0) return p;
  p.preempted = true;
  p.preempt_time = preempt_time;
  p.grace_s = end_time > preempt_time ? end_time - preempt_time : 0;
  return p;
}

std::string EncodePreemptionNote(const PreemptionNote& note) {
  return std::string(kTag) + "count=" + std::to_string(note.count) +
         " last=" + std::to_string(note.last_restart);
}

std::optional<PreemptionNote> ParsePreemptionNote(std::string_view text) {
  auto [at, end] = NoteSpan(text);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(at + std::strlen(kTag), end - at - std::strlen(kTag));
  auto fields = Split(Trim(rest), ' ');
  if (fields.size() != 2 || !StartsWith(fields[0], "count=") || !StartsWith(fields[1], "last=")) {
    return std::nullopt;
  }
  auto count = ParseInt(std::string_view(fields[0]).substr(6), 0, INT64_MAX);
  auto last = ParseInt(std::string_view(fields[1]).substr(5), -1, INT64_MAX);
  if (!count || !last) return std::nullopt;
  return PreemptionNote{*count, *last};
}

std::string WithPreemptionNote(std::string_view comment, const PreemptionNote& note) {
  auto [at, end] = NoteSpan(comment);
  std::string encoded = EncodePreemptionNote(note);
  if (at != std::string_view::npos) {
    return std::string(comment.substr(0, at)) + encoded + std::string(comment.substr(end));
  }
  std::string out(Trim(comment));
  return out.empty() ? encoded : out + "; " + encoded;
}

PreemptionNote RecordPreemption(const std::optional<PreemptionNote>& before, int64_t restart_count) {
  PreemptionNote n = before.value_or(PreemptionNote{});
  if (n.last_restart >= restart_count) return n;  // this run's (or a later one's) is counted
  ++n.count;
  n.last_restart = restart_count;
  return n;
}

int64_t FailureRestarts(int64_t restart_count, const std::optional<PreemptionNote>& note) {
  if (!note) return restart_count;
  int64_t earlier = note->count - (note->last_restart >= restart_count ? 1 : 0);
  return std::max<int64_t>(0, restart_count - std::max<int64_t>(0, earlier));
}

}  // namespace autopar
