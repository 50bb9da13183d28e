// Which step a restore waits for. Pure.
//
// A run can end before its last checkpoint is COMPLETE in storage: a preemption whose grace time
// is shorter than the upload, a time limit, a slow or briefly unreachable store. Every rank
// committed that step (its files are on its node, and the node's autopard uploads them whether
// the job is still there or not), so the next run need not redo the steps since the previous
// COMPLETE one: rank 0's restore decision waits a while for the upload (autopard.conf
// restore_wait_s), with the job's timeline as the evidence that the step is on its way.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/proto/protocol.h"

namespace autopar {

// The newest step newer than `newest_complete` (-1: none in storage) that every rank
// 0..world_size-1 committed (ckpt_committed in `timeline`, the job's merged timeline) and no
// node has journalled COMPLETE; nullopt when there is none. A ckpt_failed does not end the wait:
// an upload that failed on storage is retried on autopard's timer. A step is not waited for when a node
// that committed ranks of it was lost since (a node-loss failure's lost=): its uploads went with
// the node.
std::optional<int64_t> StepAwaitingUpload(const std::vector<JournalEvent>& timeline, int world_size,
                                          int64_t newest_complete);

}  // namespace autopar
