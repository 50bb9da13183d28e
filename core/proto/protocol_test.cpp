#include "core/proto/protocol.h"

#include <gtest/gtest.h>

#include <cmath>

namespace autopar {
namespace {

Request Commit() {
  Request r;
  r.op = Op::kCommit;
  r.job_id = "1234";
  r.step = 20;
  r.rank = 1;
  r.world_size = 4;
  r.local_world_size = 2;
  r.ckpt_dir = "/tmp/ckpt/1234";
  r.upload = "s3://bucket/run";
  r.keep = 3;
  r.node = "node1";
  r.save_s = 1.25;
  return r;
}

TEST(ProtocolTest, RequestRoundTrips) {
  Request restore = Commit();
  restore.op = Op::kRestore;
  restore.max_step = 10;
  restore.keep = 0;
  Request probe = restore;
  probe.max_step = -1;
  probe.probe = true;
  probe.reshard = true;
  Request ls;
  ls.op = Op::kLs;
  ls.upload = "file:///shared/ckpt";
  Request event;
  event.op = Op::kEvent;
  event.job_id = "77_3";
  event.kind = "step_started";
  event.detail = "line\nwith \"quotes\"";
  Request status;
  status.op = Op::kStatus;
  Request heartbeat;
  heartbeat.op = Op::kHeartbeat;
  heartbeat.job_id = "77";
  heartbeat.rank = 3;
  heartbeat.step = 12;
  heartbeat.short_lived = true;
  Request finishing = heartbeat;
  finishing.short_lived = false;
  finishing.finishing = true;
  for (const Request& r : {Commit(), restore, probe, ls, event, status, heartbeat, finishing}) {
    std::string line = EncodeRequest(r);
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    auto back = DecodeRequest(line);
    ASSERT_TRUE(back.ok()) << back.message() << " for " << line;
    EXPECT_EQ(back->op, r.op);
    EXPECT_EQ(back->job_id, r.job_id);
    EXPECT_EQ(back->step, r.step);
    EXPECT_EQ(back->max_step, r.max_step);
    EXPECT_EQ(back->probe, r.probe);
    EXPECT_EQ(back->reshard, r.reshard);
    EXPECT_EQ(back->short_lived, r.short_lived);
    EXPECT_EQ(back->finishing, r.finishing);
    EXPECT_EQ(back->rank, r.rank);
    EXPECT_EQ(back->world_size, r.world_size);
    EXPECT_EQ(back->local_world_size, r.local_world_size);
    EXPECT_EQ(back->save_s, r.save_s);
    EXPECT_EQ(back->ckpt_dir, r.ckpt_dir);
    EXPECT_EQ(back->upload, r.upload);
    EXPECT_EQ(back->keep, r.keep);
    EXPECT_EQ(back->kind, r.kind);
    EXPECT_EQ(back->detail, r.detail);
    EXPECT_EQ(EncodeRequest(*back), line);
  }
}

TEST(ProtocolTest, HeartbeatProgressRoundTrips) {
  Request r;
  r.op = Op::kHeartbeat;
  r.job_id = "7";
  r.rank = 0;
  r.step = 12;
  r.samples = 64;
  r.tokens = 262144;
  r.loss = 1.25;
  auto back = DecodeRequest(EncodeRequest(r));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->samples, 64);
  EXPECT_EQ(back->tokens, 262144);
  ASSERT_TRUE(back->loss);
  EXPECT_DOUBLE_EQ(*back->loss, 1.25);
  // Not finite: sent as a string, read back as such.
  r.loss = std::nan("");
  EXPECT_NE(EncodeRequest(r).find(R"("loss":"nan")"), std::string::npos) << EncodeRequest(r);
  back = DecodeRequest(EncodeRequest(r));
  ASSERT_TRUE(back.ok() && back->loss);
  EXPECT_TRUE(std::isnan(*back->loss));
  r.loss = -HUGE_VAL;
  back = DecodeRequest(EncodeRequest(r));
  ASSERT_TRUE(back.ok() && back->loss);
  EXPECT_TRUE(std::isinf(*back->loss) && *back->loss < 0);
  // Without them: nothing sent, nothing read.
  Request plain;
  plain.op = Op::kHeartbeat;
  plain.job_id = "7";
  plain.rank = 0;
  plain.step = 1;
  EXPECT_EQ(EncodeRequest(plain).find("samples"), std::string::npos);
  back = DecodeRequest(EncodeRequest(plain));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->samples, -1);
  EXPECT_FALSE(back->loss);
}

