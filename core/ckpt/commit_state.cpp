#include "core/ckpt/commit_state.h"

#include <string>

namespace autopar {
namespace {

constexpr const char* kStateNames[] = {"queued", "uploading", "uploaded", "failed", "local"};

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
  bool allowed = false;
  S to = from;
  switch (event) {
    case CommitEvent::kStartUpload:
      allowed = from == S::kQueued || from == S::kUploading || from == S::kFailed;
      to = S::kUploading;
      break;
    case CommitEvent::kUploaded:
      allowed = from == S::kUploading;
      to = S::kUploaded;
      break;
    case CommitEvent::kHashedLocal:
      allowed = from == S::kQueued;
      to = S::kLocal;
      break;
    case CommitEvent::kFailed:
      allowed = from != S::kUploaded;
      to = S::kFailed;
      break;
  }
  if (!allowed) {
    return Status::Error(std::string("commit state: no '") + CommitEventName(event) + "' from " +
                         CommitStateName(from));
  }
  return to;
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
  FileState to = from;
  bool allowed = false;
  switch (event) {
    case FileEvent::kHashed:
      allowed = !from.hashed;
      to.hashed = true;
      break;
    case FileEvent::kMultipartStarted:
      allowed = from.transfer == T::kUnsent;
      to.transfer = T::kMultipart;
      break;
    case FileEvent::kPartSent:
      allowed = from.transfer == T::kMultipart;
      break;
    case FileEvent::kMultipartDropped:
      allowed = from.transfer == T::kMultipart;
      to.transfer = T::kUnsent;
      break;
    case FileEvent::kPut:
      allowed = from.transfer == T::kUnsent;
      to.transfer = T::kUploaded;
      break;
    case FileEvent::kMultipartCompleted:
      allowed = from.transfer == T::kMultipart;
      to.transfer = T::kUploaded;
      break;
  }
  if (!allowed) {
    return Status::Error(std::string("file state: no '") + FileEventName(event) + "' from " +
                         FileTransferName(from.transfer) + (from.hashed ? " (hashed)" : ""));
  }
  return to;
}

}  // namespace autopar
