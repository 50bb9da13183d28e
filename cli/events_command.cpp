// `autopar events JOBID [--json] [--all] [--socket PATH]`: a job's events from every node.
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "daemon_args.h"
#include "core/failure/timeline.h"
#include "job_events.h"

namespace autopar::cli {

int RunEventsCommand(int argc, char** argv) {
  auto args = ParseDaemonArgs(argc, argv);
  if (!args) return Fail("events", args.message(), 2);
  if (args->help || args->positional.size() != 1) {
    std::fputs("usage: autopar events JOBID [--json] [--all] [--socket PATH]\n"
               "  every node's journal of the job merged in time order (autopard's journal_uri),\n"
               "  as a table or --json; works after the job has ended. The table folds per-rank\n"
               "  checkpoint rows into one per step (--all: every row; --json has them all)\n",
               args->help ? stdout : stderr);
    return args->help ? 0 : 2;
  }
  auto fetched = FetchJobEvents("events", args->positional[0], args->socket);
  if (!fetched) return Fail("events", fetched.message(), 1);
  const std::vector<JournalEvent>& events = *fetched;
  const std::string& job = args->positional[0];
  const std::string out = args->json ? EncodeEventsJson(job, events)
                                     : RenderEventsTable(job, events, !args->all);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace autopar::cli