TEST(ProtocolTest, BadRequestsNameTheProblem) {
  struct Case {
    const char* line;
    const char* error;
  } cases[] = {
      {"", "request: malformed JSON"},
      {"[1]", "request: not a JSON object"},
      {R"({"op":"commit"})", "request: v: missing"},
      {R"({"v":2,"op":"commit"})", "unsupported protocol version 2"},
      {R"({"v":1,"op":"explode"})", "request: op: unknown operation 'explode'"},
      {R"({"v":1,"op":"commit","step":"x"})", "commit: step: must be an integer"},
      {R"({"v":1,"op":"commit","step":1,"rank":0,"world_size":1,"ckpt_dir":"/x"})",
       "commit: job_id: missing"},
      {R"({"v":1,"op":"commit","job_id":"1 2","step":1,"rank":0,"world_size":1,"ckpt_dir":"/x"})",
       "commit: job_id:"},
      {R"({"v":1,"op":"commit","job_id":"1","step":-1,"rank":0,"world_size":1,"ckpt_dir":"/x"})",
       "commit: step: must be >= 0"},
      {R"({"v":1,"op":"commit","job_id":"1","step":1,"rank":4,"world_size":4,"ckpt_dir":"/x"})",
       "commit: rank: must be in [0, world_size=4), got 4"},
      {R"({"v":1,"op":"commit","job_id":"1","step":1,"rank":0,"world_size":1,"ckpt_dir":"/x","save_s":-1})",
       "commit: save_s: must be seconds >= 0"},
      {R"({"v":1,"op":"commit","job_id":"1","step":1,"rank":0,"world_size":1,"ckpt_dir":"rel"})",
       "commit: ckpt_dir: must be an absolute path"},
      {R"({"v":1,"op":"restore","job_id":"1","rank":0,"world_size":1})",
       "restore: ckpt_dir: must be an absolute path"},
      {R"({"v":1,"op":"ls"})", "ls: give exactly one of uri and job_id"},
      {R"({"v":1,"op":"event","job_id":"1"})", "event: kind: must be 1-64 characters"},
      {R"({"v":1,"op":"events"})", "events: job_id: missing"},
      {R"({"v":1,"op":"heartbeat","job_id":"1","rank":0,"step":1,"samples":-2})",
       "heartbeat: samples: must be >= 0"},
      {R"({"v":1,"op":"heartbeat","job_id":"1","rank":0,"step":1,"tokens":"many"})",
       "heartbeat: tokens: must be an integer"},
      {R"({"v":1,"op":"heartbeat","job_id":"1","rank":0,"step":1,"loss":"low"})",
       "heartbeat: loss: must be a number, \"nan\", \"inf\" or \"-inf\""},
  };
  for (const auto& c : cases) {
    auto r = DecodeRequest(c.line);
    ASSERT_FALSE(r.ok()) << c.line;
    EXPECT_NE(r.message().find(c.error), std::string::npos) << r.message() << " for " << c.line;
  }
}

