#include "core/options.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/ckpt/ckpt_uri.h"
#include "core/site_config.h"

namespace autopar {
namespace {

SiteConfig Site(std::vector<std::string> args = {}) {
  auto site = ParseSiteConfig(args);
  EXPECT_TRUE(site.ok()) << site.message();
  return site.ok() ? *site : SiteConfig{};
}

TEST(OptionTable, EveryOptionOnceWithAutoparEnv) {
  std::set<std::string> names, envs;
  for (const OptionSpec& spec : OptionTable()) {
    EXPECT_TRUE(names.insert(spec.name).second) << spec.name;
    EXPECT_TRUE(envs.insert(spec.env).second) << spec.env;
    EXPECT_EQ(std::string(spec.env).rfind("AUTOPAR_", 0), 0u);
    EXPECT_EQ(GetOptionSpec(spec.id).name, spec.name);
  }
  EXPECT_EQ(names.size(), 18u);
  EXPECT_TRUE(GetOptionSpec(OptionId::kAutoParallel).optional_arg);
  EXPECT_TRUE(GetOptionSpec(OptionId::kRequeueOnFailure).optional_arg);
  EXPECT_FALSE(GetOptionSpec(OptionId::kModel).optional_arg);
}

TEST(Options, AcceptsGoodValues) {
  struct Case {
    OptionId id;
    const char* value;
  } cases[] = {
      {OptionId::kAutoParallel, nullptr},       {OptionId::kAutoParallel, "auto"},
      {OptionId::kAutoParallel, "tp=4,pp=2"},   {OptionId::kAutoParallel, "tp=2,pp=2,dp=4"},
      {OptionId::kAutoParallel, "fsdp"},        {OptionId::kAutoParallel, "fsdp=64"},
      {OptionId::kAutoParallel, "tp=8,fsdp=124"}, {OptionId::kAutoParallel, "hsdp=8,16"},
      {OptionId::kModel, "llama-2-7b"},         {OptionId::kModel, "7B"},
      {OptionId::kGpuType, "a100-80gb"},        {OptionId::kGpuType, "H100-80GB"},
      {OptionId::kGlobalBatch, "1024"},         {OptionId::kSeqLen, "4096"},
      {OptionId::kCkptDir, "/scratch/%u/%j"},   {OptionId::kCkptUpload, "s3://ckpt-bucket/run1"},
      {OptionId::kCkptUpload, "file:///shared/ckpt"}, {OptionId::kCkptKeep, "3"},
      {OptionId::kRequeueOnFailure, nullptr},   {OptionId::kRequeueOnFailure, "0"},
      {OptionId::kRequeueOnFailure, "10"},      {OptionId::kHeartbeatTimeout, "600"},
  };
  const SiteConfig site = Site();
  for (const auto& c : cases) {
    JobOptions o;
    Status s = SetOption(o, c.id, c.value, site);
    EXPECT_TRUE(s.ok()) << GetOptionSpec(c.id).name << "=" << (c.value ? c.value : "(none)")
                        << ": " << s.message();
  }
}

TEST(ParallelSpec, FsdpPinsRoundTrip) {
  for (const char* text : {"fsdp", "fsdp=64", "tp=8,fsdp=124", "hsdp=8,16", "tp=2,hsdp=8,4"}) {
    auto spec = ParseParallelSpec(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.message();
    EXPECT_TRUE(spec->fsdp) << text;
    EXPECT_TRUE(spec->pinned()) << text;
    EXPECT_EQ(spec->ToString(), text);
  }
  auto hsdp = ParseParallelSpec("tp=2,hsdp=8,4");
  ASSERT_TRUE(hsdp.ok());
  EXPECT_EQ(hsdp->tp, 2);
  EXPECT_EQ(hsdp->fsdp_shard, 8);
  EXPECT_EQ(hsdp->fsdp_replicate, 4);
}

TEST(Options, RefusesBadValuesNamingTheOption) {
  struct Case {
    OptionId id;
    const char* value;
    const char* want;  // substring of the message
  } cases[] = {
      {OptionId::kAutoParallel, "tp=0", "--auto-parallel: tp must be"},
      {OptionId::kAutoParallel, "xp=2", "--auto-parallel: unknown key 'xp'"},
      {OptionId::kAutoParallel, "tp=2,tp=2", "given twice"},
      {OptionId::kAutoParallel, "fast", "is not KEY=VALUE"},
      {OptionId::kAutoParallel, "fsdp=1",
       "--auto-parallel: fsdp=N needs N an integer in [2, 65536]"},
      {OptionId::kAutoParallel, "hsdp=8", "--auto-parallel: hsdp=S,R needs R"},
      {OptionId::kAutoParallel, "fsdp,hsdp=8,2", "FSDP given twice"},
      {OptionId::kAutoParallel, "fsdp,pp=2", "FSDP is planned without pipeline"},
      {OptionId::kAutoParallel, "grad_reduce=fp16",
       "--auto-parallel: grad_reduce must be fp32 or bf16, got 'fp16'"},
      {OptionId::kAutoParallel, "grad_reduce=bf16,grad_reduce=fp32", "'grad_reduce' given twice"},
      {OptionId::kAutoParallel, "grad_sharding=yes",
       "--auto-parallel: grad_sharding must be on or off, got 'yes'"},
      {OptionId::kAutoParallel, "grad_sharding=on,grad_sharding=off",
       "'grad_sharding' given twice"},
      {OptionId::kAutoParallel, "tp=2,pp=2,grad_sharding=on",
       "--auto-parallel: grad_sharding=on: ZeRO-2 is planned without pipeline parallelism "
       "(pp=2; DeepSpeed's pipeline engine refuses ZeRO stage 2)"},
      {OptionId::kAutoParallel, "fsdp,grad_sharding=on",
       "grad_sharding=on: ZeRO-2 keeps the weights whole and FSDP shards them"},
      {OptionId::kAutoParallel, "ep=2,grad_sharding=on", "is planned for dense models"},
      {OptionId::kAutoParallel, "dp=1,grad_sharding=on", "(dp*cp) and this layout has one"},
      {OptionId::kModel, "banana", "--model: unknown model 'banana'"},
      {OptionId::kModel, "", "--model: needs a value"},
      {OptionId::kGpuType, "tpu-v5", "--gpu-type"},
      {OptionId::kGlobalBatch, "0", "--global-batch: must be an integer in [1,"},
      {OptionId::kGlobalBatch, "12x", "got '12x'"},
      {OptionId::kSeqLen, "-5", "--seq-len"},
      {OptionId::kCkptDir, "relative/dir", "--ckpt-dir: must be an absolute path"},
      {OptionId::kCkptDir, "/a/../b", "must not contain '..'"},
      {OptionId::kCkptDir, "/a/%x", "unknown placeholder"},
      {OptionId::kCkptUpload, "http://x/y", "--ckpt-upload: unsupported scheme 'http'"},
      {OptionId::kCkptUpload, "bucket/path", "--ckpt-upload: not a URI"},
      {OptionId::kCkptUpload, "s3://B_ad/x", "--ckpt-upload: invalid bucket name 'B_ad'"},
      {OptionId::kCkptUpload, "file://relative", "absolute path"},
      // What a commit's parser refuses, sbatch refuses too (they are one parser).
      {OptionId::kCkptUpload, "s3://a..b/x", "--ckpt-upload: invalid bucket name 'a..b'"},
      {OptionId::kCkptUpload, "s3://bkt/x//y", "--ckpt-upload: invalid key prefix (empty path segment)"},
      {OptionId::kCkptUpload, "s3://bkt/./x", "--ckpt-upload: invalid key prefix ('.' path segment)"},
      {OptionId::kCkptUpload, "file:///a/../b", "--ckpt-upload: invalid path ('..' path segment)"},
      {OptionId::kCkptKeep, "-2", "--ckpt-keep: must be an integer in [1, 100], got '-2'"},
      {OptionId::kCkptKeep, "0", "--ckpt-keep"},
      {OptionId::kRequeueOnFailure, "11", "--requeue-on-failure: must be an integer in [0, 10]"},
      {OptionId::kRequeueOnFailure, "-1", "--requeue-on-failure"},
      {OptionId::kHeartbeatTimeout, "5", "--heartbeat-timeout: must be an integer in [10, 86400]"},
      {OptionId::kRestartsInPlace, "21", "--restarts-in-place: must be an integer in [0, 20], got '21'"},
      {OptionId::kRestartsInPlace, "x", "--restarts-in-place: must be an integer"},
      {OptionId::kRestartsInPlace, nullptr, "--restarts-in-place: needs a value"},
      {OptionId::kSpareNodes, "5", "--spare-nodes: must be an integer in [0, 4], got '5'"},
      {OptionId::kSpareNodes, "-1", "--spare-nodes"},
      {OptionId::kSpareNodes, "one", "--spare-nodes: must be an integer"},
      {OptionId::kMinNodes, "0", "--min-nodes: must be an integer in [1, 100000], got '0'"},
      {OptionId::kMinNodes, "2-4", "--min-nodes: must be an integer"},
      {OptionId::kMinNodes, "", "--min-nodes"},
      {OptionId::kOnBadLoss, "ignore", "--on-bad-loss: must be warn, rollback[:N] or stop, got 'ignore'"},
      {OptionId::kOnBadLoss, "rollback:0", "--on-bad-loss: rollback:N needs N in [1, 5], got '0'"},
      {OptionId::kOnBadLoss, "rollback:6", "--on-bad-loss: rollback:N needs N in [1, 5], got '6'"},
      {OptionId::kOnBadLoss, "stop:2", "--on-bad-loss: 'stop' takes no count"},
      {OptionId::kOnBadLoss, "", "--on-bad-loss: needs a value"},
      {OptionId::kLossSpike, "1", "--loss-spike: must be 0 (off) or a factor in (1, 1000], got '1'"},
      {OptionId::kLossSpike, "-3", "--loss-spike: must be 0 (off) or a factor"},
      {OptionId::kLossSpike, "3x", "got '3x'"},
      {OptionId::kLossSpike, "nan", "--loss-spike"},
      {OptionId::kIdleTimeout, "5", "--idle-timeout: must be 0 (never) or at least 10 seconds, got '5'"},
      {OptionId::kIdleTimeout, "-1", "--idle-timeout: must be an integer in [0, 604800], got '-1'"},
      {OptionId::kIdleTimeout, "1h", "--idle-timeout: must be an integer"},
      {OptionId::kExcludeStragglers, "maybe", "--exclude-stragglers: must be yes or no, got 'maybe'"},
      {OptionId::kFaultTolerance, "rank", "--fault-tolerance: must be off or step, got 'rank'"},
      {OptionId::kFaultTolerance, nullptr, "--fault-tolerance: needs a value"},
  };
  const SiteConfig site = Site();
  for (const auto& c : cases) {
    JobOptions o;
    Status s = SetOption(o, c.id, c.value, site);
    ASSERT_FALSE(s.ok()) << c.value;
    EXPECT_NE(s.message().find(c.want), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line: " << s.message();
  }
}

TEST(Options, SiteLimitsApply) {
  const SiteConfig site = Site({"max_requeue=2", "ckpt_upload_schemes=s3",
                                "ckpt_upload_prefixes=s3://ckpt/team-a/,s3://shared",
                                "ckpt_dir_prefixes=/scratch", "requeue_default_count=5"});
  struct Case {
    OptionId id;
    const char* value;
    bool ok;
  } cases[] = {
      {OptionId::kRequeueOnFailure, "2", true},
      {OptionId::kRequeueOnFailure, "3", false},
      {OptionId::kCkptUpload, "s3://ckpt/team-a/run", true},
      {OptionId::kCkptUpload, "s3://ckpt/team-b/run", false},
      {OptionId::kCkptUpload, "s3://shared/x", true},
      {OptionId::kCkptUpload, "s3://shared-other/x", false},  // prefix ends at a '/' boundary
      {OptionId::kCkptUpload, "file:///shared/x", false},     // scheme not allowed
      {OptionId::kCkptDir, "/scratch/%u", true},
      {OptionId::kCkptDir, "/scratchy/x", false},
      {OptionId::kCkptDir, "/tmp/x", false},
  };
  for (const auto& c : cases) {
    JobOptions o;
    EXPECT_EQ(SetOption(o, c.id, c.value, site).ok(), c.ok) << c.value;
  }
  JobOptions o;
  ASSERT_TRUE(SetOption(o, OptionId::kRequeueOnFailure, nullptr, site).ok());
  EXPECT_EQ(o.requeue_on_failure, 2);  // the bare flag's default is capped by max_requeue
  JobOptions p;
  Status s = SetOption(p, OptionId::kCkptUpload, "file:///shared/x", site);
  EXPECT_NE(s.message().find("not allowed on this site"), std::string::npos) << s.message();
}

// One parser: a URI passes sbatch exactly when the parser a commit and an upload use accepts it.
TEST(Options, WhatSbatchAcceptsACommitAccepts) {
  const SiteConfig site = Site();
  for (const char* uri :
       {"s3://bkt", "s3://bkt/", "s3://bkt/a/b/", "s3://a..b/x", "s3://.bkt/x", "s3://bkt-/x",
        "s3://bkt/x//y", "s3://bkt/./x", "s3://bkt/x/..", "s3://bkt/a\tb", "s3://", "s3:///x",
        "file:///", "file:///a//b", "file:///a/./b", "file://host/a", "file:///a/b/", "S3://bkt/x",
        "s3:/bkt/x", "s3://bkt/x y", "s3://b.k.t/x", "s3://ab/x", "file:///a/..b"}) {
    JobOptions o;
    EXPECT_EQ(SetOption(o, OptionId::kCkptUpload, uri, site).ok(), ParseCheckpointUri(uri).ok()) << uri;
  }
}

TEST(ResolveOptions, RecoveryRestartsInPlaceFirst) {
  // --requeue-on-failure alone: the site's in-place default (capped by its maximum); an explicit
  // count (0 included) wins; without failure handling none.
  const SiteConfig site = Site({"restarts_in_place_default=4", "max_restarts_in_place=3"});
  JobOptions requeue;
  requeue.requeue_on_failure = 2;
  EXPECT_EQ(ResolveOptions(requeue, site)->restarts_in_place, 3);
  JobOptions off = requeue;
  off.restarts_in_place = 0;
  EXPECT_EQ(ResolveOptions(off, site)->restarts_in_place, 0);
  EXPECT_FALSE(ResolveOptions(JobOptions{}, site)->restarts_in_place.has_value());
  JobOptions in_place_only;
  ASSERT_TRUE(SetOption(in_place_only, OptionId::kRestartsInPlace, "2", site).ok());
  auto resolved = ResolveOptions(in_place_only, site);
  EXPECT_EQ(resolved->restarts_in_place, 2);
  bool exported = false;
  for (const auto& [k, v] : OptionsEnv(*resolved)) exported |= k == "AUTOPAR_RESTARTS_IN_PLACE" && v == "2";
  EXPECT_TRUE(exported);
  EXPECT_FALSE(SetOption(in_place_only, OptionId::kRestartsInPlace, "4", site).ok());  // > max
}

TEST(ResolveOptions, SpareNodesNeedInPlaceRestarts) {
  const SiteConfig site = Site({"max_spare_nodes=2"});
  JobOptions o;
  ASSERT_TRUE(SetOption(o, OptionId::kSpareNodes, "1", site).ok());
  auto alone = ResolveOptions(o, site);
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.message(),
            "--spare-nodes: needs in-place restarts (--restarts-in-place=N or --requeue-on-failure)");
  o.requeue_on_failure = 3;  // in place by default then
  auto resolved = ResolveOptions(o, site);
  ASSERT_TRUE(resolved.ok()) << resolved.message();
  bool exported = false;
  for (const auto& [k, v] : OptionsEnv(*resolved)) exported |= k == "AUTOPAR_SPARE_NODES" && v == "1";
  EXPECT_TRUE(exported);
  EXPECT_FALSE(SetOption(o, OptionId::kSpareNodes, "3", site).ok());  // > max_spare_nodes
  JobOptions zero;
  ASSERT_TRUE(SetOption(zero, OptionId::kSpareNodes, "0", site).ok());
  EXPECT_TRUE(ResolveOptions(zero, site).ok());  // none held: nothing to check
  // The site's default applies like any other option's.
  auto with_default = ParseSiteConfig({"default_spare_nodes=1", "default_requeue_on_failure=2"});
  ASSERT_TRUE(with_default.ok()) << with_default.message();
  EXPECT_EQ(ResolveOptions(JobOptions{}, *with_default)->spare_nodes, 1);
}

TEST(ResolveOptions, MinNodesNeedInPlaceRestartsAndSurviveNodeLoss) {
  const SiteConfig site = Site();
  JobOptions o;
  EXPECT_FALSE(o.survives_node_loss());
  ASSERT_TRUE(SetOption(o, OptionId::kMinNodes, "2", site).ok());
  EXPECT_TRUE(o.survives_node_loss());
  auto alone = ResolveOptions(o, site);
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.message(),
            "--min-nodes: needs in-place restarts (--restarts-in-place=N or --requeue-on-failure)");
  o.requeue_on_failure = 2;
  auto resolved = ResolveOptions(o, site);
  ASSERT_TRUE(resolved.ok()) << resolved.message();
  bool exported = false;
  for (const auto& [k, v] : OptionsEnv(*resolved)) exported |= k == "AUTOPAR_MIN_NODES" && v == "2";
  EXPECT_TRUE(exported);
  auto back = OptionsFromEnv([](const char* n) { return std::string(n) == "AUTOPAR_MIN_NODES" ? "2" : nullptr; },
                             site);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->min_nodes, 2);
}

TEST(ResolveOptions, BadLossRollbackNeedsCheckpointsAndInPlaceRestarts) {
  const SiteConfig site = Site();
  JobOptions o;
  ASSERT_TRUE(SetOption(o, OptionId::kOnBadLoss, "rollback", site).ok());
  EXPECT_EQ(o.on_bad_loss->ToString(), "rollback:2");  // the site's rollbacks_default
  auto no_ckpt = ResolveOptions(o, site);
  ASSERT_FALSE(no_ckpt.ok());
  EXPECT_EQ(no_ckpt.message(), "--on-bad-loss: rollback needs checkpoints (--ckpt-dir or --ckpt-upload)");
  o.ckpt_dir = "/tmp/c";
  auto no_restarts = ResolveOptions(o, site);
  ASSERT_FALSE(no_restarts.ok());
  EXPECT_EQ(no_restarts.message(),
            "--on-bad-loss: rollback needs in-place restarts (--restarts-in-place=N or --requeue-on-failure)");
  o.requeue_on_failure = 1;
  ASSERT_TRUE(SetOption(o, OptionId::kLossSpike, "4.5", site).ok());
  ASSERT_TRUE(SetOption(o, OptionId::kIdleTimeout, "600", site).ok());
  ASSERT_TRUE(SetOption(o, OptionId::kExcludeStragglers, nullptr, site).ok());
  auto resolved = ResolveOptions(o, site);
  ASSERT_TRUE(resolved.ok()) << resolved.message();
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : OptionsEnv(*resolved)) env[k] = v;
  EXPECT_EQ(env["AUTOPAR_ON_BAD_LOSS"], "rollback:2");
  EXPECT_EQ(env["AUTOPAR_LOSS_SPIKE"], "4.5");
  EXPECT_EQ(env["AUTOPAR_IDLE_TIMEOUT"], "600");
  EXPECT_EQ(env["AUTOPAR_EXCLUDE_STRAGGLERS"], "yes");
  auto back = OptionsFromEnv(
      [&](const char* n) { return env.count(n) ? env.at(n).c_str() : nullptr; }, site);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_TRUE(back->on_bad_loss == resolved->on_bad_loss);
  EXPECT_EQ(back->loss_spike, 4.5);
  EXPECT_EQ(back->idle_timeout, 600);
  EXPECT_EQ(back->exclude_stragglers, true);
  // warn and stop need nothing else; a site with no rollbacks refuses a bare rollback.
  JobOptions plain;
  ASSERT_TRUE(SetOption(plain, OptionId::kOnBadLoss, "stop", site).ok());
  ASSERT_TRUE(SetOption(plain, OptionId::kLossSpike, "0", site).ok());
  EXPECT_TRUE(ResolveOptions(plain, site).ok());
  SiteConfig none = site;
  none.max_rollbacks = 0;
  JobOptions r;
  Status s = SetOption(r, OptionId::kOnBadLoss, "rollback", none);
  EXPECT_EQ(s.message(), "--on-bad-loss: rollbacks are off on this site (max_rollbacks=0)");
}

