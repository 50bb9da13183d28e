// The states a rank's commit goes through on its way to storage (or, without an upload URI, to
// being its own checkpoint), as autopard's state database records them, and the events that
// move it (issue 17). The uploader records every transition through one place
// (Uploader::Transition), which refuses one this table does not allow:
//
//   queued ──start──> uploading ──uploaded──> uploaded
//     │                 │   ^
//     │ hashed-local    │   └─start (resumed after a restart, or a failed one retried)
//     v                 v
//   local ──failed──> failed <──failed── (queued, uploading, failed)
//
// A failed commit is retried (start) when it is marked for retry; uploaded is final. The files'
// own progress (multipart upload id, parts sent, uploaded, SHA-256) is recorded per file beside
// the commit (state_db.h). Pure; reentrant.
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

}  // namespace autopar
