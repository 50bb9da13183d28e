// The states a rank's commit goes through on its way to storage (or, without an upload URI, to
// being its own checkpoint), as autopard's state database records them, and the events that
// move it. The uploader records every transition through one place
// (Uploader::Transition), which refuses one this table does not allow:
//
//   queued ──start──> uploading ──uploaded──> uploaded
//     │                 │   ^
//     │ hashed-local    │   └─start (resumed after a restart, or a failed one retried)
//     v                 v
//   local ──failed──> failed <──failed── (queued, uploading, failed)
//
// A failed commit is retried (start) when it is marked for retry; uploaded is final.
//
// Each of the commit's files has a transfer state and a digest, which move independently (the
// SHA-256 is computed while the file's parts go out). The uploader records them through one place
// too (Uploader::RecordFile), against this table:
//
//   unsent ──multipart-started──> multipart ──part-sent──> multipart
//     │  ^                          │  │
//     │  └────multipart-dropped─────┘  └──multipart-completed──> uploaded
//     └──put──> uploaded
//
//   and once, in any transfer state: hashed (its SHA-256 is recorded).
//
// A dropped multipart upload (aborted, or gone from the store) starts over from unsent. Pure;
// reentrant.
#pragma once

#include <string_view>

#include "autopar/status.h"

namespace autopar {

enum class CommitState { kQueued, kUploading, kUploaded, kFailed, kLocal };
enum class CommitEvent {
  kStartUpload,  // the uploader starts (or resumes, or retries) sending the files
  kUploaded,     // every file and the rank manifest are in storage
  kHashedLocal,  // local only: every file hashed, the directory is the checkpoint
  kFailed,       // storage or the files failed (the retry flag says whether it is tried again)
};

const char* CommitStateName(CommitState s);  // "queued", "uploading", "uploaded", "failed", "local"
Result<CommitState> ParseCommitState(std::string_view name);
const char* CommitEventName(CommitEvent e);  // "start", "uploaded", "hashed-local", "failed"

// The state after `event` in `from`; an error names a transition the table does not allow.
Result<CommitState> NextCommitState(CommitState from, CommitEvent event);

enum class FileTransfer { kUnsent, kMultipart, kUploaded };
struct FileState {
  FileTransfer transfer = FileTransfer::kUnsent;
  bool hashed = false;
};
enum class FileEvent {
  kHashed,              // its SHA-256 is known
  kMultipartStarted,    // a multipart upload was created (its id is recorded)
  kPartSent,            // one part is in the store (its number and ETag are recorded)
  kMultipartDropped,    // the multipart upload was aborted or vanished
  kPut,                 // sent whole in one request
  kMultipartCompleted,  // the store assembled the parts
};

const char* FileTransferName(FileTransfer t);  // "unsent", "multipart", "uploaded"
const char* FileEventName(FileEvent e);  // "hashed", "multipart-started", "part-sent", ...
// The state after `event`; an error names a transition the table does not allow.
Result<FileState> NextFileState(FileState from, FileEvent event);

}  // namespace autopar
