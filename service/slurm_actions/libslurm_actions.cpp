// SlurmActions over libslurm (slurm_load_job, slurm_requeue, slurm_update_job, slurm_kill_job).
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <slurm/slurm.h>
#include <sys/socket.h>
#include <unistd.h>
#include <slurm/slurm_errno.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "service/slurm_actions/slurm_actions.h"

// libslurm exports this (src/common/slurm_protocol_defs.c, "slurm_" prefixed by its symbol
// renaming) but slurm.h does not declare it; scontrol uses it for "Reason=".
extern "C" char* slurm_job_reason_string(enum job_state_reason inx);

namespace autopar {
namespace {

const char* BaseStateName(uint32_t state) {
  static const char* const kNames[] = {"PENDING",   "RUNNING", "SUSPENDED", "COMPLETED",
                                       "CANCELLED", "FAILED",  "TIMEOUT",   "NODE_FAIL",
                                       "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"};
  uint32_t base = state & JOB_STATE_BASE;
  return base < sizeof kNames / sizeof kNames[0] ? kNames[base] : "UNKNOWN";
}

std::string Str(const char* s) { return s ? s : ""; }

std::string SlurmError() { return slurm_strerror(slurm_get_errno()); }

// True when a TCP connection to host:port is accepted within timeout_ms.
// How a TCP connection to host:port ended within timeout_ms.
enum class Probe { kConnected, kRefused, kNoRoute, kTimedOut, kUnknown };

Probe ProbeConnect(const std::string& host, uint16_t port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) {
    return Probe::kUnknown;
  }
  Probe out = Probe::kUnknown;
  for (addrinfo* a = res; a && out != Probe::kConnected; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int err = 0;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      out = Probe::kConnected;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, timeout_ms) == 1) {
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = EIO;
        out = err == 0 ? Probe::kConnected : out;
      } else {
        out = Probe::kTimedOut;
      }
    } else {
      err = errno;
    }
    if (err == ECONNREFUSED) out = Probe::kRefused;
    if (err == EHOSTUNREACH || err == ENETUNREACH) out = Probe::kNoRoute;
    close(fd);
  }
  freeaddrinfo(res);
  return out;
}

bool Connects(const std::string& host, uint16_t port, int timeout_ms) {
  return ProbeConnect(host, port, timeout_ms) == Probe::kConnected;
}

class LibSlurmActions : public SlurmActions {
 public:
  explicit LibSlurmActions(const std::string& slurm_conf) {
    if (!slurm_conf.empty()) setenv("SLURM_CONF", slurm_conf.c_str(), 1);
    slurm_init(slurm_conf.empty() ? nullptr : slurm_conf.c_str());
  }

  Result<SlurmJob> LoadJob(const std::string& job_id) override {
    auto id = ParseId(job_id);
    if (!id.ok()) return id.status();
    std::lock_guard<std::mutex> lock(mu_);
    job_info_msg_t* msg = nullptr;
    if (slurm_load_job(&msg, *id, SHOW_ALL | SHOW_DETAIL) != SLURM_SUCCESS || !msg) {
      return Status::Error("job " + job_id + ": Slurm does not know it (" + SlurmError() + ")");
    }
    if (msg->record_count < 1) {
      slurm_free_job_info_msg(msg);
      return Status::Error("job " + job_id + ": Slurm does not know it");
    }
    const slurm_job_info_t& j = msg->job_array[0];
    SlurmJob job;
    job.job_id = job_id;
    job.user_id = j.user_id;
    job.state = BaseStateName(j.job_state);
    job.completing = (j.job_state & JOB_COMPLETING) != 0;
    job.requeue_flag = (j.job_state & JOB_REQUEUE) != 0;
    job.requeue_allowed = j.requeue != 0;
    job.batch = j.batch_flag != 0;
    job.restart_count = j.restart_cnt;
    job.submit_time = static_cast<double>(j.submit_time);
    job.start_time = static_cast<double>(j.start_time);
    job.end_time = static_cast<double>(j.end_time);
    job.eligible_time = static_cast<double>(j.eligible_time);
    job.preempt_time = static_cast<double>(j.preempt_time);
    job.partition = Str(j.partition);
    job.time_limit_min = j.time_limit == INFINITE || j.time_limit == NO_VAL
                             ? -1
                             : static_cast<int64_t>(j.time_limit);
    job.nodes = Str(j.nodes);
    job.cpus = j.num_cpus == NO_VAL || j.num_cpus == INFINITE ? 0 : static_cast<int64_t>(j.num_cpus);
    job.tasks = j.num_tasks == NO_VAL || j.num_tasks == INFINITE ? 0 : static_cast<int64_t>(j.num_tasks);
    job.ntasks_per_node = j.ntasks_per_node == NO_VAL16 || j.ntasks_per_node == INFINITE16
                              ? 0
                              : static_cast<int64_t>(j.ntasks_per_node);
    job.batch_host = Str(j.batch_host);
    job.excluded_nodes = Str(j.exc_nodes);
    job.admin_comment = Str(j.admin_comment);
    job.reason = Str(slurm_job_reason_string(static_cast<job_state_reason>(j.state_reason)));
    slurm_free_job_info_msg(msg);
    return job;
  }

