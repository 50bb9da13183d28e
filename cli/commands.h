// Subcommands of the `autopar` CLI, each listed once in main.cpp's table: plan, calibrate and
// check-plugstack have a file each (plan_command.cpp, ...); the ones that talk to autopard (ckpt,
// heartbeat, events, report) share ckpt_cmd.cpp. A subcommand gets the arguments after its name (argv[0] is the
// subcommand name), prints errors as one line "autopar <name>: <what>: <reason>" on stderr and
// returns the process exit status: 0 success, 1 runtime failure, 2 bad usage.
#pragma once

namespace autopar::cli {

int RunPlanCommand(int argc, char** argv);
int RunCkptCommand(int argc, char** argv);    // ckpt_cmd.cpp
int RunEventsCommand(int argc, char** argv);  // ckpt_cmd.cpp
int RunReportCommand(int argc, char** argv);  // ckpt_cmd.cpp
int RunHeartbeatCommand(int argc, char** argv);  // ckpt_cmd.cpp
int RunCalibrateCommand(int argc, char** argv);  // calibrate_command.cpp
int RunCheckPlugstackCommand(int argc, char** argv);  // check_plugstack_command.cpp

}  // namespace autopar::cli