TEST(ResolveOptions, StepFaultToleranceNeedsInPlaceRestartsAndTakesSpares) {
  const SiteConfig site = Site();
  JobOptions o;
  ASSERT_TRUE(SetOption(o, OptionId::kFaultTolerance, "step", site).ok());
  EXPECT_EQ(ResolveOptions(o, site).message(),
            "--fault-tolerance: step needs in-place restarts (--restarts-in-place=N or --requeue-on-failure)");
  ASSERT_TRUE(SetOption(o, OptionId::kRequeueOnFailure, nullptr, site).ok());
  auto resolved = ResolveOptions(o, site);
  ASSERT_TRUE(resolved.ok()) << resolved.message();
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : OptionsEnv(*resolved)) env[k] = v;
  EXPECT_EQ(env["AUTOPAR_FAULT_TOLERANCE"], "step");
  auto back = OptionsFromEnv(
      [&](const char* n) { return env.count(n) ? env.at(n).c_str() : nullptr; }, site);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->fault_tolerance_step, true);
  EXPECT_NE(std::find(OptionsNeedingAutopard(*resolved).begin(), OptionsNeedingAutopard(*resolved).end(),
                      "--fault-tolerance"),
            OptionsNeedingAutopard(*resolved).end());
  ASSERT_TRUE(SetOption(o, OptionId::kSpareNodes, "1", site).ok());
  EXPECT_TRUE(ResolveOptions(o, site).ok());  // a spare's ranks take a lost node's in the group
  // off needs nothing; a site may refuse step, and give it as every job's default.
  JobOptions off;
  ASSERT_TRUE(SetOption(off, OptionId::kFaultTolerance, "off", site).ok());
  EXPECT_TRUE(ResolveOptions(off, site).ok());
  EXPECT_EQ(SetOption(off, OptionId::kFaultTolerance, "step", Site({"allow_fault_tolerance=no"})).message(),
            "--fault-tolerance: step is off on this site (allow_fault_tolerance=no)");
  auto by_default = ResolveOptions(JobOptions{}, Site({"default_fault_tolerance=step", "default_requeue_on_failure=2"}));
  ASSERT_TRUE(by_default.ok()) << by_default.message();
  EXPECT_EQ(by_default->fault_tolerance_step, true);
}

