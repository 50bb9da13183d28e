#include "core/options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/ckpt/ckpt_uri.h"
#include "core/plan/grad_sharding.h"
#include "core/plan/hardware.h"
#include "core/plan/model.h"
#include "core/site_config.h"
#include "core/text.h"

namespace autopar {
namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxNodes = 100000;  // far above any cluster; Slurm's own node limit is lower

const std::vector<OptionSpec> kOptions = {
    {OptionId::kAutoParallel, "auto-parallel",
     "auto|tp=T,pp=P[,cp=C][,ep=E][,dp=D]|[tp=T,]fsdp[=N]|[tp=T,]hsdp=S,R[,grad_sharding=on|off]"
     "[,grad_reduce=fp32|bf16]",
     "Plan tensor/pipeline/data parallelism for the job (auto) or pin sizes", true,
     "AUTOPAR_AUTO_PARALLEL"},
    {OptionId::kModel, "model", "PRESET|SIZE|FILE.json",
     "Model to plan for: a preset (llama-2-7b, gpt3-175b, ...), a size (7B) or an architecture file",
     false, "AUTOPAR_MODEL"},
    {OptionId::kGpuType, "gpu-type", "TYPE", "GPU type for the planner (a100-80gb, h100-80gb, ...)",
     false, "AUTOPAR_GPU_TYPE"},
    {OptionId::kGlobalBatch, "global-batch", "SAMPLES", "Global batch size in samples", false,
     "AUTOPAR_GLOBAL_BATCH"},
    {OptionId::kSeqLen, "seq-len", "TOKENS", "Sequence length in tokens", false, "AUTOPAR_SEQ_LEN"},
    {OptionId::kCkptDir, "ckpt-dir", "PATH",
     "Node-local checkpoint directory (%j job id, %n node, %u user)", false, "AUTOPAR_CKPT_DIR"},
    {OptionId::kCkptUpload, "ckpt-upload", "URI",
     "Upload checkpoints asynchronously to s3://bucket/prefix or file:///shared/path", false,
     "AUTOPAR_CKPT_UPLOAD"},
    {OptionId::kCkptKeep, "ckpt-keep", "K", "Keep the last K complete checkpoints", false,
     "AUTOPAR_CKPT_KEEP"},
    {OptionId::kRequeueOnFailure, "requeue-on-failure", "N",
     "Requeue the job up to N times on node loss, crashed rank, hang or time limit", true,
     "AUTOPAR_REQUEUE_ON_FAILURE"},
    {OptionId::kHeartbeatTimeout, "heartbeat-timeout", "SECONDS",
     "Treat the job as hung after SECONDS without progress from any rank", false,
     "AUTOPAR_HEARTBEAT_TIMEOUT"},
    {OptionId::kRestartsInPlace, "restarts-in-place", "N",
     "Restart a crashed or hung program up to N times inside the running job before requeueing",
     false, "AUTOPAR_RESTARTS_IN_PLACE"},
    {OptionId::kSpareNodes, "spare-nodes", "K",
     "Hold K of the job's nodes in reserve: a lost node is replaced by a spare, in place", false,
     "AUTOPAR_SPARE_NODES"},
    {OptionId::kMinNodes, "min-nodes", "M",
     "Elastic: a lost node without a spare leaves the run going, re-planned, on the nodes left "
     "while at least M remain",
     false, "AUTOPAR_MIN_NODES"},
    {OptionId::kOnBadLoss, "on-bad-loss", "warn|rollback[:N]|stop",
     "When the loss turns NaN/Inf or spikes: journal it, roll back to the last complete "
     "checkpoint before it (up to N times), or end the job",
     false, "AUTOPAR_ON_BAD_LOSS"},
    {OptionId::kLossSpike, "loss-spike", "FACTOR",
     "A loss above FACTOR times its recent mean is bad, like NaN (0: only NaN/Inf)", false,
     "AUTOPAR_LOSS_SPIKE"},
    {OptionId::kIdleTimeout, "idle-timeout", "SECONDS",
     "Flag the job as idle after SECONDS without progress or use of its CPUs and GPUs (0: never)",
     false, "AUTOPAR_IDLE_TIMEOUT"},
    {OptionId::kExcludeStragglers, "exclude-stragglers", "yes|no",
     "Leave a node flagged as a straggler out of the job's next restart (yes when given alone)",
     true, "AUTOPAR_EXCLUDE_STRAGGLERS"},
    {OptionId::kFaultTolerance, "fault-tolerance", "off|step",
     "step: a failed rank's program is replaced alone, healed from a live peer, while every other "
     "rank's goes on (a program on autopar.ft)",
     false, "AUTOPAR_FAULT_TOLERANCE"},
};

std::string Flag(OptionId id) { return std::string("--") + GetOptionSpec(id).name; }

Status Bad(OptionId id, const std::string& why) { return Status::Error(Flag(id) + ": " + why); }

// Prefixes a lookup's error with the option's flag unless it names it already.
Status Named(OptionId id, const Status& s) {
  return StartsWith(s.message(), Flag(id)) ? s : Bad(id, s.message());
}

Result<int64_t> ParseRanged(OptionId id, const char* value, int64_t min, int64_t max) {
  if (value == nullptr) return Bad(id, "needs a value");
  if (auto v = ParseInt(value, min, max)) return *v;
  return Bad(id, "must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
                     "], got '" + value + "'");
}

// Parses an integer option within [min, max] into `field`.
Status SetRanged(OptionId id, const char* value, int64_t min, int64_t max,
                 std::optional<int64_t>* field) {
  auto v = ParseRanged(id, value, min, max);
  if (!v) return v.status();
  *field = *v;
  return Status::Ok();
}

std::string ShortNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

bool HasDotDot(const std::string& path) {
  for (const std::string& part : Split(path, '/'))
    if (part == "..") return true;
  return false;
}

// A destination is allowed by a prefix when it equals it or continues it at a '/' boundary.
bool UnderPrefix(const std::string& s, const std::string& prefix) {
  if (!StartsWith(s, prefix)) return false;
  return s.size() == prefix.size() || prefix.back() == '/' || s[prefix.size()] == '/';
}

Status CheckCkptDir(const std::string& dir, const SiteConfig& site) {
  const OptionId id = OptionId::kCkptDir;
  if (dir.empty() || dir[0] != '/') return Bad(id, "must be an absolute path, got '" + dir + "'");
  if (HasDotDot(dir)) return Bad(id, "must not contain '..', got '" + dir + "'");
  for (size_t i = 0; i < dir.size(); ++i) {
    if (dir[i] != '%') continue;
    if (i + 1 == dir.size() || std::string("jnu%").find(dir[i + 1]) == std::string::npos)
      return Bad(id, "unknown placeholder in '" + dir + "' (use %j, %n, %u or %%)");
    ++i;
  }
  if (!site.ckpt_dir_prefixes.empty()) {
    bool allowed = false;
    for (const auto& p : site.ckpt_dir_prefixes) allowed = allowed || UnderPrefix(dir, p);
    if (!allowed)
      return Bad(id, "'" + dir + "' is outside what this site allows (" +
                         Join(site.ckpt_dir_prefixes, ", ") + ")");
  }
  return Status::Ok();
}

// The URI's syntax is ParseCheckpointUri's, the one parser a commit and an upload use too (so
// whatever sbatch accepts, a commit accepts); the site's schemes and prefixes apply to its
// canonical form.
Status CheckCkptUpload(const std::string& text, const SiteConfig& site) {
  const OptionId id = OptionId::kCkptUpload;
  auto parsed = ParseCheckpointUri(text);
  if (!parsed.ok()) return Named(id, parsed.status());
  const std::string uri = parsed->ToString();
  const std::string scheme = parsed->kind == CheckpointUri::Kind::kS3 ? "s3" : "file";
  bool scheme_allowed = false;
  for (const auto& s : site.ckpt_upload_schemes) scheme_allowed = scheme_allowed || s == scheme;
  if (!scheme_allowed)
    return Bad(id, "scheme '" + scheme + "' is not allowed on this site (allowed: " +
                       Join(site.ckpt_upload_schemes, ", ") + ")");
  if (!site.ckpt_upload_prefixes.empty()) {
    bool allowed = false;
    for (const auto& p : site.ckpt_upload_prefixes) allowed = allowed || UnderPrefix(uri, p);
    if (!allowed)
      return Bad(id, "'" + uri + "' is outside what this site allows (" +
                         Join(site.ckpt_upload_prefixes, ", ") + ")");
  }
  return Status::Ok();
}

}  // namespace

