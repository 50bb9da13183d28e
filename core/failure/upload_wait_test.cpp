#include "core/failure/upload_wait.h"

#include <gtest/gtest.h>

#include "core/failure/timeline.h"

namespace autopar {
namespace {

JournalEvent Ev(const char* kind, int64_t step, int rank = -1) {
  JournalEvent e;
  e.kind = kind;
  e.step = step;
  e.rank = rank;
  e.job_id = "7";
  return e;
}

std::vector<JournalEvent> Committed(int64_t step, int ranks) {
  std::vector<JournalEvent> out;
  for (int r = 0; r < ranks; ++r) out.push_back(Ev(event_kind::kCkptCommitted, step, r));
  return out;
}

TEST(StepAwaitingUpload, TheNewestStepEveryRankCommittedAndNotComplete) {
  auto t = Committed(9, 4);
  t.push_back(Ev(event_kind::kCkptComplete, 9));
  for (const auto& e : Committed(17, 4)) t.push_back(e);  // the notice's: still uploading
  EXPECT_EQ(StepAwaitingUpload(t, 4, 9), 17);
}

TEST(StepAwaitingUpload, NoneWhenARankDidNotCommitIt) {
  auto t = Committed(17, 3);  // rank 3 never committed: nothing is on its way for it
  EXPECT_EQ(StepAwaitingUpload(t, 4, 9), std::nullopt);
  t.push_back(Ev(event_kind::kCkptCommitted, 17, 7));  // a rank of another world size
  EXPECT_EQ(StepAwaitingUpload(t, 4, 9), std::nullopt);
}

TEST(StepAwaitingUpload, NoneWhenItIsCompleteOrNotNewer) {
  auto t = Committed(17, 4);
  EXPECT_EQ(StepAwaitingUpload(t, 4, 17), std::nullopt);  // storage has it already
  auto failed = t;
  failed.push_back(Ev(event_kind::kCkptFailed, 17));  // on storage: retried on autopard's timer
  EXPECT_EQ(StepAwaitingUpload(failed, 4, 9), 17);
  t.push_back(Ev(event_kind::kCkptComplete, 17));
  EXPECT_EQ(StepAwaitingUpload(t, 4, 9), std::nullopt);  // a node found it COMPLETE
  EXPECT_EQ(StepAwaitingUpload(t, 0, -1), std::nullopt);
}

TEST(StepAwaitingUpload, NoneWhenANodeThatCommittedItWasLostSince) {
  auto t = Committed(17, 4);
  for (auto& e : t) {
    e.node = e.rank < 2 ? "node1" : "node2";
    e.time = 100;
  }
  JournalEvent other = Ev(event_kind::kFailure, -1);
  other.time = 110;
  other.detail = "class=node-loss lost=node3 spares=0";  // not one of the step's nodes
  t.push_back(other);
  EXPECT_EQ(StepAwaitingUpload(t, 4, 9), 17);
  JournalEvent loss = other;
  loss.detail = "class=node-loss lost=node4,node2 spares=0 reason=\"node node2 is DOWN\"";
  t.push_back(loss);
  EXPECT_EQ(StepAwaitingUpload(t, 4, 9), std::nullopt);
}

TEST(StepAwaitingUpload, TheNewestOfSeveral) {
  auto t = Committed(19, 2);
  for (const auto& e : Committed(29, 2)) t.push_back(e);
  for (const auto& e : Committed(39, 1)) t.push_back(e);  // the last one only half committed
  EXPECT_EQ(StepAwaitingUpload(t, 2, -1), 29);
}

}  // namespace
}  // namespace autopar