TEST(Options, SettingTwiceKeepsTheLast) {
  const SiteConfig site = Site();
  JobOptions o;
  ASSERT_TRUE(SetOption(o, OptionId::kCkptKeep, "3", site).ok());
  ASSERT_TRUE(SetOption(o, OptionId::kCkptKeep, "3", site).ok());
  ASSERT_TRUE(SetOption(o, OptionId::kCkptKeep, "5", site).ok());
  EXPECT_EQ(o.ckpt_keep, 5);
}

TEST(ResolveOptions, CrossOptionRules) {
  const SiteConfig site = Site();
  JobOptions keep_only;
  keep_only.ckpt_keep = 3;
  auto r = ResolveOptions(keep_only, site);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "--ckpt-keep: needs --ckpt-dir or --ckpt-upload");

  JobOptions plan_no_model;
  plan_no_model.auto_parallel = ParallelSpec{};
  r = ResolveOptions(plan_no_model, site);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("--auto-parallel: needs --model"), std::string::npos);

  JobOptions upload;
  upload.ckpt_upload = "s3://bucket/x";
  upload.ckpt_keep = 2;
  r = ResolveOptions(upload, site);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->ckpt_dir, "/tmp/autopar/%u/%j");  // builtin local dir for uploads
}

TEST(ResolveOptions, SiteDefaultsFillGaps) {
  const SiteConfig site = Site({"default_model=llama-2-7b", "default_heartbeat_timeout=300",
                                "default_ckpt_dir=/scratch/%j", "default_ckpt_keep=4"});
  JobOptions user;
  user.heartbeat_timeout = 60;
  auto r = ResolveOptions(user, site);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->model, "llama-2-7b");
  EXPECT_EQ(r->heartbeat_timeout, 60);  // the user's own value wins
  EXPECT_FALSE(r->ckpt_dir.has_value());  // no checkpointing asked for: no defaults for it
  EXPECT_FALSE(r->ckpt_keep.has_value());

  user.ckpt_upload = "file:///shared/ckpt";
  r = ResolveOptions(user, site);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->ckpt_dir, "/scratch/%j");
  EXPECT_EQ(r->ckpt_keep, 4);
}