TEST(ProtocolTest, RepliesRoundTrip) {
  Reply commit;
  commit.commit.commit_id = 9;
  commit.commit.files = 3;
  commit.commit.bytes = 5ull << 32;
  commit.commit.duplicate = true;
  auto c = DecodeReply(Op::kCommit, EncodeReply(Op::kCommit, commit));
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_TRUE(c->status.ok());
  EXPECT_EQ(c->commit.commit_id, 9);
  EXPECT_EQ(c->commit.files, 3);
  EXPECT_EQ(c->commit.bytes, 5ull << 32);
  EXPECT_TRUE(c->commit.duplicate);

  Reply restore;
  restore.restore = {30, "1200", "/ck/step-30/rank-0", {"step 40: x: SHA-256 mismatch"}, 0, 0, "/ck/step-30", 8};
  auto r = DecodeReply(Op::kRestore, EncodeReply(Op::kRestore, restore));
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->restore.step, 30);
  EXPECT_EQ(r->restore.step_dir, "/ck/step-30");
  EXPECT_EQ(r->restore.world_size, 8);
  EXPECT_EQ(r->restore.source_job, "1200");
  EXPECT_EQ(r->restore.dir, "/ck/step-30/rank-0");
  EXPECT_EQ(r->restore.skipped, std::vector<std::string>{"step 40: x: SHA-256 mismatch"});

  Reply ls;
  ls.steps.push_back({"5", 10, "COMPLETE", 100, 2, 2, "s3://b/p"});
  auto l = DecodeReply(Op::kLs, EncodeReply(Op::kLs, ls));
  ASSERT_TRUE(l.ok()) << l.message();
  ASSERT_EQ(l->steps.size(), 1u);
  EXPECT_EQ(l->steps[0].state, "COMPLETE");
  EXPECT_EQ(l->steps[0].uri, "s3://b/p");

  Reply status;
  status.uploads.push_back({"5", 10, 1, "uploading", 50, 100, 25.5, 2.0, ""});
  auto s = DecodeReply(Op::kStatus, EncodeReply(Op::kStatus, status));
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(s->uploads.size(), 1u);
  EXPECT_EQ(s->uploads[0].bytes_done, 50u);
  EXPECT_DOUBLE_EQ(s->uploads[0].throughput_bps, 25.5);
  EXPECT_EQ(s->uploads[0].next_retry_s, -1);
  EXPECT_EQ(EncodeReply(Op::kStatus, status).find("next_retry_s"), std::string::npos);
  status.uploads[0].state = "failed";
  status.uploads[0].next_retry_s = 120;
  s = DecodeReply(Op::kStatus, EncodeReply(Op::kStatus, status));
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_DOUBLE_EQ(s->uploads[0].next_retry_s, 120);

  Reply events;
  events.events.push_back({1.5, "node2", "5", "ckpt_complete", -1, 10, "s3://b/p"});
  auto e = DecodeReply(Op::kEvents, EncodeReply(Op::kEvents, events));
  ASSERT_TRUE(e.ok()) << e.message();
  ASSERT_EQ(e->events.size(), 1u);
  EXPECT_EQ(e->events[0].node, "node2");
  EXPECT_EQ(e->events[0].step, 10);
  EXPECT_TRUE(e->notes.empty());
  events.notes = {"only node2's events: other nodes' events need journal_uri"};
  e = DecodeReply(Op::kEvents, EncodeReply(Op::kEvents, events));
  ASSERT_TRUE(e.ok()) << e.message();
  EXPECT_EQ(e->notes, events.notes);
  EXPECT_FALSE(DecodeReply(Op::kEvents, R"({"ok":true,"events":[],"notes":[1]})").ok());

  // The heartbeat's reply carries the time-limit checkpoint request only when it is set.
  Reply beat;
  EXPECT_EQ(EncodeReply(Op::kHeartbeat, beat), R"({"ok":true})");
  beat.checkpoint_requested = true;
  auto h = DecodeReply(Op::kHeartbeat, EncodeReply(Op::kHeartbeat, beat));
  ASSERT_TRUE(h.ok()) << h.message();
  EXPECT_TRUE(h->checkpoint_requested);
  auto plain = DecodeReply(Op::kHeartbeat, R"({"ok":true})");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->checkpoint_requested);
}

TEST(ProtocolTest, ErrorRepliesCarryTheMessage) {
  Reply err;
  err.status = Status::Error("commit: job 5 belongs to another user");
  auto r = DecodeReply(Op::kCommit, EncodeReply(Op::kCommit, err));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status.message(), "commit: job 5 belongs to another user");
  auto bad = DecodeReply(Op::kLs, R"({"ok":true,"steps":3})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("steps: not an array"), std::string::npos);
  EXPECT_FALSE(DecodeReply(Op::kLs, "{").ok());
}

}  // namespace
}  // namespace autopar