const std::vector<OptionSpec>& OptionTable() { return kOptions; }

const OptionSpec& GetOptionSpec(OptionId id) {
  for (const auto& spec : kOptions)
    if (spec.id == id) return spec;
  return kOptions.front();  // unreachable: every OptionId is in the table (tested)
}

std::string ParallelSpec::ToString() const {
  if (!pinned() && grad_sharding.empty() && grad_reduce.empty()) return "auto";
  std::vector<std::string> parts;
  if (tp) parts.push_back("tp=" + std::to_string(tp));
  if (cp) parts.push_back("cp=" + std::to_string(cp));
  if (ep) parts.push_back("ep=" + std::to_string(ep));
  if (pp) parts.push_back("pp=" + std::to_string(pp));
  if (dp) parts.push_back("dp=" + std::to_string(dp));
  if (fsdp_replicate) {
    parts.push_back("hsdp=" + std::to_string(fsdp_shard) + "," + std::to_string(fsdp_replicate));
  } else if (fsdp_shard) {
    parts.push_back("fsdp=" + std::to_string(fsdp_shard));
  } else if (fsdp) {
    parts.push_back("fsdp");
  }
  if (!grad_sharding.empty()) parts.push_back("grad_sharding=" + grad_sharding);
  if (!grad_reduce.empty()) parts.push_back("grad_reduce=" + grad_reduce);
  return Join(parts, ",");
}

