// The autopard wire format (protocol.h): JSON objects, one per line, with jsoncpp.
#include "core/proto/protocol.h"

#include <json/json.h>

#include <cmath>
#include <memory>
#include <sstream>

#include "core/ckpt/ckpt_layout.h"
#include "core/json_fields.h"
#include "core/text.h"

namespace autopar {
namespace {

struct OpEntry {
  Op op;
  const char* name;
};
constexpr OpEntry kOps[] = {
    {Op::kCommit, "commit"},       {Op::kRestore, "restore"}, {Op::kLs, "ls"},
    {Op::kStatus, "status"},       {Op::kHeartbeat, "heartbeat"},
    {Op::kEvent, "event"},         {Op::kEvents, "events"},   {Op::kRecover, "recover"},
};

Result<Json::Value> ParseObject(std::string_view line, const char* what) {
  if (line.size() > kMaxLineBytes) {
    return Status::Error(std::string(what) + ": longer than " + std::to_string(kMaxLineBytes) +
                         " bytes");
  }
  Json::CharReaderBuilder b;
  b["collectComments"] = false;
  std::unique_ptr<Json::CharReader> reader(b.newCharReader());
  Json::Value v;
  std::string errs;
  if (!reader->parse(line.data(), line.data() + line.size(), &v, &errs)) {
    while (!errs.empty() && (errs.back() == '\n' || errs.back() == ' ')) errs.pop_back();
    for (char& c : errs) if (c == '\n') c = ' ';
    return Status::Error(std::string(what) + ": malformed JSON: " + errs);
  }
  if (!v.isObject()) return Status::Error(std::string(what) + ": not a JSON object");
  return v;
}

Status FieldError(Op op, const char* field, const std::string& why) {
  return Status::Error(std::string(OpName(op)) + ": " + field + ": " + why);
}

Json::Value StepToValue(const StepInfo& s) {
  Json::Value e(Json::objectValue);
  e["job_id"] = s.job_id;
  e["step"] = Json::Int64(s.step);
  e["state"] = s.state;
  e["bytes"] = Json::UInt64(s.bytes);
  e["ranks"] = s.ranks;
  e["world_size"] = s.world_size;
  e["uri"] = s.uri;
  return e;
}

Json::Value UploadToValue(const UploadInfo& u) {
  Json::Value e(Json::objectValue);
  e["job_id"] = u.job_id;
  e["step"] = Json::Int64(u.step);
  e["rank"] = u.rank;
  e["state"] = u.state;
  e["bytes_done"] = Json::UInt64(u.bytes_done);
  e["bytes_total"] = Json::UInt64(u.bytes_total);
  e["throughput_bps"] = u.throughput_bps;
  e["eta_s"] = u.eta_s;
  if (!u.error.empty()) e["error"] = u.error;
  if (u.next_retry_s >= 0) e["next_retry_s"] = u.next_retry_s;
  return e;
}

Json::Value EventToValue(const JournalEvent& ev) {
  Json::Value e(Json::objectValue);
  e["time"] = ev.time;
  e["node"] = ev.node;
  e["job_id"] = ev.job_id;
  e["kind"] = ev.kind;
  e["rank"] = ev.rank;
  e["step"] = Json::Int64(ev.step);
  e["detail"] = ev.detail;
  return e;
}

}  // namespace

std::string StepInfoJson(const StepInfo& step) { return CompactJson(StepToValue(step)); }

std::string UploadInfoJson(const UploadInfo& upload) { return CompactJson(UploadToValue(upload)); }

std::string JournalEventJson(const JournalEvent& event) { return CompactJson(EventToValue(event)); }

const char* OpName(Op op) {
  for (const auto& e : kOps) {
    if (e.op == op) return e.name;
  }
  return "?";
}

Status ValidateRequest(const Request& r) {
  auto need_job = [&]() -> Status {
    if (r.job_id.empty()) return FieldError(r.op, "job_id", "missing");
    if (Status st = ValidateJobId(r.job_id); !st) {
      return FieldError(r.op, "job_id", st.message());
    }
    return Status::Ok();
  };
  auto need_rank = [&]() -> Status {
    if (r.world_size < 1) {
      return FieldError(r.op, "world_size", "must be >= 1, got " + std::to_string(r.world_size));
    }
    if (r.rank < 0 || r.rank >= r.world_size) {
      return FieldError(r.op, "rank", "must be in [0, world_size=" +
                                          std::to_string(r.world_size) + "), got " +
                                          std::to_string(r.rank));
    }
    return Status::Ok();
  };
  auto need_dir = [&]() -> Status {
    if (r.ckpt_dir.empty() || r.ckpt_dir[0] != '/') {
      return FieldError(r.op, "ckpt_dir", "must be an absolute path, got '" + r.ckpt_dir + "'");
    }
    if (r.ckpt_dir.find('\n') != std::string::npos || r.ckpt_dir.find("/../") != std::string::npos) {
      return FieldError(r.op, "ckpt_dir", "invalid path '" + r.ckpt_dir + "'");
    }
    return Status::Ok();
  };
  switch (r.op) {
    case Op::kCommit:
      if (Status st = need_job(); !st) return st;
      if (r.step < 0) return FieldError(r.op, "step", "must be >= 0, got " + std::to_string(r.step));
      if (Status st = need_rank(); !st) return st;
      if (r.local_world_size < 0 || r.local_world_size > r.world_size) {
        return FieldError(r.op, "local_world_size", "must be in [0, world_size]");
      }
      if (r.keep < 0) return FieldError(r.op, "keep", "must be >= 0");
      return need_dir();
    case Op::kRestore:
      if (Status st = need_job(); !st) return st;
      if (Status st = need_rank(); !st) return st;
      if (r.max_step < -1) return FieldError(r.op, "max_step", "must be >= -1");
      return need_dir();
    case Op::kLs:
      if (r.upload.empty() == r.job_id.empty()) {
        return Status::Error("ls: give exactly one of uri and job_id");
      }
      if (!r.job_id.empty()) return need_job();
      return Status::Ok();
    case Op::kStatus:
      if (!r.job_id.empty()) return need_job();
      return Status::Ok();
    case Op::kHeartbeat:
      if (Status st = need_job(); !st) return st;
      if (r.rank < 0) return FieldError(r.op, "rank", "must be >= 0");
      return Status::Ok();
    case Op::kEvent:
      if (Status st = need_job(); !st) return st;
      if (r.kind.empty() || r.kind.size() > 64) return FieldError(r.op, "kind", "must be 1-64 characters");
      if (r.detail.size() > 65536) return FieldError(r.op, "detail", "longer than 65536 bytes");
      return Status::Ok();
    case Op::kEvents:
      return need_job();
    case Op::kRecover:
      if (Status st = need_job(); !st) return st;
      if (r.rank < 0) return FieldError(r.op, "rank", "must be >= 0");
      if (r.detail.empty() || r.detail.size() > 4096) {
        return FieldError(r.op, "detail", "must be 1-4096 bytes of failure fields");
      }
      return Status::Ok();
  }
  return Status::Error("unknown op");
}

std::string EncodeRequest(const Request& r) {
  Json::Value v(Json::objectValue);
  v["v"] = kProtocolVersion;
  v["op"] = OpName(r.op);
  if (!r.job_id.empty()) v["job_id"] = r.job_id;
  if (r.step >= 0) v["step"] = Json::Int64(r.step);
  if (r.max_step >= 0) v["max_step"] = Json::Int64(r.max_step);
  if (r.probe) v["probe"] = true;
  if (r.reshard) v["reshard"] = true;
  if (r.short_lived) v["short_lived"] = true;
  if (r.finishing) v["finishing"] = true;
  if (r.leads) v["leads"] = true;
  if (r.samples >= 0) v["samples"] = Json::Int64(r.samples);
  if (r.tokens >= 0) v["tokens"] = Json::Int64(r.tokens);
  if (r.loss) {
    // JSON has no NaN or infinity: those travel as strings.
    const double l = *r.loss;
    if (std::isfinite(l)) {
      v["loss"] = l;
    } else {
      v["loss"] = std::isnan(l) ? "nan" : l > 0 ? "inf" : "-inf";
    }
  }
  if (!r.rank_compute_s.empty()) {
    Json::Value a(Json::arrayValue);
    for (double s : r.rank_compute_s) a.append(s);
    v["rank_compute_s"] = a;
  }
  if (!r.rank_nodes.empty()) {
    Json::Value a(Json::arrayValue);
    for (const auto& n : r.rank_nodes) a.append(n);
    v["rank_nodes"] = a;
  }
  if (r.rank >= 0) v["rank"] = r.rank;
  if (r.world_size > 0) v["world_size"] = r.world_size;
  if (r.local_world_size > 0) v["local_world_size"] = r.local_world_size;
  if (r.save_s >= 0) v["save_s"] = r.save_s;
  if (!r.ckpt_dir.empty()) v["ckpt_dir"] = r.ckpt_dir;
  if (!r.upload.empty()) v[r.op == Op::kLs ? "uri" : "upload"] = r.upload;
  if (r.keep > 0) v["keep"] = Json::Int64(r.keep);
  if (!r.node.empty()) v["node"] = r.node;
  if (!r.kind.empty()) v["kind"] = r.kind;
  if (!r.detail.empty()) v["detail"] = r.detail;
  return CompactJson(v);
}

namespace {

// The operation a request names, once its protocol version is the one this autopard speaks.
Result<Op> DecodeOp(const Json::Value& v) {
  JsonFields f(v, "request");
  int64_t version = f.Int("v", 0, true);
  std::string op_name = f.Str("op", true);
  if (!f.status()) return f.status();
  if (version != kProtocolVersion) {
    return Status::Error("request: v: unsupported protocol version " + std::to_string(version) +
                         " (this autopard speaks " + std::to_string(kProtocolVersion) + ")");
  }
  for (const auto& e : kOps) {
    if (op_name == e.name) return e.op;
  }
  return Status::Error("request: op: unknown operation '" + op_name + "'");
}

// Reads the request's plain fields with `g`, in the order that decides which of their errors `g`
// keeps; the one error returned at once is a negative samples or tokens count.
Status ReadFields(const Json::Value& v, JsonFields& g, Request* r) {
  r->job_id = g.Str("job_id");
  r->step = g.Int("step", -1);
  r->max_step = g.Int("max_step", -1);
  r->probe = g.Bool("probe");
  r->reshard = g.Bool("reshard");
  r->short_lived = g.Bool("short_lived");
  r->finishing = g.Bool("finishing");
  r->leads = g.Bool("leads");
  for (auto [key, field] :
       {std::pair<const char*, int64_t*>{"samples", &r->samples}, {"tokens", &r->tokens}}) {
    *field = g.Int(key, -1);
    if (v.isMember(key) && g.status() && *field < 0) {
      return Status::Error(std::string(OpName(r->op)) + ": " + key + ": must be >= 0");
    }
  }
  r->rank = g.SmallInt("rank", -1);
  r->world_size = g.SmallInt("world_size", 0);
  r->local_world_size = g.SmallInt("local_world_size", 0);
  if (v.isMember("save_s")) {
    const Json::Value& save = v["save_s"];
    if (!save.isNumeric() || !std::isfinite(save.asDouble()) || save.asDouble() < 0) {
      return Status::Error(std::string(OpName(r->op)) + ": save_s: must be seconds >= 0");
    }
    r->save_s = v["save_s"].asDouble();
  }
  r->ckpt_dir = g.Str("ckpt_dir");
  r->upload = g.Str(r->op == Op::kLs ? "uri" : "upload");
  r->keep = g.Int("keep", 0);
  r->node = g.Str("node");
  r->kind = g.Str("kind");
  r->detail = g.Str("detail");
  return Status::Ok();
}

// The heartbeat's loss: a number, or "nan", "inf" or "-inf" (which JSON has no numbers for).
Status DecodeLoss(const Json::Value& v, Request* r) {
  if (!v.isMember("loss")) return Status::Ok();
  const Json::Value& loss = v["loss"];
  if (loss.isNumeric()) {
    r->loss = loss.asDouble();
    return Status::Ok();
  }
  if (loss.isString() &&
      (loss.asString() == "nan" || loss.asString() == "inf" || loss.asString() == "-inf")) {
    const std::string s = loss.asString();
    r->loss = s == "nan" ? std::nan("") : s == "inf" ? HUGE_VAL : -HUGE_VAL;
    return Status::Ok();
  }
  return Status::Error(std::string(OpName(r->op)) +
                       ": loss: must be a number, \"nan\", \"inf\" or \"-inf\"");
}

bool IsComputeSeconds(const Json::Value& x) {
  return x.isNumeric() && std::isfinite(x.asDouble()) && x.asDouble() >= 0;
}

bool IsNodeName(const Json::Value& x) {
  return x.isString() && !x.asString().empty() && x.asString().size() <= 255;
}

// Whether `a` is a list of at most kMaxRanksPerHeartbeat values that all pass `valid`.
bool IsPerRankList(const Json::Value& a, bool (*valid)(const Json::Value&)) {
  if (!a.isArray() || a.size() > kMaxRanksPerHeartbeat) return false;
  for (const Json::Value& x : a) {
    if (!valid(x)) return false;
  }
  return true;
}

// Rank 0's heartbeat: every rank's compute time and node, each list absent or one per rank.
Status DecodeRankLists(const Json::Value& v, Request* r) {
  const std::string op = OpName(r->op);
  if (v.isMember("rank_compute_s")) {
    const Json::Value& a = v["rank_compute_s"];
    if (!IsPerRankList(a, IsComputeSeconds)) {
      return Status::Error(op + ": rank_compute_s: must be a list of seconds >= 0, one per rank");
    }
    for (const Json::Value& x : a) r->rank_compute_s.push_back(x.asDouble());
  }
  if (v.isMember("rank_nodes")) {
    const Json::Value& a = v["rank_nodes"];
    if (!IsPerRankList(a, IsNodeName)) {
      return Status::Error(op + ": rank_nodes: must be a list of node names, one per rank");
    }
    for (const Json::Value& x : a) r->rank_nodes.push_back(x.asString());
  }
  return Status::Ok();
}

}  // namespace

Result<Request> DecodeRequest(std::string_view line) {
  auto parsed = ParseObject(line, "request");
  if (!parsed) return parsed.status();
  const Json::Value& v = *parsed;
  auto op = DecodeOp(v);
  if (!op) return op.status();
  Request r;
  r.op = *op;
  JsonFields g(v, OpName(r.op));
  // A request with several faults is refused for the first in this order.
  if (Status st = ReadFields(v, g, &r); !st) return st;
  if (Status st = DecodeLoss(v, &r); !st) return st;
  if (Status st = DecodeRankLists(v, &r); !st) return st;
  if (!g.status()) return g.status();
  if (Status st = ValidateRequest(r); !st) return st;
  return r;
}

std::string EncodeErrorReply(const std::string& error) {
  Json::Value v(Json::objectValue);
  v["ok"] = false;
  v["error"] = error.empty() ? std::string("unknown error") : error;
  return CompactJson(v);
}

std::string EncodeReply(Op op, const Reply& reply) {
  if (!reply.status.ok()) return EncodeErrorReply(reply.status.message());
  Json::Value v(Json::objectValue);
  v["ok"] = true;
  switch (op) {
    case Op::kCommit:
      v["commit_id"] = Json::Int64(reply.commit.commit_id);
      v["files"] = reply.commit.files;
      v["bytes"] = Json::UInt64(reply.commit.bytes);
      v["duplicate"] = reply.commit.duplicate;
      break;
    case Op::kRestore: {
      v["step"] = Json::Int64(reply.restore.step);
      v["source_job"] = reply.restore.source_job;
      v["dir"] = reply.restore.dir;
      if (!reply.restore.step_dir.empty()) v["step_dir"] = reply.restore.step_dir;
      if (reply.restore.world_size > 0) v["world_size"] = reply.restore.world_size;
      v["bytes_local"] = Json::UInt64(reply.restore.bytes_local);
      v["bytes_fetched"] = Json::UInt64(reply.restore.bytes_fetched);
      Json::Value sk(Json::arrayValue);
      for (const auto& s : reply.restore.skipped) sk.append(s);
      v["skipped"] = sk;
      break;
    }
    case Op::kLs: {
      Json::Value a(Json::arrayValue);
      for (const auto& s : reply.steps) a.append(StepToValue(s));
      v["steps"] = a;
      break;
    }
    case Op::kStatus: {
      Json::Value a(Json::arrayValue);
      for (const auto& u : reply.uploads) a.append(UploadToValue(u));
      v["uploads"] = a;
      break;
    }
    case Op::kEvents: {
      Json::Value a(Json::arrayValue);
      for (const auto& ev : reply.events) a.append(EventToValue(ev));
      v["events"] = a;
      if (!reply.notes.empty()) {
        Json::Value n(Json::arrayValue);
        for (const auto& note : reply.notes) n.append(note);
        v["notes"] = n;
      }
      break;
    }
    case Op::kHeartbeat:
      if (reply.checkpoint_requested) v["checkpoint_requested"] = true;
      break;
    case Op::kEvent:
      break;
    case Op::kRecover:
      v["action"] = reply.recover.action;
      v["reason"] = reply.recover.reason;
      if (!reply.recover.history.empty()) v["history"] = reply.recover.history;
      if (reply.recover.resume_max_step >= 0)
        v["resume_max_step"] = Json::Int64(reply.recover.resume_max_step);
      if (reply.recover.max_mem_gib > 0) v["max_mem_gib"] = reply.recover.max_mem_gib;
      if (!reply.recover.exclude_nodes.empty()) v["exclude_nodes"] = Join(reply.recover.exclude_nodes, ",");
      break;
  }
  return CompactJson(v);
}

namespace {

// The reply's array `key`.
Result<const Json::Value*> ReplyArray(const Json::Value& v, const char* key) {
  const Json::Value& a = v[key];
  if (!a.isArray()) return Status::Error(std::string("autopard reply: ") + key + ": not an array");
  return &a;
}

// The strings of the reply's array `key`, appended to `out`.
Status DecodeStrings(const Json::Value& v, const char* key, std::vector<std::string>* out) {
  auto a = ReplyArray(v, key);
  if (!a) return a.status();
  for (const auto& s : **a) {
    if (!s.isString()) {
      return Status::Error(std::string("autopard reply: ") + key + ": not strings");
    }
    out->push_back(s.asString());
  }
  return Status::Ok();
}

// The objects of the reply's array `key`, each read by `decode`, appended to `out`.
template <typename T>
Status DecodeObjects(const Json::Value& v, const char* key, Result<T> (*decode)(const Json::Value&),
                     std::vector<T>* out) {
  auto a = ReplyArray(v, key);
  if (!a) return a.status();
  for (const auto& e : **a) {
    if (!e.isObject()) {
      return Status::Error(std::string("autopard reply: ") + key + ": not objects");
    }
    auto item = decode(e);
    if (!item) return item.status();
    out->push_back(std::move(*item));
  }
  return Status::Ok();
}

Result<StepInfo> StepFromValue(const Json::Value& e) {
  JsonFields g(e, "autopard reply: steps[]");
  StepInfo s;
  s.job_id = g.Str("job_id");
  s.step = g.Int("step", 0);
  s.state = g.Str("state");
  s.bytes = g.UInt("bytes");
  s.ranks = g.SmallInt("ranks", 0);
  s.world_size = g.SmallInt("world_size", 0);
  s.uri = g.Str("uri");
  if (!g.status()) return g.status();
  return s;
}

Result<UploadInfo> UploadFromValue(const Json::Value& e) {
  JsonFields g(e, "autopard reply: uploads[]");
  UploadInfo u;
  u.job_id = g.Str("job_id");
  u.step = g.Int("step", 0);
  u.rank = g.SmallInt("rank", 0);
  u.state = g.Str("state");
  u.bytes_done = g.UInt("bytes_done");
  u.bytes_total = g.UInt("bytes_total");
  u.throughput_bps = g.Real("throughput_bps", 0);
  u.eta_s = g.Real("eta_s", -1);
  u.error = g.Str("error");
  u.next_retry_s = g.Real("next_retry_s", -1);
  if (!g.status()) return g.status();
  return u;
}

Result<JournalEvent> EventFromValue(const Json::Value& e) {
  JsonFields g(e, "autopard reply: events[]");
  JournalEvent ev;
  ev.time = g.Real("time", 0);
  ev.node = g.Str("node");
  ev.job_id = g.Str("job_id");
  ev.kind = g.Str("kind");
  ev.rank = g.SmallInt("rank", -1);
  ev.step = g.Int("step", -1);
  ev.detail = g.Str("detail");
  if (!g.status()) return g.status();
  return ev;
}

void ReadCommitReply(JsonFields& f, CommitReply* c) {
  c->commit_id = f.Int("commit_id", 0);
  c->files = f.SmallInt("files", 0);
  c->bytes = f.UInt("bytes");
  c->duplicate = f.Bool("duplicate");
}

// The restore's fields (their errors left in `f`) and its skipped steps.
Status DecodeRestoreReply(const Json::Value& v, JsonFields& f, RestoreReply* r) {
  r->step = f.Int("step", -1);
  r->source_job = f.Str("source_job");
  r->dir = f.Str("dir");
  r->step_dir = f.Str("step_dir");
  r->world_size = f.SmallInt("world_size", 0);
  r->bytes_local = f.UInt("bytes_local");
  r->bytes_fetched = f.UInt("bytes_fetched");
  return DecodeStrings(v, "skipped", &r->skipped);
}

Status DecodeEventsReply(const Json::Value& v, Reply* r) {
  if (Status st = DecodeObjects(v, "events", EventFromValue, &r->events); !st) return st;
  // Optional: absent from older daemons and without notes.
  if (!v.isMember("notes")) return Status::Ok();
  return DecodeStrings(v, "notes", &r->notes);
}

void ReadRecoverReply(JsonFields& f, RecoverReply* r) {
  r->action = f.Str("action", true);
  r->reason = f.Str("reason");
  r->history = f.Str("history");
  r->resume_max_step = f.Int("resume_max_step", -1);
  r->max_mem_gib = f.Real("max_mem_gib", 0);
  for (const std::string& n : Split(f.Str("exclude_nodes"), ',')) {
    if (!n.empty()) r->exclude_nodes.push_back(n);
  }
}

// The part of a successful reply that `op` has. Errors of the fields read with `f` stay in `f`
// for the caller, after this one's own.
Status DecodeReplyBody(Op op, const Json::Value& v, JsonFields& f, Reply* r) {
  switch (op) {
    case Op::kCommit:
      ReadCommitReply(f, &r->commit);
      return Status::Ok();
    case Op::kRestore:
      return DecodeRestoreReply(v, f, &r->restore);
    case Op::kLs:
      return DecodeObjects(v, "steps", StepFromValue, &r->steps);
    case Op::kStatus:
      return DecodeObjects(v, "uploads", UploadFromValue, &r->uploads);
    case Op::kEvents:
      return DecodeEventsReply(v, r);
    case Op::kHeartbeat:
      r->checkpoint_requested = f.Bool("checkpoint_requested");
      return Status::Ok();
    case Op::kEvent:
      return Status::Ok();
    case Op::kRecover:
      ReadRecoverReply(f, &r->recover);
      return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace

Result<Reply> DecodeReply(Op op, std::string_view line) {
  auto parsed = ParseObject(line, "autopard reply");
  if (!parsed) return parsed.status();
  const Json::Value& v = *parsed;
  JsonFields f(v, "autopard reply");
  bool ok = f.Bool("ok");
  std::string error = f.Str("error");
  if (!f.status()) return f.status();
  Reply r;
  if (!ok) {
    r.status = Status::Error(error.empty() ? "autopard refused the request" : error);
    return r;
  }
  if (Status st = DecodeReplyBody(op, v, f, &r); !st) return st;
  if (!f.status()) return f.status();
  return r;
}

}  // namespace autopar
