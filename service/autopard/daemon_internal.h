// What the Daemon's files share: daemon.cpp (its life: start, serve, stop, reload) and
// daemon_*.cpp, one per concern (checkpoints, restore, events, recovery, status, housekeeping).
#pragma once

#include <string>

#include "core/proto/protocol.h"

namespace autopar {
namespace daemon_detail {

// Wall-clock seconds since the epoch: the time of journal events and heartbeats.
double Now();
// A reply carrying only an error line.
Reply Error(const std::string& message);

}  // namespace daemon_detail
}  // namespace autopar
