#include "core/ckpt/commit_state.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

using S = CommitState;
using E = CommitEvent;

TEST(CommitState, TheTransitionsOfTheTable) {
  struct Case {
    S from;
    E event;
    S to;
  };
  for (const Case& c : std::vector<Case>{{S::kQueued, E::kStartUpload, S::kUploading},
                                         {S::kUploading, E::kStartUpload, S::kUploading},
                                         {S::kFailed, E::kStartUpload, S::kUploading},
                                         {S::kUploading, E::kUploaded, S::kUploaded},
                                         {S::kQueued, E::kHashedLocal, S::kLocal},
                                         {S::kQueued, E::kFailed, S::kFailed},
                                         {S::kUploading, E::kFailed, S::kFailed},
                                         {S::kFailed, E::kFailed, S::kFailed},
                                         {S::kLocal, E::kFailed, S::kFailed}}) {
    auto to = NextCommitState(c.from, c.event);
    ASSERT_TRUE(to.ok()) << CommitStateName(c.from) << " " << CommitEventName(c.event);
    EXPECT_EQ(*to, c.to);
  }
}

TEST(CommitState, WhatTheTableDoesNotAllowIsNamed) {
  auto bad = NextCommitState(S::kUploaded, E::kStartUpload);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "commit state: no 'start' from uploaded");
  EXPECT_FALSE(NextCommitState(S::kQueued, E::kUploaded).ok());   // never without sending
  EXPECT_FALSE(NextCommitState(S::kUploading, E::kHashedLocal).ok());
  EXPECT_FALSE(NextCommitState(S::kUploaded, E::kFailed).ok());   // uploaded is final
  EXPECT_FALSE(NextCommitState(S::kLocal, E::kStartUpload).ok());
}

TEST(CommitState, NamesRoundTrip) {
  for (S s : {S::kQueued, S::kUploading, S::kUploaded, S::kFailed, S::kLocal}) {
    EXPECT_EQ(*ParseCommitState(CommitStateName(s)), s);
  }
  EXPECT_FALSE(ParseCommitState("complete").ok());
}

}  // namespace
}  // namespace autopar
