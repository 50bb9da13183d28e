// What the Launcher's files (launcher*.cpp) share: its time limits and small helpers over the
// task's environment. Internal to autopar-launch's library; reentrant.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/failure/launch_events.h"
#include "launcher/launch.h"

namespace autopar {
namespace launcher_detail {

// Rendezvous must not hang forever when another rank never arrives (e.g. it died before
// PMIx_Init); AUTOPAR_LAUNCH_TIMEOUT overrides.
constexpr int kDefaultRendezvousTimeoutS = 300;
// In place: how long a told program may take to end after SIGTERM before SIGKILL, how long a
// stop notice may take to reach every launcher, and how long rank 0 waits for autopard's verdict.
constexpr int kStopGraceMs = 3000;
constexpr int kNoticeTimeoutMs = 2000;
constexpr int kRecoverTimeoutMs = 60000;
// How long a launcher whose program ended at the step's SIGTERM waits for autopard to read
// Slurm's record (and requeue a preempted job) before it ends: well within a grace time.
constexpr int kTerminatedTimeoutMs = 5000;

inline double EpochNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

inline std::string Get(const EnvMap& env, const std::string& key, const std::string& dflt = "") {
  auto it = env.find(key);
  return it == env.end() ? dflt : it->second;
}

// getenv over an EnvMap (the map must outlive the returned function).
inline GetEnv Lookup(const EnvMap& env) {
  return [&env](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

// Takes the restored checkpoint out of a program's environment: a fresh start, or a newcomer to
// the fault-tolerant group, which receives its state from a live member and reads no checkpoint.
inline void ForgetResume(EnvMap* env) {
  for (const char* key : {"AUTOPAR_RESUME_STEP", "AUTOPAR_RESUME_DIR", "AUTOPAR_RESUME_STEP_DIR",
                          "AUTOPAR_RESUME_WORLD_SIZE"}) {
    env->erase(key);
  }
}

inline bool Contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// One event of `rank` for the job's timeline (launch_events.h). Without autopard there is nobody
// to tell, and a journal that cannot be reached never stops the training: a warning only with
// --verbose (`prefix`: LaunchMessagePrefix). Safe from any thread (reads only its arguments).
inline void TellEvent(const EnvMap& env, int rank, const std::string& host,
                      const std::string& prefix, bool verbose, const char* kind, int64_t step,
                      const EventFields& fields) {
  const GetEnv get = Lookup(env);
  Status st = SendJobEvent(get, JobEventRequest(get, kind, rank, step, host, fields), 1000);
  if (!st && verbose) std::fprintf(stderr, "%swarning: %s\n", prefix.c_str(), st.message().c_str());
}

}  // namespace launcher_detail
}  // namespace autopar