std::string BadLossPolicy::ToString() const {
  switch (action) {
    case BadLossAction::kWarn: return "warn";
    case BadLossAction::kStop: return "stop";
    case BadLossAction::kRollback: return "rollback:" + std::to_string(rollbacks);
  }
  return "warn";
}

Result<BadLossPolicy> ParseBadLossPolicy(const std::string& text, int64_t default_rollbacks,
                                         int64_t max_rollbacks) {
  BadLossPolicy p;
  const size_t colon = text.find(':');
  const std::string word = text.substr(0, colon);
  if (word == "warn" || word == "stop") {
    if (colon != std::string::npos)
      return Bad(OptionId::kOnBadLoss, "'" + word + "' takes no count, got '" + text + "'");
    p.action = word == "warn" ? BadLossAction::kWarn : BadLossAction::kStop;
    return p;
  }
  if (word != "rollback")
    return Bad(OptionId::kOnBadLoss, "must be warn, rollback[:N] or stop, got '" + text + "'");
  p.action = BadLossAction::kRollback;
  if (colon == std::string::npos) {
    p.rollbacks = std::min(default_rollbacks, max_rollbacks);
    if (p.rollbacks < 1)
      return Bad(OptionId::kOnBadLoss, "rollbacks are off on this site (max_rollbacks=0)");
    return p;
  }
  auto n = ParseInt(text.substr(colon + 1), 1, max_rollbacks);
  if (!n)
    return Bad(OptionId::kOnBadLoss, "rollback:N needs N in [1, " + std::to_string(max_rollbacks) +
                                         "], got '" + text.substr(colon + 1) + "'");
  p.rollbacks = *n;
  return p;
}

