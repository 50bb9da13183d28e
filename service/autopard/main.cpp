// autopard: the per-node checkpoint service (see daemon.h, etc/autopard.conf).
//   autopard [--config FILE] [--check-config] [--version]
// Signals: SIGTERM and SIGINT stop it; SIGHUP reloads (Reload below).
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <thread>

#include "core/plugstack.h"
#include "service/slurm_actions/slurm_actions.h"
#include "core/proto/protocol.h"
#include "daemon.h"
#include "log.h"
#include "site_limits.h"
#include "systemd_notify.h"

namespace {

constexpr const char* kDefaultConfig = "/etc/autopar/autopard.conf";

int Usage(std::FILE* out, int code) {
  std::fprintf(out,
               "usage: autopard [--config FILE] [--check-config] [--version]\n"
               "  --config FILE    configuration (default %s)\n"
               "  --check-config   parse the configuration, print the effective socket and exit\n"
               "  --version        print the release and the protocol version, and exit\n",
               kDefaultConfig);
  return code;
}

// The site's limits on what a job may ask for, from the plugstack line that autopard.conf names
// (or the one beside slurm.conf); each bad argument's problem is logged and its default kept.
autopar::Result<autopar::SiteSettings> SiteSettingsFor(const autopar::DaemonConfig& config) {
  const std::string plugstack =
      config.plugstack.empty() ? autopar::PlugstackPathFor(autopar::SlurmConfPath(config.slurm_conf))
                               : config.plugstack;
  return autopar::ReadSiteSettings(plugstack);
}

std::string LimitsText(const autopar::SiteSettings& site) {
  const autopar::JobLimits limits = autopar::JobLimitsOf(site.site);
  return "job limits from " + site.from + ": max_requeue=" + std::to_string(limits.max_requeue) +
         " max_restarts_in_place=" + std::to_string(limits.max_restarts_in_place) +
         " max_rollbacks=" + std::to_string(limits.max_rollbacks) + " heartbeat_timeout=" +
         std::to_string(site.site.min_heartbeat_timeout) + ".." +
         std::to_string(site.site.max_heartbeat_timeout) + "s";
}

std::string Joined(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

// SIGHUP: the configuration file and the plugstack line read again. A file that does not parse
// (or is readable by others while holding a secret) changes nothing: one error line, and the
// running configuration stays. Otherwise one line says what took effect and one what needs a
// restart.
void Reload(const std::string& config_path, autopar::Daemon* d) {
  (void)autopar::NotifySystemd(autopar::ReloadingState());
  auto config = autopar::LoadDaemonConfig(config_path);
  auto site = config ? SiteSettingsFor(*config) : autopar::Result<autopar::SiteSettings>(config.status());
  if (!config || !site) {
    autopar::Log(autopar::LogLevel::kError, "reload refused, the running configuration stays: %s",
                 (config ? site.message() : config.message()).c_str());
  } else {
    for (const auto& problem : site->problems) {
      autopar::Log(autopar::LogLevel::kWarning, "%s (its default holds)", problem.c_str());
    }
    const autopar::ConfigChanges changes = d->Reload(*config, autopar::JobLimitsOf(site->site));
    autopar::Log(autopar::LogLevel::kNotice, "reloaded %s: %s; %s", config_path.c_str(),
                 changes.applied.empty() ? "no reloadable key changed"
                                         : ("applied " + Joined(changes.applied)).c_str(),
                 LimitsText(*site).c_str());
    if (!changes.need_restart.empty()) {
      autopar::Log(autopar::LogLevel::kWarning,
                   "reload: %s changed but take effect only at a restart (systemctl restart "
                   "autopard); their running values stay",
                   Joined(changes.need_restart).c_str());
    }
  }
  (void)autopar::NotifySystemd("READY=1");
}

// The command line: the configuration's path, or an answer of its own (--version, --help, an
// unknown argument) as an exit status in `*exit_now`.
struct Args {
  std::string config_path = kDefaultConfig;
  bool check = false;
};
bool ParseArgs(int argc, char** argv, Args* args, int* exit_now) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) {
      args->config_path = argv[++i];
    } else if (a.rfind("--config=", 0) == 0) {
      args->config_path = a.substr(9);
    } else if (a == "--check-config") {
      args->check = true;
    } else if (a == "--version" || a == "-V") {
      std::printf("autopard %s (protocol %d)\n", AUTOPAR_VERSION, autopar::kProtocolVersion);
      *exit_now = 0;
      return false;
    } else if (a == "--help" || a == "-h") {
      *exit_now = Usage(stdout, 0);
      return false;
    } else {
      std::fprintf(stderr, "autopard: unknown argument '%s'\n", a.c_str());
      *exit_now = Usage(stderr, 2);
      return false;
    }
  }
  return true;
}

