// A warm interpreter for the next generation of an in-place restart (or for the program a spare
// node's launcher would start, prepared while it waits in reserve).
//
// Restarting a Python program in place costs, before its first step, the program's own start-up:
// a fresh interpreter importing torch (and what else it imports) on every rank at once, which on
// small or oversubscribed nodes is most of the recovery. While the program runs, autopar-launch
// prepares the interpreter of the next generation: the same interpreter with the same options,
// environment, CPUs and signal mask, which imports the modules the program's source imports (read
// with `ast`, never run; modules beside the program and autopar's own are left to the program,
// as their import may depend on the run) and then waits. On a restart it receives the new
// generation's environment (the fresh MASTER_PORT, TORCHELASTIC_RESTART_COUNT, the resume step,
// a new rank after a shrink), puts it in os.environ, and runs the program as the interpreter would
// (runpy: `__main__`, sys.argv, sys.path[0]). A warm interpreter that is gone or was never made
// leaves the restart to a cold start, as before.
//
// While it waits its name (/proc/PID/comm) is "autopar-warm". It is started with the environment
// of the generation it will run (the launcher numbers it as the next), because /proc/PID/environ,
// which autopard reads, keeps showing the environment a process was started with.
//
// Only commands a warm interpreter can stand in for exactly are prepared (ParsePythonCommand).
// Nothing is prepared until the program has run `--prewarm-after` seconds, so that it never
// competes with the program's own start-up for the CPUs; `--no-prewarm` turns it off.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "launcher/launch.h"

namespace autopar {

struct PythonCommand {
  std::vector<std::string> interpreter;  // the interpreter and its own options: {"python3", "-u"}
  bool module = false;                   // -m MODULE; else a script
  std::string target;                    // the script's path or the module's name
  std::vector<std::string> args;         // the program's arguments after the target
};

// The Python command `argv` runs, when a warm interpreter can stand in for it: the interpreter is
// python, python3 or python3.N (in any directory), its options only set flags (-b -B -d -E -I -O
// -q -s -S -u -v, alone or combined, and -X OPT, -W ARG, joined or not), and it runs a script or
// -m MODULE. Anything else (-c, -i, a script from stdin, another program): nullopt.
std::optional<PythonCommand> ParsePythonCommand(const std::vector<std::string>& argv);

// The command of a warm interpreter for `cmd`: its interpreter and options, `-c` with the
// bootstrap program (prewarm.cpp), then the descriptor it talks on, "script" or "module", the
// target and the program's arguments.
std::vector<std::string> WarmInterpreterArgv(const PythonCommand& cmd, int fd);

// What turns a warm interpreter into the program: the generation's environment, NAME=VALUE
// entries each ended by a NUL byte (as /proc/PID/environ).
std::string WarmRequest(const EnvMap& env);

// One warm interpreter (the process edge). Not thread-safe; used by the launcher's main thread,
// which must be the one that calls Start (the interpreter dies with it: PR_SET_PDEATHSIG).
class WarmInterpreter {
 public:
  WarmInterpreter() = default;
  WarmInterpreter(const WarmInterpreter&) = delete;
  WarmInterpreter& operator=(const WarmInterpreter&) = delete;
  ~WarmInterpreter() { Discard(); }

  // Starts one in its own process group, as StartChild starts the program. Fails when it cannot
  // be started (the message says why); then there is none.
  Status Start(const PythonCommand& cmd, const EnvMap& env, const std::vector<int>& cpus,
               const sigset_t& mask);
  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // AUTOPAR_RESTART_GENERATION of the environment it was started with: the generation it can be.
  const std::string& generation() const { return generation_; }
  // Whether it has imported what the program imports (never blocks).
  bool Ready();
  // Hands it the program's environment: from now on it is the program, and `pid` (in its own
  // process group) is supervised like one StartChild started. Fails when it is gone or cannot be
  // told (it has been reaped then: start the program cold), or when `env` is of another
  // generation than the one it was started with (autopard reads the generation from
  // /proc/PID/environ). Either way none is left afterwards.
  Result<pid_t> Activate(const EnvMap& env);
  // Ends it (SIGKILL to its group, reaped). Nothing when there is none.
  void Discard();

 private:
  pid_t pid_ = -1;
  int fd_ = -1;  // our end of the socket pair it talks on
  int spent_fd_ = -1;  // the activated one's end, half closed (see Activate)
  bool ready_ = false;
  std::string generation_;  // AUTOPAR_RESTART_GENERATION of the environment it was started with
};

}  // namespace autopar