  int64_t MaxStepTasks(const std::string& job_id) override {
    auto id = ParseId(job_id);
    if (!id.ok()) return 0;
    std::lock_guard<std::mutex> lock(mu_);
    job_step_info_response_msg_t* msg = nullptr;
    if (slurm_get_job_steps(0, *id, NO_VAL, &msg, SHOW_ALL) != SLURM_SUCCESS || !msg) return 0;
    int64_t most = 0;
    for (uint32_t i = 0; i < msg->job_step_count; ++i) {
      const uint32_t n = msg->job_steps[i].num_tasks;
      if (n != NO_VAL && n != INFINITE) most = std::max<int64_t>(most, n);
    }
    slurm_free_job_step_info_response_msg(msg);
    return most;
  }

  Status Requeue(const std::string& job_id) override {
    auto id = ParseId(job_id);
    if (!id.ok()) return id.status();
    std::lock_guard<std::mutex> lock(mu_);
    if (slurm_requeue(*id, 0) != SLURM_SUCCESS) {
      return Status::Error("slurm_requeue(" + job_id + "): " + SlurmError());
    }
    return Status::Ok();
  }

  Status Update(const SlurmJobUpdate& u) override {
    auto id = ParseId(u.job_id);
    if (!id.ok()) return id.status();
    job_desc_msg_t desc;
    slurm_init_job_desc_msg(&desc);
    desc.job_id = *id;
    // job_desc_msg_t holds non-const char*; the strings outlive the call.
    std::string exc = u.excluded_nodes.value_or("");
    std::string comment = u.admin_comment.value_or("");
    if (u.excluded_nodes) desc.exc_nodes = exc.data();
    if (u.admin_comment) desc.admin_comment = comment.data();
    if (u.begin_time) desc.begin_time = static_cast<time_t>(*u.begin_time);
    if (u.num_tasks) desc.num_tasks = static_cast<uint32_t>(*u.num_tasks);
    std::lock_guard<std::mutex> lock(mu_);
    if (slurm_update_job(&desc) != SLURM_SUCCESS) {
      return Status::Error("slurm_update_job(" + u.job_id + "): " + SlurmError());
    }
    return Status::Ok();
  }

