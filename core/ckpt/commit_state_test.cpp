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

TEST(FileState, TheTransitionsOfTheTable) {
  using T = FileTransfer;
  using Ev = FileEvent;
  auto after = [](FileState from, Ev e) { return NextFileState(from, e).value(); };
  FileState unsent;
  EXPECT_EQ(after(unsent, Ev::kPut).transfer, T::kUploaded);
  FileState multipart = after(unsent, Ev::kMultipartStarted);
  EXPECT_EQ(multipart.transfer, T::kMultipart);
  EXPECT_EQ(after(multipart, Ev::kPartSent).transfer, T::kMultipart);
  EXPECT_EQ(after(multipart, Ev::kMultipartDropped).transfer, T::kUnsent);
  EXPECT_EQ(after(multipart, Ev::kMultipartCompleted).transfer, T::kUploaded);
  // The digest moves on its own, in any transfer state, and keeps the transfer.
  FileState hashed = after(multipart, Ev::kHashed);
  EXPECT_TRUE(hashed.hashed);
  EXPECT_EQ(hashed.transfer, T::kMultipart);
  EXPECT_TRUE(after(after(unsent, Ev::kPut), Ev::kHashed).hashed);
  EXPECT_TRUE(after(hashed, Ev::kMultipartCompleted).hashed);
}

TEST(FileState, WhatTheTableDoesNotAllowIsNamed) {
  using T = FileTransfer;
  using Ev = FileEvent;
  FileState uploaded{T::kUploaded, true};
  auto twice = NextFileState(uploaded, Ev::kHashed);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.message(), "file state: no 'hashed' from uploaded (hashed)");
  EXPECT_FALSE(NextFileState(uploaded, Ev::kPut).ok());
  EXPECT_FALSE(NextFileState(uploaded, Ev::kMultipartStarted).ok());
  EXPECT_FALSE(NextFileState(FileState{}, Ev::kPartSent).ok());
  EXPECT_FALSE(NextFileState(FileState{}, Ev::kMultipartCompleted).ok());
  EXPECT_FALSE(NextFileState(FileState{T::kMultipart, false}, Ev::kPut).ok());  // resume it instead
  EXPECT_FALSE(NextFileState(FileState{T::kMultipart, false}, Ev::kMultipartStarted).ok());
}

}  // namespace
}  // namespace autopar
