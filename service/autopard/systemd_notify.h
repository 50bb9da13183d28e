// Readiness and state for systemd's Type=notify units (sd_notify(3)'s protocol, without
// libsystemd): one datagram "READY=1", "RELOADING=1\nMONOTONIC_USEC=...", "STOPPING=1" or
// "STATUS=..." to the socket named by NOTIFY_SOCKET (a path, or "@name" for an abstract one).
// Outside systemd (no NOTIFY_SOCKET) it does nothing.
//
// Thread safety: may be called from any thread.
#pragma once

#include <string>

#include "autopar/status.h"

namespace autopar {

// Sends `state` (newline-separated assignments). Errors: NOTIFY_SOCKET is set but unusable.
Status NotifySystemd(const std::string& state);

// "RELOADING=1\nMONOTONIC_USEC=<CLOCK_MONOTONIC now>", as systemd wants a reload announced.
std::string ReloadingState();

}  // namespace autopar