Result<double> ParseLossSpike(const std::string& text) {
  char* end = nullptr;
  const double f = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || *end != '\0' || !(f == 0 || (f > 1 && f <= 1000)))
    return Bad(OptionId::kLossSpike,
               "must be 0 (off) or a factor in (1, 1000], got '" + text + "'");
  return f;
}

namespace {

// "fsdp", "fsdp=N" or "hsdp=S,R" (R is the item after "hsdp=S") into `spec`; `*i` is the item's
// index, advanced past R. The error says what is wrong, without the option's name.
std::string ParseFsdpItem(const std::vector<std::string>& items, size_t* i, ParallelSpec* spec) {
  const std::string& item = items[*i];
  if (spec->fsdp) return "FSDP given twice ('" + item + "')";
  spec->fsdp = true;
  if (item == "fsdp") return "";
  const bool hsdp = StartsWith(item, "hsdp=");
  auto shard = ParseInt(item.substr(5), 2, 65536);
  if (!shard) {
    return (hsdp ? "hsdp=S,R needs S" : "fsdp=N needs N") +
           std::string(" an integer in [2, 65536] (the GPUs of a shard group), got '") +
           item.substr(5) + "'";
  }
  spec->fsdp_shard = *shard;
  if (!hsdp) return "";
  auto replicate = *i + 1 < items.size() ? ParseInt(items[*i + 1], 1, 65536) : std::nullopt;
  if (!replicate) {
    return "hsdp=S,R needs R, the replicas of a shard group, an integer in [1, 65536]";
  }
  spec->fsdp_replicate = *replicate;
  ++*i;
  return "";
}

}  // namespace

Status CheckWholeStatePin(const ParallelSpec& pin) {
  if (pin.tp <= 1 && pin.pp <= 1 && pin.cp <= 1 && pin.ep <= 1 && !pin.fsdp && pin.fsdp_shard == 0 &&
      pin.fsdp_replicate == 0 && pin.grad_sharding != "on") {
    return Status::Ok();
  }
  return Bad(OptionId::kFaultTolerance,
             "step heals only a state every rank holds whole, and --auto-parallel=" +
                 pin.ToString() +
                 " shards it (tp, pp, cp, ep, FSDP or ZeRO-2); pin data parallelism alone or leave "
                 "step off");
}

Result<ParallelSpec> ParseParallelSpec(const std::string& text) {
  ParallelSpec spec;
  if (text.empty() || text == "auto") return spec;
  auto bad = [&](const std::string& why) {
    return Bad(OptionId::kAutoParallel,
               why + " (expected auto, tp=T,pp=P[,cp=C][,ep=E][,dp=D], fsdp[=N] or hsdp=S,R, "
                     "each with [,grad_sharding=on|off][,grad_reduce=fp32|bf16])");
  };
  const std::vector<std::string> items = Split(text, ',');
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string& item = items[i];
    if (item == "fsdp" || StartsWith(item, "fsdp=") || StartsWith(item, "hsdp=")) {
      const std::string why = ParseFsdpItem(items, &i, &spec);
      if (!why.empty()) return bad(why);
      continue;
    }
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return bad("'" + item + "' is not KEY=VALUE");
    const std::string key = item.substr(0, eq);
    if (key == "grad_reduce" || key == "grad_sharding") {
      const std::string value = item.substr(eq + 1);
      const bool precision = key == "grad_reduce";
      std::string& slot = precision ? spec.grad_reduce : spec.grad_sharding;
      if (!slot.empty()) return bad("'" + key + "' given twice");
      const char* first = precision ? "fp32" : "on";
      const char* second = precision ? "bf16" : "off";
      if (value != first && value != second) {
        return bad(key + " must be " + first + " or " + second + ", got '" + value + "'");
      }
      slot = value;
      continue;
    }
    auto v = ParseInt(item.substr(eq + 1), 1, 65536);
    if (!v) return bad(key + " must be an integer in [1, 65536], got '" + item.substr(eq + 1) + "'");
    int64_t* slot = key == "tp"   ? &spec.tp
                    : key == "cp" ? &spec.cp
                    : key == "ep" ? &spec.ep
                    : key == "pp" ? &spec.pp
                    : key == "dp" ? &spec.dp
                                  : nullptr;
    if (!slot) return bad("unknown key '" + key + "'");
    if (*slot) return bad("'" + key + "' given twice");
    *slot = *v;
  }
  if (spec.fsdp && (spec.pp > 1 || spec.cp > 1 || spec.ep > 1)) {
    return bad("FSDP is planned without pipeline, context or expert parallelism (pp, cp, ep)");
  }
  if (spec.grad_sharding == "on") {
    GradShardingShape shape{spec.fsdp, std::max<int64_t>(spec.pp, 1), spec.ep > 1, std::nullopt};
    if (spec.dp == 1 && spec.cp <= 1) shape.data_ranks = 1;
    const std::string why = GradShardingRefusal(shape);
    if (!why.empty()) return bad("grad_sharding=on: ZeRO-2 " + why);
  }
  return spec;
}

