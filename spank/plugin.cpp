// autopar.so: the SPANK plugin's entry points and nothing else. Every hook catches everything (no
// exception crosses the C ABI) and hands the work to the tested core: option parsing and checks
// (core/options.cpp, core/site_config.cpp) and the task environment (core/task_env.cpp).
// spank.h declares the slurm_spank_* hooks outside its own extern "C" block (it is written for C);
// include it with C linkage so that our definitions below match the declarations.
extern "C" {
#include <slurm/spank.h>
}

#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "autopar/options.h"
#include "autopar/site_config.h"
#include "autopar/task_env.h"
#include "spank_task.h"

#define AUTOPAR_EXPORT extern "C" __attribute__((visibility("default")))

AUTOPAR_EXPORT const char plugin_name[] = "autopar";
AUTOPAR_EXPORT const char plugin_type[] = "spank";
AUTOPAR_EXPORT const unsigned int plugin_version = SLURM_VERSION_NUMBER;
AUTOPAR_EXPORT const unsigned int spank_plugin_version = 1;

namespace {

using autopar::JobOptions;
using autopar::OptionId;
using autopar::SiteConfig;
using autopar::Status;

// One plugin instance per process (srun, sbatch, slurmstepd): its site config and the options seen.
struct PluginState {
  SiteConfig site;
  JobOptions user;
  std::string site_error;    // plugstack.conf problem, reported once
  std::string option_error;  // first bad option seen in the remote context
};

PluginState& State() {
  static PluginState state;
  return state;
}

int Fail(const std::string& message) {
  slurm_error("autopar: %s", message.c_str());
  return -1;
}

int OptionCallback(int val, const char* optarg, int remote) {
  try {
    PluginState& st = State();
    // An option given without its optional argument travels to later steps of a batch job as the
    // literal text "(null)" (Slurm 22.05 prints the NULL optarg into SLURM_SPANK__SLURM_SPANK_OPTION_*
    // of the job's environment); read it back as "no argument".
    if (optarg != nullptr && std::strcmp(optarg, "(null)") == 0) optarg = nullptr;
    Status s = autopar::SetOption(st.user, static_cast<OptionId>(val), optarg, st.site);
    if (s.ok()) return 0;
    if (remote) {
      // Checked at submit time already; a difference here means the site config changed. Tell
      // the user in task_init, where the message reaches them (see slurm_spank_task_init).
      if (st.option_error.empty()) st.option_error = s.message();
      return 0;
    }
    return Fail(s.message());
  } catch (const std::exception& e) {
    return Fail(std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail("internal error");
  }
}

// spank_option_register keeps pointers to these strings for the life of the process.
std::vector<struct spank_option>& RegisteredOptions() {
  static std::vector<struct spank_option> opts = [] {
    std::vector<struct spank_option> v;
    for (const autopar::OptionSpec& spec : autopar::OptionTable()) {
      struct spank_option o {};
      o.name = const_cast<char*>(spec.name);
      o.arginfo = const_cast<char*>(spec.arginfo);
      o.usage = const_cast<char*>(spec.usage);
      o.has_arg = spec.optional_arg ? 2 : 1;
      o.val = static_cast<int>(spec.id);
      o.cb = OptionCallback;
      v.push_back(o);
    }
    return v;
  }();
  return opts;
}

int Init(spank_t sp, int ac, char** av) {
  PluginState& st = State();
  auto site = autopar::ParseSiteConfig(std::vector<std::string>(av, av + ac));
  if (site.ok()) {
    st.site = *site;
  } else {
    st.site_error = site.message();
    // Still register the options so that scripts with #SBATCH lines fail with this error instead
    // of "unrecognized option".
  }
  // The static spank_options table is ignored by sbatch/salloc (man spank); register each option.
  for (struct spank_option& o : RegisteredOptions()) {
    spank_err_t rc = spank_option_register(sp, &o);
    if (rc != ESPANK_SUCCESS)
      return Fail(std::string("cannot register --") + o.name + ": " + spank_strerror(rc));
  }
  if (!st.site_error.empty()) return Fail(st.site_error);
  return 0;
}

// Submit time (sbatch, salloc, srun): the checks that span several options.
int InitPostOpt() {
  PluginState& st = State();
  spank_context_t ctx = spank_context();
  if (ctx != S_CTX_ALLOCATOR && ctx != S_CTX_LOCAL) return 0;
  auto resolved = autopar::ResolveOptions(st.user, st.site);
  if (!resolved.ok()) return Fail(resolved.message());
  return 0;
}

int TaskInit(spank_t sp) {
  PluginState& st = State();
  // Errors from user_init do not reach srun's terminal (pyxis works around the same Slurm
  // behaviour by failing in task_init); task_init runs in the task, whose stderr the user sees.
  if (!st.option_error.empty()) return Fail(st.option_error);
  auto resolved = autopar::ResolveOptions(st.user, st.site);
  if (!resolved.ok()) return Fail(resolved.message());
  auto task = autopar::spank::ReadTaskContext(sp);
  if (!task.ok()) return Fail(task.message());
  auto env = autopar::BuildTaskEnv(*task, *resolved, st.site);
  if (!env.ok()) return Fail(env.message());
  for (const auto& [name, value] : env->set) {
    spank_err_t rc = spank_setenv(sp, name.c_str(), value.c_str(), 1);
    if (rc != ESPANK_SUCCESS) return Fail("cannot set " + name + ": " + spank_strerror(rc));
  }
  for (const auto& [name, value] : env->unless_present) {
    spank_err_t rc = spank_setenv(sp, name.c_str(), value.c_str(), 0);
    if (rc != ESPANK_SUCCESS && rc != ESPANK_ENV_EXISTS)
      return Fail("cannot set " + name + ": " + spank_strerror(rc));
  }
  return 0;
}

template <typename F>
int Guard(F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Fail(std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail("internal error");
  }
}

}  // namespace

AUTOPAR_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
  return Guard([&] { return Init(sp, ac, av); });
}

AUTOPAR_EXPORT int slurm_spank_init_post_opt(spank_t, int, char**) {
  return Guard([] { return InitPostOpt(); });
}

AUTOPAR_EXPORT int slurm_spank_task_init(spank_t sp, int, char**) {
  return Guard([&] { return TaskInit(sp); });
}
