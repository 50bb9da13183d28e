#include "launcher/generation_machine.h"

#include <string>

namespace autopar {
namespace {

struct Transition {
  LaunchState from;
  LaunchEvent event;
  LaunchState to;
};

using S = LaunchState;
using E = LaunchEvent;
constexpr Transition kTable[] = {
    {S::kReserve, E::kInUse, S::kPrepare},
    {S::kReserve, E::kEnded, S::kEnd},
    {S::kPrepare, E::kReady, S::kRun},
    {S::kRun, E::kFinished, S::kEnd},
    {S::kRun, E::kFailed, S::kReport},
    {S::kRun, E::kTold, S::kAgree},
    {S::kRun, E::kLostAlone, S::kReplace},
    {S::kReplace, E::kReplaced, S::kRun},
    {S::kReport, E::kReported, S::kAgree},
    {S::kReport, E::kUnreachable, S::kEnd},
    {S::kAgree, E::kRestart, S::kPrepare},
    {S::kAgree, E::kSetAside, S::kReserve},
    {S::kAgree, E::kEnded, S::kEnd},
};

}  // namespace

const char* LaunchStateName(LaunchState s) {
  switch (s) {
    case S::kReserve: return "reserve";
    case S::kPrepare: return "prepare";
    case S::kRun: return "run";
    case S::kReplace: return "replace";
    case S::kReport: return "report";
    case S::kAgree: return "agree";
    case S::kEnd: return "end";
  }
  return "?";
}

const char* LaunchEventName(LaunchEvent e) {
  switch (e) {
    case E::kInUse: return "in-use";
    case E::kReady: return "ready";
    case E::kFinished: return "finished";
    case E::kFailed: return "failed";
    case E::kTold: return "told";
    case E::kLostAlone: return "lost-alone";
    case E::kReplaced: return "replaced";
    case E::kReported: return "reported";
    case E::kUnreachable: return "unreachable";
    case E::kRestart: return "restart";
    case E::kSetAside: return "set-aside";
    case E::kEnded: return "ended";
  }
  return "?";
}

LaunchState FirstLaunchState(bool held_in_reserve) {
  return held_in_reserve ? S::kReserve : S::kPrepare;
}

Result<LaunchState> NextLaunchState(LaunchState from, LaunchEvent event) {
  for (const Transition& t : kTable) {
    if (t.from == from && t.event == event) return t.to;
  }
  return Status::Error(std::string("launcher state: no '") + LaunchEventName(event) + "' in " +
                       LaunchStateName(from));
}

}  // namespace autopar