namespace {

Status SetAutoParallel(JobOptions& opts, const std::string& text) {
  auto spec = ParseParallelSpec(text);
  if (!spec) return spec.status();
  opts.auto_parallel = *spec;
  return Status::Ok();
}

Status SetModel(JobOptions& opts, const std::string& text) {
  auto model = ResolveModel(text);
  if (!model) return Named(OptionId::kModel, model.status());
  opts.model = text;
  return Status::Ok();
}

Status SetGpuType(JobOptions& opts, const std::string& text) {
  auto gpu = ResolveGpuType(text);
  if (!gpu) return Named(OptionId::kGpuType, gpu.status());
  opts.gpu_type = ToLower(text);
  return Status::Ok();
}

Status SetCkptDir(JobOptions& opts, const std::string& text, const SiteConfig& site) {
  if (Status s = CheckCkptDir(text, site); !s.ok()) return s;
  opts.ckpt_dir = text;
  return Status::Ok();
}

Status SetCkptUpload(JobOptions& opts, const std::string& text, const SiteConfig& site) {
  if (Status s = CheckCkptUpload(text, site); !s.ok()) return s;
  opts.ckpt_upload = text;
  return Status::Ok();
}

// Given alone, the site's default count (within its maximum).
Status SetRequeueOnFailure(JobOptions& opts, const char* value, const SiteConfig& site) {
  if (value == nullptr || value[0] == '\0') {
    opts.requeue_on_failure = std::min(site.requeue_default_count, site.max_requeue);
    return Status::Ok();
  }
  return SetRanged(OptionId::kRequeueOnFailure, value, 0, site.max_requeue,
                   &opts.requeue_on_failure);
}

Status SetOnBadLoss(JobOptions& opts, const std::string& text, const SiteConfig& site) {
  auto p = ParseBadLossPolicy(text, site.rollbacks_default, site.max_rollbacks);
  if (!p) return p.status();
  opts.on_bad_loss = *p;
  return Status::Ok();
}

Status SetIdleTimeout(JobOptions& opts, const char* value) {
  const OptionId id = OptionId::kIdleTimeout;
  auto v = ParseRanged(id, value, 0, 7 * 86400);
  if (!v) return v.status();
  if (*v != 0 && *v < 10) {
    return Bad(id, "must be 0 (never) or at least 10 seconds, got '" + std::string(value) + "'");
  }
  opts.idle_timeout = *v;
  return Status::Ok();
}

// Given alone, yes.
Status SetExcludeStragglers(JobOptions& opts, const std::string& text) {
  if (text.empty() || text == "yes") {
    opts.exclude_stragglers = true;
  } else if (text == "no") {
    opts.exclude_stragglers = false;
  } else {
    return Bad(OptionId::kExcludeStragglers, "must be yes or no, got '" + text + "'");
  }
  return Status::Ok();
}

Status SetFaultTolerance(JobOptions& opts, const std::string& text, const SiteConfig& site) {
  const OptionId id = OptionId::kFaultTolerance;
  if (text != "off" && text != "step") return Bad(id, "must be off or step, got '" + text + "'");
  if (text == "step" && !site.allow_fault_tolerance) {
    return Bad(id, "step is off on this site (allow_fault_tolerance=no)");
  }
  opts.fault_tolerance_step = text == "step";
  return Status::Ok();
}

Status SetLossSpike(JobOptions& opts, const std::string& text) {
  auto f = ParseLossSpike(text);
  if (!f) return f.status();
  opts.loss_spike = *f;
  return Status::Ok();
}

}  // namespace

