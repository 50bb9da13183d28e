#include "launcher/generation_machine.h"

#include <gtest/gtest.h>

#include <vector>

namespace autopar {
namespace {

using S = LaunchState;
using E = LaunchEvent;

// Follows `events` from `start`; the states visited after each, or "error" where the table
// refuses one.
std::vector<std::string> Walk(S start, const std::vector<E>& events) {
  std::vector<std::string> seen;
  S s = start;
  for (E e : events) {
    auto next = NextLaunchState(s, e);
    if (!next) {
      seen.push_back("error");
      break;
    }
    s = *next;
    seen.push_back(LaunchStateName(s));
  }
  return seen;
}

TEST(LaunchStateTest, AProgramWithoutFailuresRunsOnceAndEnds) {
  EXPECT_EQ(FirstLaunchState(false), S::kPrepare);
  EXPECT_EQ(Walk(S::kPrepare, {E::kReady, E::kFinished}),
            (std::vector<std::string>{"run", "end"}));
}

TEST(LaunchStateTest, AFailureIsReportedAgreedOnAndTheNextGenerationPrepared) {
  EXPECT_EQ(Walk(S::kPrepare, {E::kReady, E::kFailed, E::kReported, E::kRestart, E::kReady,
                               E::kFinished}),
            (std::vector<std::string>{"run", "report", "agree", "prepare", "run", "end"}));
}

TEST(LaunchStateTest, ALauncherToldToStopGoesStraightToTheVerdict) {
  // A peer failed: this launcher's program was stopped; it has nothing of its own to report.
  EXPECT_EQ(Walk(S::kRun, {E::kTold, E::kEnded}), (std::vector<std::string>{"agree", "end"}));
  EXPECT_EQ(Walk(S::kRun, {E::kTold, E::kRestart}),
            (std::vector<std::string>{"agree", "prepare"}));
}

TEST(LaunchStateTest, AFaultTolerantGroupsFailedProgramIsReplacedAloneAndRunsOn) {
  // No report, no agreement: the others go on while this one's replacement joins them.
  EXPECT_EQ(Walk(S::kRun, {E::kLostAlone, E::kReplaced, E::kLostAlone, E::kReplaced, E::kFinished}),
            (std::vector<std::string>{"replace", "run", "replace", "run", "end"}));
  // A replacement's failure past the budget takes the path of every other failure.
  EXPECT_EQ(Walk(S::kRun, {E::kLostAlone, E::kReplaced, E::kFailed, E::kReported}),
            (std::vector<std::string>{"replace", "run", "report", "agree"}));
}

TEST(LaunchStateTest, UnreachableLaunchersEndTheLauncherAfterItsReport) {
  EXPECT_EQ(Walk(S::kRun, {E::kFailed, E::kUnreachable}),
            (std::vector<std::string>{"report", "end"}));
}

TEST(LaunchStateTest, ASpareWaitsInReserveUntilAVerdictUsesItsNodeOrEndsTheJob) {
  EXPECT_EQ(FirstLaunchState(true), S::kReserve);
  EXPECT_EQ(Walk(S::kReserve, {E::kInUse, E::kReady, E::kFinished}),
            (std::vector<std::string>{"prepare", "run", "end"}));
  EXPECT_EQ(Walk(S::kReserve, {E::kEnded}), (std::vector<std::string>{"end"}));
  // A node left out of the next generation (a straggler's) waits in reserve too.
  EXPECT_EQ(Walk(S::kRun, {E::kTold, E::kSetAside, E::kInUse}),
            (std::vector<std::string>{"agree", "reserve", "prepare"}));
}

TEST(LaunchStateTest, EveryOtherTransitionIsRefusedWithItsNames) {
  const S states[] = {S::kReserve, S::kPrepare, S::kRun, S::kReplace, S::kReport, S::kAgree, S::kEnd};
  const E events[] = {E::kInUse,    E::kReady,       E::kFinished,  E::kFailed,   E::kTold,
                      E::kLostAlone, E::kReplaced,   E::kReported,  E::kUnreachable,
                      E::kRestart,  E::kSetAside,    E::kEnded};
  int allowed = 0;
  for (S s : states) {
    for (E e : events) {
      auto next = NextLaunchState(s, e);
      if (next) {
        ++allowed;
        continue;
      }
      EXPECT_EQ(next.message(), std::string("launcher state: no '") + LaunchEventName(e) +
                                    "' in " + LaunchStateName(s));
    }
  }
  EXPECT_EQ(allowed, 13);  // the table in generation_machine.h, nothing more
  EXPECT_FALSE(NextLaunchState(S::kEnd, E::kRestart).ok());  // the end is final
  EXPECT_FALSE(NextLaunchState(S::kPrepare, E::kFailed).ok());
}

}  // namespace
}  // namespace autopar
