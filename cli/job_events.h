// A job's timeline as the CLI reads it from autopard: shared by `autopar events`, `report`
//  and `calibrate` (calibrate_command.cpp), so that they read it the same way.
#pragma once

#include <string>
#include <vector>

#include "autopar/status.h"
#include "core/proto/protocol.h"

namespace autopar::cli {

// The socket when no --socket is given: AUTOPAR_SOCKET (set inside jobs), else the site default
// (/run/autopard/autopard.sock).
std::string DefaultSocket();

// The job's events from every node (autopard's `events`), merged again so that the order is
// defined whatever the daemon's version; autopard's notes go to stderr as "autopar: CMD: ...".
// Fails with autopard's error or why it could not be reached.
Result<std::vector<JournalEvent>> FetchJobEvents(const char* cmd, const std::string& job_id,
                                                 const std::string& socket);

}  // namespace autopar::cli