Status SetOption(JobOptions& opts, OptionId id, const char* value, const SiteConfig& site) {
  const std::string text = value ? value : "";
  if (value == nullptr && !GetOptionSpec(id).optional_arg) return Bad(id, "needs a value");
  if (value != nullptr && text.empty() && !GetOptionSpec(id).optional_arg)
    return Bad(id, "needs a value");
  switch (id) {
    case OptionId::kAutoParallel:
      return SetAutoParallel(opts, text);
    case OptionId::kModel:
      return SetModel(opts, text);
    case OptionId::kGpuType:
      return SetGpuType(opts, text);
    case OptionId::kGlobalBatch:
      return SetRanged(id, value, 1, kMaxInt32, &opts.global_batch);
    case OptionId::kSeqLen:
      return SetRanged(id, value, 1, 1 << 24, &opts.seq_len);
    case OptionId::kCkptDir:
      return SetCkptDir(opts, text, site);
    case OptionId::kCkptUpload:
      return SetCkptUpload(opts, text, site);
    case OptionId::kCkptKeep:
      return SetRanged(id, value, 1, site.max_ckpt_keep, &opts.ckpt_keep);
    case OptionId::kRequeueOnFailure:
      return SetRequeueOnFailure(opts, value, site);
    case OptionId::kHeartbeatTimeout:
      return SetRanged(id, value, site.min_heartbeat_timeout, site.max_heartbeat_timeout,
                       &opts.heartbeat_timeout);
    case OptionId::kRestartsInPlace:
      return SetRanged(id, value, 0, site.max_restarts_in_place, &opts.restarts_in_place);
    case OptionId::kSpareNodes:
      return SetRanged(id, value, 0, site.max_spare_nodes, &opts.spare_nodes);
    case OptionId::kMinNodes:
      return SetRanged(id, value, 1, kMaxNodes, &opts.min_nodes);
    case OptionId::kOnBadLoss:
      return SetOnBadLoss(opts, text, site);
    case OptionId::kIdleTimeout:
      return SetIdleTimeout(opts, value);
    case OptionId::kExcludeStragglers:
      return SetExcludeStragglers(opts, text);
    case OptionId::kLossSpike:
      return SetLossSpike(opts, text);
    case OptionId::kFaultTolerance:
      return SetFaultTolerance(opts, text, site);
  }
  return Status::Error("unknown option");
}

