// The launcher's life once its rendezvous is done: the program one generation at a time, and
// what follows a generation's end. The launcher (launcher.h) moves between these states through
// one place (Launcher::Run), which acts in each state and takes the next one from this table:
//
//   from     event        to
//   reserve  in-use       prepare
//   reserve  ended        end
//   prepare  ready        run
//   run      finished     end
//   run      failed       report
//   run      told         agree
//   run      lost-alone   replace
//   replace  replaced     run
//   report   reported     agree
//   report   unreachable  end
//   agree    restart      prepare
//   agree    set-aside    reserve
//   agree    ended        end
//
// reserve: a spare node's launcher (--spare-nodes) waits for a verdict that puts its node in use.
// prepare: the program's environment for its ranks, the checkpoint restored.
// run:     the program supervised until it ends, fails, hangs or a peer's stop notice ends it.
// replace: with per-step fault tolerance (docs/ft.md), a failed program is replaced alone while
//          the group's other members go on: the failure counted and told to autopard, the
//          replacement's environment made (no state: a live member sends it).
// report:  its failure told to autopard (a rank exit) and every launcher told to stop; when
//          launchers cannot be reached and nobody can decide without them, autopard is asked to
//          take the requeue path and this launcher ends (unreachable).
// agree:   rank 0's launcher collects every report and asks autopard (restart in place, with
//          which nodes, or end); the others follow its verdict. A restart without this node
//          (a straggler's left out) sets it aside: it waits in reserve like a spare.
// A launcher without in-place restarts goes prepare, run, end. Pure; reentrant.
#pragma once

#include "autopar/status.h"

namespace autopar {

enum class LaunchState { kReserve, kPrepare, kRun, kReplace, kReport, kAgree, kEnd };
enum class LaunchEvent {
  kInUse,        // reserve: a verdict put this node in use
  kReady,        // prepare: environment made, checkpoint restored
  kFinished,     // run: the program ended without a failure to recover from
  kFailed,       // run: the program failed or hung (it has been stopped)
  kTold,         // run: another launcher's stop notice ended the program
  kLostAlone,    // run: the program failed and the fault-tolerant group can go on without it
  kReplaced,     // replace: the replacement is ready to run
  kReported,     // report: autopard and the launchers told
  kUnreachable,  // report: launchers cannot be reached and none can decide: the requeue path
  kRestart,      // agree: the verdict restarts the program (the next generation) on this node
  kSetAside,     // agree: the verdict restarts the program without this node
  kEnded,        // reserve, agree: the verdict ends the job
};

const char* LaunchStateName(LaunchState s);  // "reserve", "prepare", "run", ...
const char* LaunchEventName(LaunchEvent e);  // "in-use", "ready", "finished", ...

// Where a launcher starts: held in reserve or preparing its program.
LaunchState FirstLaunchState(bool held_in_reserve);
// The state after `event` in `from`; an error names a transition the table does not allow.
Result<LaunchState> NextLaunchState(LaunchState from, LaunchEvent event);

}  // namespace autopar