// Room for max_connections descriptors besides the database's, the uploads' and the stores'
// (systemd's default soft limit is 1024): raised up to the hard limit, else a warning.
void RaiseDescriptorLimit(int max_connections) {
  rlimit files{};
  const rlim_t want = static_cast<rlim_t>(max_connections) + 512;
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur >= want) return;
  files.rlim_cur = std::min(want, files.rlim_max);
  setrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur < want) {
    autopar::Log(autopar::LogLevel::kWarning,
                 "max_connections %d: the descriptor limit is %llu (hard); connections beyond "
                 "it wait in the socket's backlog",
                 max_connections, static_cast<unsigned long long>(files.rlim_max));
  }
}

// One libslurm user for the whole daemon: owner lookups and failure handling share it. libslurm
// ends the process when it finds no configuration, so without a readable slurm.conf (a daemon
// serving only checkpoints, e.g. in tests and benchmarks) neither is available: null, and why
// in `*why`.
std::shared_ptr<autopar::SlurmActions> OpenSlurm(const std::string& slurm_conf, std::string* why) {
  auto opened = autopar::OpenLibSlurmActions(slurm_conf);
  if (opened.ok()) return std::move(*opened);
  *why = opened.message();
  autopar::Log(autopar::LogLevel::kWarning,
               "%s: job owners cannot be looked up (only root and SlurmUser may use this "
               "daemon) and failure handling (requeue) is off",
               why->c_str());
  return nullptr;
}

// Signals go to a dedicated thread: blocked here before any other thread starts (every thread
// inherits the mask), so that none of them is ended by SIGTERM's default action.
sigset_t BlockSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return set;
}

// The thread that takes the blocked signals: SIGHUP reloads, SIGTERM and SIGINT stop the daemon.
void HandleSignals(const sigset_t& set, const std::string& config_path, autopar::Daemon* d) {
  std::thread([d, set, config_path] {
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (sig == SIGHUP) {
        Reload(config_path, d);
        continue;
      }
      (void)autopar::NotifySystemd("STOPPING=1");
      autopar::Log(autopar::LogLevel::kNotice, "%s: stopping (pending uploads resume at the next start)",
                   strsignal(sig));
      d->Stop();
      return;
    }
  }).detach();
}

// Creates the daemon and serves until a signal stops it; the exit status.
int Run(const std::string& config_path, const autopar::DaemonConfig& config, const autopar::JobLimits& limits) {
  const sigset_t signals = BlockSignals();
  std::string no_slurm;
  std::shared_ptr<autopar::SlurmActions> slurm = OpenSlurm(config.slurm_conf, &no_slurm);
  auto daemon = autopar::Daemon::Create(config, autopar::MakeSlurmJobOwners(slurm, no_slurm));
  if (!daemon) {
    autopar::Log(autopar::LogLevel::kError, "%s", daemon.message().c_str());
    return 1;
  }
  autopar::Daemon* d = daemon->get();
  if (slurm) d->EnableFailureHandling(slurm, limits);
  HandleSignals(signals, config_path, d);
  autopar::Status st = d->Serve([] {
    if (autopar::Status n = autopar::NotifySystemd("READY=1"); !n) {
      autopar::Log(autopar::LogLevel::kWarning, "%s", n.message().c_str());
    }
  });
  if (!st) {
    autopar::Log(autopar::LogLevel::kError, "%s", st.message().c_str());
    return 1;
  }
  daemon->reset();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Buffers of 256 KiB and more (curl's 512 KiB and 2 MiB transfer buffers, upload parts) are
  // mapped and unmapped on their own. glibc's default raises that threshold to the largest block
  // freed so far, after which such buffers come from the arenas and their memory stays with the
  // daemon after a burst of uploads.
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  Args args;
  if (int exit_now = 0; !ParseArgs(argc, argv, &args, &exit_now)) return exit_now;
  auto config = autopar::LoadDaemonConfig(args.config_path);
  if (!config) {
    autopar::Log(autopar::LogLevel::kError, "%s", config.message().c_str());
    return 1;
  }
  autopar::SetLogLevel(config->log_level);
  // The site's limits on what a job may ask for (its environment is its owner's to change).
  auto site = SiteSettingsFor(*config);
  if (!site) {
    autopar::Log(autopar::LogLevel::kError, "%s", site.message().c_str());
    return 1;
  }
  for (const auto& problem : site->problems) {
    autopar::Log(autopar::LogLevel::kWarning, "%s (its default holds)", problem.c_str());
  }
  const std::string limits_text = LimitsText(*site);
  if (args.check) {
    std::printf("autopard: %s: OK (socket %s, state %s; %s)\n", args.config_path.c_str(),
                config->socket.c_str(), config->state_dir.c_str(), limits_text.c_str());
    return 0;
  }
  autopar::Log(autopar::LogLevel::kInfo, "%s", limits_text.c_str());
  RaiseDescriptorLimit(config->max_connections);
  return Run(args.config_path, *config, autopar::JobLimitsOf(site->site));
}