Result<JobOptions> ResolveOptions(const JobOptions& user, const SiteConfig& site) {
  // --ckpt-keep must come with a checkpoint option of the user's own (or a site-wide upload).
  const bool user_ckpt = user.checkpointing() || site.defaults.ckpt_upload.has_value();
  if (user.ckpt_keep && !user_ckpt)
    return Bad(OptionId::kCkptKeep, "needs --ckpt-dir or --ckpt-upload");

  JobOptions o = user;
  const JobOptions& d = site.defaults;
  if (!o.model) o.model = d.model;
  if (!o.gpu_type) o.gpu_type = d.gpu_type;
  if (!o.global_batch) o.global_batch = d.global_batch;
  if (!o.seq_len) o.seq_len = d.seq_len;
  if (!o.auto_parallel) o.auto_parallel = d.auto_parallel;
  if (!o.requeue_on_failure) o.requeue_on_failure = d.requeue_on_failure;
  if (!o.heartbeat_timeout) o.heartbeat_timeout = d.heartbeat_timeout;
  if (!o.restarts_in_place) o.restarts_in_place = d.restarts_in_place;
  if (!o.restarts_in_place && o.requeue_on_failure) {
    // A job that asked for recovery gets it in place first: its failures cost seconds.
    o.restarts_in_place = std::min(site.restarts_in_place_default, site.max_restarts_in_place);
  }
  if (!o.spare_nodes) o.spare_nodes = d.spare_nodes;
  if (!o.min_nodes) o.min_nodes = d.min_nodes;
  if (!o.on_bad_loss) o.on_bad_loss = d.on_bad_loss;
  if (!o.loss_spike) o.loss_spike = d.loss_spike;
  if (!o.idle_timeout) o.idle_timeout = d.idle_timeout;
  if (!o.exclude_stragglers) o.exclude_stragglers = d.exclude_stragglers;
  if (!o.fault_tolerance_step) o.fault_tolerance_step = d.fault_tolerance_step;
  if (!o.ckpt_upload) o.ckpt_upload = d.ckpt_upload;
  if (o.checkpointing()) {
    if (!o.ckpt_dir) o.ckpt_dir = d.ckpt_dir ? *d.ckpt_dir : site.builtin_ckpt_dir;
    if (!o.ckpt_keep) o.ckpt_keep = d.ckpt_keep;
  }

  if (o.auto_parallel && !o.model)
    return Bad(OptionId::kAutoParallel, "needs --model (a preset, a size like 7B, or FILE.json)");
  if (o.spare_nodes.value_or(0) > 0 && o.restarts_in_place.value_or(0) == 0) {
    // A spare takes a lost node's place in an in-place restart; without those it only idles.
    return Bad(OptionId::kSpareNodes,
               "needs in-place restarts (--restarts-in-place=N or --requeue-on-failure)");
  }
  if (o.min_nodes && o.restarts_in_place.value_or(0) == 0) {
    // The run goes on with fewer nodes through an in-place restart (re-planned, resharded).
    return Bad(OptionId::kMinNodes,
               "needs in-place restarts (--restarts-in-place=N or --requeue-on-failure)");
  }
  if (o.min_nodes && o.ckpt_dir && !o.ckpt_upload) {
    // The run resumes on the nodes left from every rank's files: a lost node's are gone with it.
    return Bad(OptionId::kMinNodes,
               "needs --ckpt-upload to checkpoint (a lost node's node-local files are gone with it)");
  }
  if (o.on_bad_loss && o.on_bad_loss->action == BadLossAction::kRollback) {
    // The run goes back through an in-place restart that restores an earlier complete step.
    if (!o.checkpointing())
      return Bad(OptionId::kOnBadLoss, "rollback needs checkpoints (--ckpt-dir or --ckpt-upload)");
    if (o.restarts_in_place.value_or(0) == 0)
      return Bad(OptionId::kOnBadLoss,
                 "rollback needs in-place restarts (--restarts-in-place=N or --requeue-on-failure)");
  }
  if (o.fault_tolerance_step.value_or(false)) {
    // A failed program is replaced through the launchers' in-place machinery, within its budget.
    if (o.restarts_in_place.value_or(0) == 0)
      return Bad(OptionId::kFaultTolerance,
                 "step needs in-place restarts (--restarts-in-place=N or --requeue-on-failure)");
  }
  if (o.fault_tolerance_step.value_or(false) && o.auto_parallel) {
    if (Status st = CheckWholeStatePin(*o.auto_parallel); !st) return st;
  }
  return o;
}