  std::vector<std::string> UnreachableNodes(const std::vector<std::string>& nodes,
                                            int timeout_ms) override {
    std::vector<std::string> lost;
    for (const auto& name : nodes) {
      std::string addr;
      uint16_t port = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        node_info_msg_t* msg = nullptr;
        std::string n = name;
        if (slurm_load_node_single(&msg, n.data(), SHOW_ALL) != SLURM_SUCCESS || !msg) continue;
        if (msg->record_count >= 1) {
          addr = Str(msg->node_array[0].node_addr);
          if (addr.empty()) addr = Str(msg->node_array[0].node_hostname);
          port = msg->node_array[0].port;
        }
        slurm_free_node_info_msg(msg);
      }
      if (addr.empty() || port == 0) continue;
      if (!Connects(addr, port, timeout_ms)) lost.push_back(name);
    }
    return lost;
  }

  Result<std::string> LossEvidence(const std::string& node, int timeout_ms) override {
    std::string addr;
    uint16_t port = 0;
    bool not_responding = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      node_info_msg_t* msg = nullptr;
      std::string n = node;
      if (slurm_load_node_single(&msg, n.data(), SHOW_ALL) != SLURM_SUCCESS || !msg) {
        return Status::Error("slurmctld does not know it: " + SlurmError());
      }
      if (msg->record_count >= 1) {
        const node_info_t& info = msg->node_array[0];
        addr = Str(info.node_addr);
        if (addr.empty()) addr = Str(info.node_hostname);
        port = info.port;
        not_responding = (info.node_state & NODE_STATE_NO_RESPOND) != 0 ||
                         (info.node_state & NODE_STATE_BASE) == NODE_STATE_DOWN;
      }
      slurm_free_node_info_msg(msg);
    }
    if (not_responding) return std::string("slurmctld finds it not responding");
    switch (addr.empty() || port == 0 ? Probe::kUnknown : ProbeConnect(addr, port, timeout_ms)) {
      case Probe::kRefused:
        return std::string("slurmd refuses connections (nothing listens)");
      case Probe::kNoRoute:
        return std::string("no route to its host");
      case Probe::kConnected:
        return Status::Error("its slurmd answers again");
      default:
        return Status::Error("its slurmd did not answer within " + std::to_string(timeout_ms) +
                             " ms, which a full accept queue also causes; slurmctld still finds it "
                             "responding and decides itself (SlurmdTimeout)");
    }
  }

  Status MarkNodeDown(const std::string& node, const std::string& reason) override {
    update_node_msg_t msg;
    slurm_init_update_node_msg(&msg);
    std::string names = node, why = reason;
    msg.node_names = names.data();
    msg.node_state = NODE_STATE_DOWN;
    msg.reason = why.data();
    std::lock_guard<std::mutex> lock(mu_);
    if (slurm_update_node(&msg) != SLURM_SUCCESS) {
      return Status::Error("slurm_update_node(" + node + ", DOWN): " + SlurmError());
    }
    return Status::Ok();
  }

  Result<std::pair<std::string, double>> ProcessTracking() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (tracking_) return *tracking_;  // a setting of slurm.conf: read once
    slurm_conf_t* conf = nullptr;
    if (slurm_load_ctl_conf(static_cast<time_t>(0), &conf) != SLURM_SUCCESS || !conf) {
      return Status::Error("slurm_load_ctl_conf: " + SlurmError());
    }
    tracking_ = std::make_pair(std::string(conf->proctrack_type ? conf->proctrack_type : ""),
                               static_cast<double>(conf->kill_wait));
    slurm_free_ctl_conf(conf);
    return *tracking_;
  }

  Status Cancel(const std::string& job_id) override {
    auto id = ParseId(job_id);
    if (!id.ok()) return id.status();
    std::lock_guard<std::mutex> lock(mu_);
    if (slurm_kill_job(*id, SIGKILL, 0) != SLURM_SUCCESS) {
      return Status::Error("slurm_kill_job(" + job_id + "): " + SlurmError());
    }
    return Status::Ok();
  }

 private:
  static Result<uint32_t> ParseId(const std::string& job_id) {
    char* end = nullptr;
    unsigned long id = std::strtoul(job_id.c_str(), &end, 10);
    if (job_id.empty() || *end != '\0' || id == 0 || id > 0xfffffff0ul) {
      return Status::Error("job " + job_id + ": not a numeric Slurm job id");
    }
    return static_cast<uint32_t>(id);
  }
  std::mutex mu_;
  std::optional<std::pair<std::string, double>> tracking_;
};

}  // namespace

std::unique_ptr<SlurmActions> MakeLibSlurmActions(const std::string& slurm_conf) {
  return std::make_unique<LibSlurmActions>(slurm_conf);
}

std::string SlurmConfPath(const std::string& slurm_conf) {
  if (!slurm_conf.empty()) return slurm_conf;
  const char* env = std::getenv("SLURM_CONF");
  return env && *env ? env : "/etc/slurm/slurm.conf";
}

Result<std::unique_ptr<SlurmActions>> OpenLibSlurmActions(const std::string& slurm_conf) {
  std::string path = SlurmConfPath(slurm_conf);
  if (access(path.c_str(), R_OK) != 0) {
    return Status::Error("slurm.conf " + path + ": not readable (" + std::strerror(errno) + ")");
  }
  return MakeLibSlurmActions(slurm_conf);
}

}  // namespace autopar
