// Subcommands of the `autopar` CLI, each in its file NAME_command.cpp and listed once in
// main.cpp's table; those that talk to autopard (ckpt, heartbeat, events, report) share their
// options' parser (daemon_args.h). A subcommand gets the arguments after its name (argv[0] is the
// subcommand name), prints errors as one line "autopar <name>: <what>: <reason>" on stderr and
// returns the process exit status: 0 success, 1 runtime failure, 2 bad usage.
#pragma once

namespace autopar::cli {

int RunPlanCommand(int argc, char** argv);
int RunCkptCommand(int argc, char** argv);
int RunEventsCommand(int argc, char** argv);
int RunReportCommand(int argc, char** argv);
int RunGoodputCommand(int argc, char** argv);
int RunHeartbeatCommand(int argc, char** argv);
int RunCalibrateCommand(int argc, char** argv);
int RunCheckPlugstackCommand(int argc, char** argv);

}  // namespace autopar::cli