std::vector<std::string> OptionsNeedingAutopard(const JobOptions& o) {
  std::vector<std::string> out;
  auto need = [&](bool given, OptionId id) {
    if (given) out.push_back(std::string("--") + GetOptionSpec(id).name);
  };
  need(o.ckpt_dir.has_value(), OptionId::kCkptDir);
  need(o.ckpt_upload.has_value(), OptionId::kCkptUpload);
  need(o.requeue_on_failure.has_value(), OptionId::kRequeueOnFailure);
  need(o.heartbeat_timeout.has_value(), OptionId::kHeartbeatTimeout);
  need(o.restarts_in_place.value_or(0) > 0, OptionId::kRestartsInPlace);
  need(o.spare_nodes.value_or(0) > 0, OptionId::kSpareNodes);
  need(o.min_nodes.has_value(), OptionId::kMinNodes);
  need(o.on_bad_loss.has_value(), OptionId::kOnBadLoss);
  need(o.loss_spike.has_value(), OptionId::kLossSpike);
  need(o.idle_timeout.value_or(0) > 0, OptionId::kIdleTimeout);
  need(o.exclude_stragglers.value_or(false), OptionId::kExcludeStragglers);
  need(o.fault_tolerance_step.value_or(false), OptionId::kFaultTolerance);
  return out;
}

std::vector<std::pair<std::string, std::string>> OptionsEnv(const JobOptions& o) {
  std::vector<std::pair<std::string, std::string>> env;
  auto put = [&](OptionId id, const std::string& v) { env.emplace_back(GetOptionSpec(id).env, v); };
  if (o.auto_parallel) put(OptionId::kAutoParallel, o.auto_parallel->ToString());
  if (o.model) put(OptionId::kModel, *o.model);
  if (o.gpu_type) put(OptionId::kGpuType, *o.gpu_type);
  if (o.global_batch) put(OptionId::kGlobalBatch, std::to_string(*o.global_batch));
  if (o.seq_len) put(OptionId::kSeqLen, std::to_string(*o.seq_len));
  if (o.ckpt_dir) put(OptionId::kCkptDir, *o.ckpt_dir);
  if (o.ckpt_upload) put(OptionId::kCkptUpload, *o.ckpt_upload);
  if (o.ckpt_keep) put(OptionId::kCkptKeep, std::to_string(*o.ckpt_keep));
  if (o.requeue_on_failure) put(OptionId::kRequeueOnFailure, std::to_string(*o.requeue_on_failure));
  if (o.heartbeat_timeout) put(OptionId::kHeartbeatTimeout, std::to_string(*o.heartbeat_timeout));
  if (o.restarts_in_place) put(OptionId::kRestartsInPlace, std::to_string(*o.restarts_in_place));
  if (o.spare_nodes) put(OptionId::kSpareNodes, std::to_string(*o.spare_nodes));
  if (o.min_nodes) put(OptionId::kMinNodes, std::to_string(*o.min_nodes));
  if (o.on_bad_loss) put(OptionId::kOnBadLoss, o.on_bad_loss->ToString());
  if (o.loss_spike) put(OptionId::kLossSpike, ShortNumber(*o.loss_spike));
  if (o.idle_timeout) put(OptionId::kIdleTimeout, std::to_string(*o.idle_timeout));
  if (o.exclude_stragglers) put(OptionId::kExcludeStragglers, *o.exclude_stragglers ? "yes" : "no");
  if (o.fault_tolerance_step) put(OptionId::kFaultTolerance, *o.fault_tolerance_step ? "step" : "off");
  return env;
}

Result<JobOptions> OptionsFromEnv(const std::function<const char*(const char*)>& getenv,
                                  const SiteConfig& site) {
  JobOptions o;
  for (const OptionSpec& spec : kOptions) {
    const char* v = getenv(spec.env);
    if (v == nullptr) continue;
    if (spec.id == OptionId::kCkptDir) {
      // The task sees the expanded directory; it is checked at submit time in its pattern form.
      if (v[0] != '/') return Bad(spec.id, std::string("must be an absolute path, got '") + v + "'");
      o.ckpt_dir = v;
      continue;
    }
    if (Status s = SetOption(o, spec.id, v, site); !s.ok())
      return Status::Error(std::string(spec.env) + ": " + s.message());
  }
  return o;
}

}  // namespace autopar