TEST(OptionsEnv, RoundTrips) {
  const SiteConfig site = Site();
  JobOptions o;
  for (auto [id, v] : std::vector<std::pair<OptionId, const char*>>{
           {OptionId::kAutoParallel, "tp=4,pp=2"}, {OptionId::kModel, "llama-2-13b"},
           {OptionId::kGpuType, "a100-40gb"}, {OptionId::kGlobalBatch, "512"},
           {OptionId::kSeqLen, "2048"}, {OptionId::kCkptDir, "/tmp/c"},
           {OptionId::kCkptUpload, "s3://bkt/p"}, {OptionId::kCkptKeep, "2"},
           {OptionId::kRequeueOnFailure, "3"}, {OptionId::kHeartbeatTimeout, "120"}})
    ASSERT_TRUE(SetOption(o, id, v, site).ok()) << v;
  auto env = OptionsEnv(o);
  EXPECT_EQ(env.size(), 10u);
  std::map<std::string, std::string> m(env.begin(), env.end());
  EXPECT_EQ(m["AUTOPAR_AUTO_PARALLEL"], "tp=4,pp=2");
  EXPECT_EQ(m["AUTOPAR_CKPT_UPLOAD"], "s3://bkt/p");
  auto back = OptionsFromEnv(
      [&](const char* k) { return m.count(k) ? m.at(k).c_str() : nullptr; }, site);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(OptionsEnv(*back), env);

  m["AUTOPAR_CKPT_KEEP"] = "zero";
  back = OptionsFromEnv([&](const char* k) { return m.count(k) ? m.at(k).c_str() : nullptr; },
                        site);
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.message().find("AUTOPAR_CKPT_KEEP: --ckpt-keep"), std::string::npos);
}

