#include "core/ckpt/commit_state.h"

#include <string>

namespace autopar {
namespace {

constexpr const char* kStateNames[] = {"queued", "uploading", "uploaded", "failed", "local"};

const char* Shown(CommitState s) { return CommitStateName(s); }
const char* Shown(CommitEvent e) { return CommitEventName(e); }
std::string Shown(const FileState& s) {
  return std::string(FileTransferName(s.transfer)) + (s.hashed ? " (hashed)" : "");
}
const char* Shown(FileEvent e) { return FileEventName(e); }

// A step of either table: `to` when the table allows `event` in `from`, else an error naming
// the machine ("commit", "file"), the event and the state.
template <typename State, typename Event>
Result<State> Transition(const char* machine, const State& from, Event event, bool allowed,
                         const State& to) {
  if (!allowed) {
    return Status::Error(std::string(machine) + " state: no '" + Shown(event) + "' from " +
                         Shown(from));
  }
  return to;
}

}  // namespace

const char* CommitStateName(CommitState s) { return kStateNames[static_cast<int>(s)]; }

Result<CommitState> ParseCommitState(std::string_view name) {
  for (int i = 0; i < 5; ++i) {
    if (name == kStateNames[i]) return static_cast<CommitState>(i);
  }
  return Status::Error("commit state: unknown '" + std::string(name) + "'");
}

const char* CommitEventName(CommitEvent e) {
  switch (e) {
    case CommitEvent::kStartUpload: return "start";
    case CommitEvent::kUploaded: return "uploaded";
    case CommitEvent::kHashedLocal: return "hashed-local";
    case CommitEvent::kFailed: return "failed";
  }
  return "?";
}

Result<CommitState> NextCommitState(CommitState from, CommitEvent event) {
  using S = CommitState;
  auto next = [&](bool allowed, S to) { return Transition("commit", from, event, allowed, to); };
  switch (event) {
    case CommitEvent::kStartUpload:
      return next(from == S::kQueued || from == S::kUploading || from == S::kFailed, S::kUploading);
    case CommitEvent::kUploaded:
      return next(from == S::kUploading, S::kUploaded);
    case CommitEvent::kHashedLocal:
      return next(from == S::kQueued, S::kLocal);
    case CommitEvent::kFailed:
      return next(from != S::kUploaded, S::kFailed);
  }
  return next(false, from);
}

const char* FileTransferName(FileTransfer t) {
  switch (t) {
    case FileTransfer::kUnsent: return "unsent";
    case FileTransfer::kMultipart: return "multipart";
    case FileTransfer::kUploaded: return "uploaded";
  }
  return "?";
}

const char* FileEventName(FileEvent e) {
  switch (e) {
    case FileEvent::kHashed: return "hashed";
    case FileEvent::kMultipartStarted: return "multipart-started";
    case FileEvent::kPartSent: return "part-sent";
    case FileEvent::kMultipartDropped: return "multipart-dropped";
    case FileEvent::kPut: return "put";
    case FileEvent::kMultipartCompleted: return "multipart-completed";
  }
  return "?";
}

Result<FileState> NextFileState(FileState from, FileEvent event) {
  using T = FileTransfer;
  // Every event but kHashed moves the transfer state alone.
  auto next = [&](bool allowed, T transfer) {
    return Transition("file", from, event, allowed, FileState{transfer, from.hashed});
  };
  switch (event) {
    case FileEvent::kHashed:
      return Transition("file", from, event, !from.hashed, FileState{from.transfer, true});
    case FileEvent::kMultipartStarted:
      return next(from.transfer == T::kUnsent, T::kMultipart);
    case FileEvent::kPartSent:
      return next(from.transfer == T::kMultipart, T::kMultipart);
    case FileEvent::kMultipartDropped:
      return next(from.transfer == T::kMultipart, T::kUnsent);
    case FileEvent::kPut:
      return next(from.transfer == T::kUnsent, T::kUploaded);
    case FileEvent::kMultipartCompleted:
      return next(from.transfer == T::kMultipart, T::kUploaded);
  }
  return next(false, from.transfer);
}

}  // namespace autopar