TEST(ParallelSpec, ToStringAndParse) {
  EXPECT_EQ(ParseParallelSpec("auto")->ToString(), "auto");
  EXPECT_EQ(ParseParallelSpec("")->ToString(), "auto");
  EXPECT_EQ(ParseParallelSpec("pp=2,tp=4")->ToString(), "tp=4,pp=2");
  EXPECT_EQ(ParseParallelSpec("dp=2,cp=16,tp=8,pp=16")->ToString(), "tp=8,cp=16,pp=16,dp=2");
  EXPECT_EQ(ParseParallelSpec("ep=8,tp=1,pp=4")->ToString(), "tp=1,ep=8,pp=4");
  EXPECT_FALSE(ParseParallelSpec("cp=0").ok());
  EXPECT_EQ(ParseParallelSpec("dp=8")->ToString(), "dp=8");
}

TEST(ParallelSpec, GradientPrecisionRoundTrips) {
  // The precision alone pins no layout; with sizes it follows them.
  for (const char* text : {"grad_reduce=bf16", "grad_reduce=fp32",
                           "tp=8,cp=2,pp=8,grad_reduce=bf16", "tp=2,fsdp=8,grad_reduce=bf16"}) {
    auto spec = ParseParallelSpec(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.message();
    EXPECT_EQ(spec->ToString(), text);
    EXPECT_EQ(*ParseParallelSpec(spec->ToString()), *spec) << text;
  }
  EXPECT_FALSE(ParseParallelSpec("grad_reduce=bf16")->pinned());
  EXPECT_EQ(ParseParallelSpec("grad_reduce=bf16,pp=2")->ToString(), "pp=2,grad_reduce=bf16");
}

TEST(ParallelSpec, ZeroTwoRoundTrips) {
  // ZeRO-2 on or off alone pins no size; with sizes and the precision it keeps one order.
  for (const char* text : {"grad_sharding=on", "grad_sharding=off", "tp=2,grad_sharding=on",
                           "tp=2,cp=2,dp=4,grad_sharding=on,grad_reduce=bf16",
                           "tp=8,pp=8,grad_sharding=off", "fsdp=8,grad_sharding=off"}) {
    auto spec = ParseParallelSpec(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.message();
    EXPECT_EQ(spec->ToString(), text);
    EXPECT_EQ(*ParseParallelSpec(spec->ToString()), *spec) << text;
  }
  EXPECT_FALSE(ParseParallelSpec("grad_sharding=on")->pinned());
  EXPECT_EQ(ParseParallelSpec("grad_reduce=fp32,grad_sharding=on,tp=2")->ToString(),
            "tp=2,grad_sharding=on,grad_reduce=fp32");
  // It shards the state: --fault-tolerance=step refuses it, and not its being off.
  EXPECT_EQ(CheckWholeStatePin(*ParseParallelSpec("grad_sharding=on")).message(),
            "--fault-tolerance: step heals only a state every rank holds whole, and "
            "--auto-parallel=grad_sharding=on shards it (tp, pp, cp, ep, FSDP or ZeRO-2); pin "
            "data parallelism alone or leave step off");
  EXPECT_TRUE(CheckWholeStatePin(*ParseParallelSpec("dp=8,grad_sharding=off")).ok());
}

}  // namespace
}  // namespace autopar
