#include "state_db.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>

#include "log.h"

namespace autopar {
namespace {

// Holds the uploader's connection. The uploader's threads run at nice +10 (uploader.cpp); while
// one holds the connection (and with it, during a write, SQLite's write lock, which a commit
// waits for), it runs at nice 0: a holder preempted for its low priority would stall the commit
// (priority inversion). Without the privilege to raise it, the nice is left alone.
class DbLock {
 public:
  explicit DbLock(std::mutex& mu) : tid_(static_cast<id_t>(syscall(SYS_gettid))) {
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, tid_);
    if (errno == 0 && nice > 0 && setpriority(PRIO_PROCESS, tid_, 0) == 0) restore_ = nice;
    lock_ = std::unique_lock<std::mutex>(mu);
  }
  ~DbLock() {
    lock_.unlock();
    if (restore_ > 0) (void)setpriority(PRIO_PROCESS, tid_, restore_);
  }
  DbLock(const DbLock&) = delete;
  DbLock& operator=(const DbLock&) = delete;

 private:
  id_t tid_;
  int restore_ = 0;
  std::unique_lock<std::mutex> lock_;
};

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS commits(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id TEXT NOT NULL, step INTEGER NOT NULL, rank INTEGER NOT NULL,
  world_size INTEGER NOT NULL, local_world_size INTEGER NOT NULL,
  uid INTEGER NOT NULL, gid INTEGER NOT NULL,
  ckpt_dir TEXT NOT NULL, upload TEXT NOT NULL, keep INTEGER NOT NULL, node TEXT NOT NULL,
  state TEXT NOT NULL, error TEXT NOT NULL DEFAULT '',
  created REAL NOT NULL, finished REAL NOT NULL DEFAULT 0, bytes INTEGER NOT NULL DEFAULT 0,
  retry INTEGER NOT NULL DEFAULT 0,
  UNIQUE(job_id, step, rank, upload, ckpt_dir));
CREATE INDEX IF NOT EXISTS commits_state ON commits(state);
CREATE TABLE IF NOT EXISTS files(
  commit_id INTEGER NOT NULL, path TEXT NOT NULL, size INTEGER NOT NULL,
  sha256 TEXT NOT NULL DEFAULT '', upload_id TEXT NOT NULL DEFAULT '',
  uploaded INTEGER NOT NULL DEFAULT 0, etag TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(commit_id, path));
CREATE TABLE IF NOT EXISTS parts(
  commit_id INTEGER NOT NULL, path TEXT NOT NULL, upload_id TEXT NOT NULL, part INTEGER NOT NULL,
  etag TEXT NOT NULL, md5 TEXT NOT NULL,
  PRIMARY KEY(commit_id, path, upload_id, part));
CREATE TABLE IF NOT EXISTS steps(
  job_id TEXT NOT NULL, step INTEGER NOT NULL, location TEXT NOT NULL, state TEXT NOT NULL,
  PRIMARY KEY(job_id, step, location));
CREATE TABLE IF NOT EXISTS journal(
  id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, node TEXT NOT NULL,
  job_id TEXT NOT NULL, kind TEXT NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL,
  detail TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS journal_job ON journal(job_id, time);
CREATE INDEX IF NOT EXISTS journal_job_id ON journal(job_id, id);
CREATE TABLE IF NOT EXISTS job_owners(
  job_id TEXT PRIMARY KEY, uid INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS journal_segments(
  job_id TEXT NOT NULL, first_id INTEGER NOT NULL, last_id INTEGER NOT NULL,
  level INTEGER NOT NULL, PRIMARY KEY(job_id, first_id));
CREATE TABLE IF NOT EXISTS published_jobs(
  job_id TEXT PRIMARY KEY, time REAL NOT NULL);
CREATE TABLE IF NOT EXISTS heartbeats(
  job_id TEXT NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL, time REAL NOT NULL,
  pid INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(job_id, rank));
)sql";

// A prepared statement with typed binding; finalized on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  Stmt& Bind(const std::string& v) {
    sqlite3_bind_text(s_, ++n_, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int64_t v) {
    sqlite3_bind_int64(s_, ++n_, v);
    return *this;
  }
  Stmt& Bind(double v) {
    sqlite3_bind_double(s_, ++n_, v);
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(s_); }
  std::string Text(int i) const {
    const unsigned char* t = sqlite3_column_text(s_, i);
    return t ? std::string(reinterpret_cast<const char*>(t),
                           static_cast<size_t>(sqlite3_column_bytes(s_, i)))
             : std::string();
  }
  int64_t Int(int i) const { return sqlite3_column_int64(s_, i); }
  double Real(int i) const { return sqlite3_column_double(s_, i); }
  Status Error(const char* what) const {
    return Status::Error(std::string("state database: ") + what + ": " + sqlite3_errmsg(db_));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
  int rc_;
  int n_ = 0;
};

// Runs a statement that returns no rows.
Status Run(Stmt& s, const char* what) {
  if (!s.ok()) return s.Error(what);
  int rc = s.Step();
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return s.Error(what);
  return Status::Ok();
}

constexpr const char* kCommitColumns =
    "id, job_id, step, rank, world_size, local_world_size, uid, gid, ckpt_dir, upload, keep, "
    "node, state, error, created, finished, bytes, retry";

CommitRecord ReadCommit(const Stmt& s) {
  CommitRecord c;
  c.id = s.Int(0);
  c.job_id = s.Text(1);
  c.step = s.Int(2);
  c.rank = static_cast<int>(s.Int(3));
  c.world_size = static_cast<int>(s.Int(4));
  c.local_world_size = static_cast<int>(s.Int(5));
  c.uid = static_cast<uint32_t>(s.Int(6));
  c.gid = static_cast<uint32_t>(s.Int(7));
  c.ckpt_dir = s.Text(8);
  c.upload = s.Text(9);
  c.keep = s.Int(10);
  c.node = s.Text(11);
  c.state = s.Text(12);
  c.error = s.Text(13);
  c.created = s.Real(14);
  c.finished = s.Real(15);
  c.bytes = static_cast<uint64_t>(s.Int(16));
  c.retry = s.Int(17) != 0;
  return c;
}

// Every row of the query `s`, each made by `read(s)`; errors name the query as `what`.
template <typename T>
Result<std::vector<T>> ReadRows(Stmt& s, const char* what, T (*read)(const Stmt&)) {
  if (!s.ok()) return s.Error(what);
  std::vector<T> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back(read(s));
  if (rc != SQLITE_DONE) return s.Error(what);
  return out;
}

Result<std::vector<CommitRecord>> ReadCommits(Stmt& s, const char* what) {
  return ReadRows(s, what, ReadCommit);
}

StateDb::StepRow ReadStepRow(const Stmt& s) { return {s.Text(0), s.Int(1), s.Text(2), s.Text(3)}; }

// Adds `column` to `table` of a database created by an earlier release.
Status AddColumnIfMissing(sqlite3* db, const std::string& table, const std::string& column,
                          const std::string& type) {
  const std::string find = "SELECT 1 FROM pragma_table_info('" + table + "') WHERE name='" + column + "'";
  Stmt s(db, find.c_str());
  if (!s.ok()) return s.Error("schema");
  int rc = s.Step();
  if (rc == SQLITE_ROW) return Status::Ok();
  if (rc != SQLITE_DONE) return s.Error("schema");
  const std::string add = "ALTER TABLE " + table + " ADD COLUMN " + column + " " + type;
  Stmt alter(db, add.c_str());
  return Run(alter, ("add " + table + "." + column).c_str());
}

// The columns later releases added (commits.retry, heartbeats.pid).
Status UpgradeSchema(sqlite3* db) {
  if (Status st = AddColumnIfMissing(db, "commits", "retry", "INTEGER NOT NULL DEFAULT 0"); !st) return st;
  return AddColumnIfMissing(db, "heartbeats", "pid", "INTEGER NOT NULL DEFAULT 0");
}

}  // namespace

Result<std::unique_ptr<StateDb>> StateDb::Open(const std::string& path, CommitSync sync) {
  sqlite3* handles[2] = {nullptr, nullptr};
  for (int i = 0; i < 2; ++i) {
    int rc = sqlite3_open_v2(path.c_str(), &handles[i],
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      std::string msg = handles[i] ? sqlite3_errmsg(handles[i]) : sqlite3_errstr(rc);
      sqlite3_close(handles[0]);
      sqlite3_close(handles[1]);
      return Status::Error(path + ": cannot open the state database: " + msg);
    }
    // SQLite's default busy handler sleeps in steps of up to 100 ms: a commit waiting behind
    // the uploader's short bookkeeping transaction would stall for tens of milliseconds. Retry
    // without leaving the CPU for the first ~200 us (the holder, at nice 0 while it holds the
    // database: DbLock, usually finishes on the other core; a sleeping waiter must be scheduled
    // again, which on a busy node costs milliseconds), then poll every 50-200 us (for at most
    // ~10 s).
    sqlite3_busy_handler(
        handles[i],
        [](void*, int count) -> int {
          if (count > 50000) return 0;
          if (count < 100) {
            auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(2);
            while (std::chrono::steady_clock::now() < until) {
            }
          } else {
            std::this_thread::sleep_for(std::chrono::microseconds(count < 200 ? 50 : 200));
          }
          return 1;
        },
        nullptr);
  }
  std::unique_ptr<StateDb> s(new StateDb(handles[0], handles[1]));
  const char* commit_sync =
      sync == CommitSync::kFull ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL";
  for (const char* sql : {"PRAGMA journal_mode=WAL", commit_sync, kSchema}) {
    if (Status st = Exec(s->commit_db_, sql); !st) return Status::Error(path + ": " + st.message());
  }
  if (Status st = UpgradeSchema(s->commit_db_); !st) return Status::Error(path + ": " + st.message());
  // WAL checkpoints (copying the log into the database file, with fsyncs) run on the uploader's
  // connection, never inline in a commit.
  if (Status st = Exec(s->commit_db_, "PRAGMA wal_autocheckpoint=0"); !st) {
    return Status::Error(path + ": " + st.message());
  }
  if (Status st = Exec(s->db_, "PRAGMA synchronous=NORMAL"); !st) return Status::Error(path + ": " + st.message());
  return s;
}

StateDb::~StateDb() {
  if (Status st = FlushHeartbeats(); !st) {
    Log(LogLevel::kError, "%s", st.message().c_str());
  }
  sqlite3_finalize(heartbeat_stmt_);
  sqlite3_close(commit_db_);
  sqlite3_close(db_);
}

Status StateDb::Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return Status::Error(std::string("state database: ") + msg);
  }
  return Status::Ok();
}

Result<int64_t> StateDb::AddCommit(const CommitRecord& c, const std::vector<FileRecord>& files,
                                   bool* duplicate) {
  std::lock_guard<std::mutex> lock(commit_mu_);
  *duplicate = false;
  {
    Stmt find(commit_db_, "SELECT id FROM commits WHERE job_id=? AND step=? AND rank=? AND upload=? AND ckpt_dir=?");
    find.Bind(c.job_id).Bind(c.step).Bind(int64_t{c.rank}).Bind(c.upload).Bind(c.ckpt_dir);
    if (!find.ok()) return find.Error("find commit");
    if (find.Step() == SQLITE_ROW) {
      *duplicate = true;
      return find.Int(0);
    }
  }
  if (Status st = Exec(commit_db_, "BEGIN IMMEDIATE"); !st) return st;
  auto rollback = [&](Status st) -> Result<int64_t> {
    (void)Exec(commit_db_, "ROLLBACK");
    return st;
  };
  Stmt ins(commit_db_,
           "INSERT INTO commits(job_id, step, rank, world_size, local_world_size, uid, gid, "
           "ckpt_dir, upload, keep, node, state, created, bytes) "
           "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  ins.Bind(c.job_id).Bind(c.step).Bind(int64_t{c.rank}).Bind(int64_t{c.world_size})
      .Bind(int64_t{c.local_world_size}).Bind(int64_t{c.uid}).Bind(int64_t{c.gid}).Bind(c.ckpt_dir)
      .Bind(c.upload).Bind(c.keep).Bind(c.node).Bind(c.state).Bind(c.created)
      .Bind(static_cast<int64_t>(c.bytes));
  if (Status st = Run(ins, "insert commit"); !st) return rollback(st);
  int64_t id = sqlite3_last_insert_rowid(commit_db_);
  for (const auto& f : files) {
    Stmt fi(commit_db_, "INSERT INTO files(commit_id, path, size, sha256) VALUES(?,?,?,?)");
    fi.Bind(id).Bind(f.path).Bind(static_cast<int64_t>(f.size)).Bind(f.sha256);
    if (Status st = Run(fi, "insert file"); !st) return rollback(st);
  }
  if (Status st = Exec(commit_db_, "COMMIT"); !st) return rollback(st);
  return id;
}

Result<CommitRecord> StateDb::GetCommit(int64_t id) {
  DbLock lock(mu_);
  Stmt s(db_, (std::string("SELECT ") + kCommitColumns + " FROM commits WHERE id=?").c_str());
  s.Bind(id);
  auto rows = ReadCommits(s, "read commit");
  if (!rows) return rows.status();
  if (rows->empty()) return Status::Error("state database: no commit " + std::to_string(id));
  return rows->front();
}

Result<std::vector<CommitRecord>> StateDb::PendingCommits() {
  DbLock lock(mu_);
  Stmt s(db_, (std::string("SELECT ") + kCommitColumns +
               " FROM commits WHERE state IN ('queued','uploading') ORDER BY id").c_str());
  return ReadCommits(s, "pending commits");
}

Result<std::vector<CommitRecord>> StateDb::RetryableCommits(const std::string& upload) {
  DbLock lock(mu_);
  std::string sql = std::string("SELECT ") + kCommitColumns +
                    " FROM commits WHERE state='failed' AND retry=1 AND upload!=''" +
                    (upload.empty() ? "" : " AND upload=?") + " ORDER BY id";
  Stmt s(db_, sql.c_str());
  if (!upload.empty()) s.Bind(upload);
  return ReadCommits(s, "retryable commits");
}

Result<std::vector<CommitRecord>> StateDb::Commits(const std::string& job_id, int limit) {
  DbLock lock(mu_);
  std::string sql = std::string("SELECT ") + kCommitColumns + " FROM commits" +
                    (job_id.empty() ? "" : " WHERE job_id=?") + " ORDER BY id DESC LIMIT ?";
  Stmt s(db_, sql.c_str());
  if (!job_id.empty()) s.Bind(job_id);
  s.Bind(int64_t{limit});
  return ReadCommits(s, "commits");
}

Result<std::vector<CommitRecord>> StateDb::LocalCommits(const std::string& ckpt_dir, int64_t step) {
  DbLock lock(mu_);
  Stmt s(db_, (std::string("SELECT ") + kCommitColumns +
               " FROM commits WHERE ckpt_dir=? AND step=? AND upload='' ORDER BY rank").c_str());
  s.Bind(ckpt_dir).Bind(step);
  return ReadCommits(s, "local commits");
}

Status StateDb::SetCommitState(int64_t id, const std::string& state, const std::string& error,
                               uint64_t bytes, bool retry) {
  DbLock lock(mu_);
  Stmt s(db_, "UPDATE commits SET state=?, error=?, bytes=?, retry=?, finished=strftime('%s','now') WHERE id=?");
  s.Bind(state).Bind(error).Bind(static_cast<int64_t>(bytes)).Bind(int64_t{retry ? 1 : 0}).Bind(id);
  return Run(s, "update commit");
}

Result<std::vector<FileRecord>> StateDb::Files(int64_t commit_id) {
  DbLock lock(mu_);
  Stmt s(db_, "SELECT path, size, sha256, upload_id, uploaded, etag FROM files WHERE commit_id=? ORDER BY path");
  s.Bind(commit_id);
  return ReadRows<FileRecord>(s, "files", [](const Stmt& r) {
    FileRecord f;
    f.path = r.Text(0);
    f.size = static_cast<uint64_t>(r.Int(1));
    f.sha256 = r.Text(2);
    f.upload_id = r.Text(3);
    f.uploaded = r.Int(4) != 0;
    f.etag = r.Text(5);
    return f;
  });
}

Status StateDb::SetUploadId(int64_t commit_id, const std::string& path, const std::string& upload_id) {
  DbLock lock(mu_);
  Stmt d(db_, "DELETE FROM parts WHERE commit_id=? AND path=?");
  d.Bind(commit_id).Bind(path);
  if (Status st = Run(d, "forget parts"); !st) return st;
  Stmt s(db_, "UPDATE files SET upload_id=? WHERE commit_id=? AND path=?");
  s.Bind(upload_id).Bind(commit_id).Bind(path);
  return Run(s, "record upload id");
}

Result<std::vector<PartRecord>> StateDb::Parts(int64_t commit_id, const std::string& path) {
  DbLock lock(mu_);
  Stmt s(db_,
         "SELECT p.part, p.etag, p.md5 FROM parts p JOIN files f ON f.commit_id=p.commit_id AND "
         "f.path=p.path AND f.upload_id=p.upload_id WHERE p.commit_id=? AND p.path=? ORDER BY p.part");
  s.Bind(commit_id).Bind(path);
  return ReadRows<PartRecord>(s, "parts", [](const Stmt& r) -> PartRecord {
    return {static_cast<int>(r.Int(0)), r.Text(1), r.Text(2)};
  });
}

Status StateDb::AddPart(int64_t commit_id, const std::string& path, const PartRecord& part) {
  DbLock lock(mu_);
  Stmt s(db_,
         "INSERT OR REPLACE INTO parts(commit_id, path, upload_id, part, etag, md5) "
         "SELECT ?, ?, upload_id, ?, ?, ? FROM files WHERE commit_id=? AND path=?");
  s.Bind(commit_id).Bind(path).Bind(int64_t{part.part}).Bind(part.etag).Bind(part.md5_hex)
      .Bind(commit_id).Bind(path);
  return Run(s, "record part");
}

Status StateDb::SetFileUploaded(int64_t commit_id, const std::string& path, const std::string& etag) {
  DbLock lock(mu_);
  Stmt s(db_, "UPDATE files SET uploaded=1, etag=?, upload_id='' WHERE commit_id=? AND path=?");
  s.Bind(etag).Bind(commit_id).Bind(path);
  if (Status st = Run(s, "record uploaded file"); !st) return st;
  Stmt d(db_, "DELETE FROM parts WHERE commit_id=? AND path=?");
  d.Bind(commit_id).Bind(path);
  return Run(d, "forget parts");
}

Status StateDb::SetFileSha256(int64_t commit_id, const std::string& path, const std::string& sha256) {
  DbLock lock(mu_);
  Stmt s(db_, "UPDATE files SET sha256=? WHERE commit_id=? AND path=?");
  s.Bind(sha256).Bind(commit_id).Bind(path);
  return Run(s, "record digest");
}

Status StateDb::SetStepState(const std::string& job_id, int64_t step, const std::string& where,
                             const std::string& state) {
  DbLock lock(mu_);
  Stmt s(db_, "INSERT OR REPLACE INTO steps(job_id, step, location, state) VALUES(?,?,?,?)");
  s.Bind(job_id).Bind(step).Bind(where).Bind(state);
  return Run(s, "record step");
}

Result<std::vector<StateDb::StepRow>> StateDb::Steps(const std::string& where) {
  DbLock lock(mu_);
  Stmt s(db_, "SELECT job_id, step, location, state FROM steps WHERE location=? ORDER BY step DESC, job_id DESC");
  s.Bind(where);
  return ReadRows(s, "steps", ReadStepRow);
}

Result<std::vector<StateDb::StepRow>> StateDb::StepsOfJob(const std::string& job_id) {
  DbLock lock(mu_);
  Stmt s(db_, "SELECT job_id, step, location, state FROM steps WHERE job_id=? ORDER BY step DESC");
  s.Bind(job_id);
  return ReadRows(s, "steps", ReadStepRow);
}

Status StateDb::DeleteStep(const std::string& job_id, int64_t step, const std::string& where) {
  DbLock lock(mu_);
  Stmt s(db_, "DELETE FROM steps WHERE job_id=? AND step=? AND location=?");
  s.Bind(job_id).Bind(step).Bind(where);
  return Run(s, "delete step");
}

Status StateDb::AddEvent(const JournalEvent& e) {
  DbLock lock(mu_);
  Stmt s(db_, "INSERT INTO journal(time, node, job_id, kind, rank, step, detail) VALUES(?,?,?,?,?,?,?)");
  s.Bind(e.time).Bind(e.node).Bind(e.job_id).Bind(e.kind).Bind(int64_t{e.rank}).Bind(e.step)
      .Bind(e.detail);
  return Run(s, "journal");
}

Result<StateDb::JobUsage> StateDb::UsageOf(const std::string& job_id) {
  DbLock lock(mu_);
  JobUsage u;
  Stmt s(db_, "SELECT COUNT(*), COALESCE(SUM(LENGTH(detail)), 0) FROM journal WHERE job_id=?");
  s.Bind(job_id);
  auto counts = ReadRows<std::pair<int64_t, int64_t>>(
      s, "journal", [](const Stmt& r) { return std::make_pair(r.Int(0), r.Int(1)); });
  if (!counts) return counts.status();
  if (!counts->empty()) std::tie(u.events, u.event_bytes) = counts->front();
  Stmt h(db_, "SELECT rank FROM heartbeats WHERE job_id=?");
  h.Bind(job_id);
  auto ranks = ReadRows<int>(h, "heartbeats", [](const Stmt& r) { return static_cast<int>(r.Int(0)); });
  if (!ranks) return ranks.status();
  u.ranks = std::move(*ranks);
  return u;
}

Result<std::vector<JournalEvent>> StateDb::Events(const std::string& job_id) {
  DbLock lock(mu_);
  Stmt s(db_, "SELECT time, node, job_id, kind, rank, step, detail FROM journal WHERE job_id=? ORDER BY time, id");
  s.Bind(job_id);
  return ReadRows<JournalEvent>(s, "journal", [](const Stmt& r) -> JournalEvent {
    return {r.Real(0), r.Text(1), r.Text(2), r.Text(3), static_cast<int>(r.Int(4)), r.Int(5),
            r.Text(6)};
  });
}

Result<std::vector<StateDb::EventRow>> StateDb::EventsBetween(const std::string& job_id,
                                                              int64_t first_id, int64_t last_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT id, time, node, job_id, kind, rank, step, detail FROM journal "
              "WHERE job_id=? AND id>=? AND id<=? ORDER BY id");
  s.Bind(job_id).Bind(first_id).Bind(last_id);
  return ReadRows<EventRow>(s, "journal", [](const Stmt& r) -> EventRow {
    return {r.Int(0), {r.Real(1), r.Text(2), r.Text(3), r.Text(4), static_cast<int>(r.Int(5)),
                       r.Int(6), r.Text(7)}};
  });
}

Status StateDb::SetJobOwner(const std::string& job_id, uint32_t uid) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "INSERT OR REPLACE INTO job_owners(job_id, uid) VALUES(?,?)");
  s.Bind(job_id).Bind(int64_t{uid});
  return Run(s, "job owner");
}

Result<int64_t> StateDb::JobOwner(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT uid FROM job_owners WHERE job_id=?");
  s.Bind(job_id);
  auto rows = ReadRows<int64_t>(s, "job owner", [](const Stmt& r) -> int64_t { return r.Int(0); });
  if (!rows) return rows.status();
  return rows->empty() ? int64_t{-1} : rows->front();
}

Result<std::vector<JournalSegment>> StateDb::JournalSegments(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "SELECT first_id, last_id, level FROM journal_segments WHERE job_id=? "
              "ORDER BY first_id");
  s.Bind(job_id);
  return ReadRows<JournalSegment>(s, "journal segments", [](const Stmt& r) -> JournalSegment {
    return {r.Int(0), r.Int(1), static_cast<int>(r.Int(2))};
  });
}

Status StateDb::SetJournalSegments(const std::string& job_id,
                                   const std::vector<JournalSegment>& segments) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Status st = Exec(db_, "BEGIN IMMEDIATE"); !st) return st;
  Status st = Status::Ok();
  {
    Stmt del(db_, "DELETE FROM journal_segments WHERE job_id=?");
    del.Bind(job_id);
    st = Run(del, "journal segments");
  }
  for (const auto& g : segments) {
    if (!st) break;
    Stmt ins(db_, "INSERT INTO journal_segments(job_id, first_id, last_id, level) VALUES(?,?,?,?)");
    ins.Bind(job_id).Bind(g.first_id).Bind(g.last_id).Bind(int64_t{g.level});
    st = Run(ins, "journal segments");
  }
  if (Status end = Exec(db_, st.ok() ? "COMMIT" : "ROLLBACK"); !end && st.ok()) st = end;
  return st;
}

Status StateDb::MarkPublished(const std::string& job_id, double time) {
  DbLock lock(mu_);
  Stmt s(db_, "INSERT OR REPLACE INTO published_jobs(job_id, time) VALUES(?,?)");
  s.Bind(job_id).Bind(time);
  return Run(s, "published jobs");
}

Result<std::vector<std::string>> StateDb::PublishedBefore(double before) {
  DbLock lock(mu_);
  Stmt s(db_, "SELECT job_id FROM published_jobs WHERE time < ? ORDER BY job_id");
  s.Bind(before);
  return ReadRows<std::string>(s, "published jobs", [](const Stmt& r) { return r.Text(0); });
}

Status StateDb::ForgetPublished(const std::string& job_id) {
  DbLock lock(mu_);
  if (Status st = Exec(db_, "BEGIN IMMEDIATE"); !st) return st;
  Status st = Status::Ok();
  for (const char* sql : {"DELETE FROM published_jobs WHERE job_id=?",
                          "DELETE FROM journal_segments WHERE job_id=?"}) {
    Stmt del(db_, sql);
    del.Bind(job_id);
    if (st) st = Run(del, "published jobs");
  }
  if (Status end = Exec(db_, st.ok() ? "COMMIT" : "ROLLBACK"); !end && st.ok()) st = end;
  return st;
}

Result<std::vector<std::string>> StateDb::InactiveJobs(double before) {
  if (Status st = FlushHeartbeats(); !st) return st;
  DbLock lock(mu_);
  Stmt s(db_,
         "SELECT job_id FROM ("
         " SELECT job_id, MAX(time) t FROM journal GROUP BY job_id"
         " UNION ALL SELECT job_id, MAX(MAX(created), MAX(finished)) FROM commits GROUP BY job_id"
         " UNION ALL SELECT job_id, MAX(time) FROM heartbeats GROUP BY job_id"
         " UNION ALL SELECT job_id, NULL FROM steps"
         " UNION ALL SELECT job_id, NULL FROM job_owners"
         " UNION ALL SELECT job_id, NULL FROM journal_segments)"
         " GROUP BY job_id HAVING COALESCE(MAX(t), 0) < ? ORDER BY job_id");
  s.Bind(before);
  return ReadRows<std::string>(s, "inactive jobs", [](const Stmt& r) { return r.Text(0); });
}

Result<std::vector<CheckpointDirRow>> StateDb::CheckpointDirs() {
  DbLock lock(mu_);
  Stmt s(db_,
         "SELECT job_id, ckpt_dir, MAX(uid), MAX(gid), MAX(upload != ''),"
         " SUM(upload != '' AND (state IN ('queued', 'uploading') OR (state = 'failed' AND retry = 1)))"
         " FROM commits GROUP BY job_id, ckpt_dir ORDER BY job_id, ckpt_dir");
  return ReadRows<CheckpointDirRow>(s, "checkpoint directories", [](const Stmt& r) {
    CheckpointDirRow row;
    row.job_id = r.Text(0);
    row.ckpt_dir = r.Text(1);
    row.owner = UserIdentity{static_cast<uid_t>(r.Int(2)), static_cast<gid_t>(r.Int(3))};
    row.uploads = r.Int(4) != 0;
    row.unfinished = r.Int(5);
    return row;
  });
}

Result<std::vector<std::pair<int64_t, std::string>>> StateDb::LocalCompleteSteps(
    const std::string& job_id) {
  DbLock lock(mu_);
  Stmt s(db_,
         "SELECT step, location FROM steps WHERE job_id=? AND state='COMPLETE-LOCAL' "
         "ORDER BY step, location");
  s.Bind(job_id);
  return ReadRows<std::pair<int64_t, std::string>>(
      s, "local steps", [](const Stmt& r) { return std::make_pair(r.Int(0), r.Text(1)); });
}

namespace {

// Rows of one kind a retention transaction deletes at most (StateDb::PruneJob).
constexpr int64_t kPruneBatch = 1000;

// A commit row that is not the record of a local-only checkpoint still recorded complete.
constexpr const char* kNotLocalComplete =
    "NOT (commits.state='local' AND commits.upload='' AND EXISTS (SELECT 1 FROM steps s WHERE "
    "s.job_id=commits.job_id AND s.step=commits.step AND s.location=commits.ckpt_dir AND "
    "s.state='COMPLETE-LOCAL'))";

// The single integer the query `sql` (binding `job_id` as ?1) returns; 0 for NULL.
Result<int64_t> QueryInt(sqlite3* db, const std::string& sql, const std::string& job_id,
                         const char* what) {
  Stmt s(db, sql.c_str());
  s.Bind(job_id);
  if (!s.ok()) return s.Error(what);
  if (s.Step() != SQLITE_ROW) return s.Error(what);
  return s.Int(0);
}

// A check that keeps a job: a count of its rows (`sql`, the job bound as ?1) that, when not 0,
// keeps it for `reason`.
struct KeepCheck {
  const char* sql;
  const char* what;  // names the query in its errors
  const char* reason;
};
constexpr KeepCheck kUploadsPending = {
    "SELECT COUNT(*) FROM commits WHERE job_id=?1 AND (state IN "
    "('queued','uploading') OR (state='failed' AND retry=1 AND upload!=''))",
    "job commits", "uploads pending or to retry"};
constexpr KeepCheck kPublicationPending = {
    "SELECT COALESCE((SELECT MAX(id) FROM journal WHERE job_id=?1), 0) > "
    "COALESCE((SELECT MAX(last_id) FROM journal_segments WHERE job_id=?1), 0)",
    "journal publication", "journal publication pending"};

// The check's reason when it keeps the job, else empty.
Result<std::string> Check(sqlite3* db, const KeepCheck& check, const std::string& job_id) {
  auto n = QueryInt(db, check.sql, job_id, check.what);
  if (!n) return n.status();
  return std::string(*n != 0 ? check.reason : "");
}

// Why the job must be kept for now: active since `before`, uploads to finish or (with
// `require_published`) events not yet published; empty when nothing keeps it.
Result<std::string> ReasonToKeep(sqlite3* db, const std::string& job_id, double before,
                                 bool require_published) {
  Stmt act(db,
           "SELECT MAX(t) FROM ("
           " SELECT MAX(time) t FROM journal WHERE job_id=?1"
           " UNION ALL SELECT MAX(MAX(created), MAX(finished)) FROM commits WHERE job_id=?1"
           " UNION ALL SELECT MAX(time) FROM heartbeats WHERE job_id=?1)");
  act.Bind(job_id);
  if (!act.ok() || act.Step() != SQLITE_ROW) return act.Error("job activity");
  if (act.Real(0) >= before) return std::string("recently active");
  auto uploads = Check(db, kUploadsPending, job_id);
  if (!uploads || !uploads->empty() || !require_published) return uploads;
  return Check(db, kPublicationPending, job_id);
}

// Deletes a job's rows inside a retention transaction, adding how many to `*rows`.
class JobRows {
 public:
  JobRows(sqlite3* db, const std::string& job_id, int64_t* rows)
      : db_(db), job_id_(job_id), rows_(rows) {}

  // The local steps whose directories are gone, whatever their state.
  Status DeleteGoneSteps(const std::vector<std::pair<int64_t, std::string>>& gone_local) {
    for (const auto& [step, where] : gone_local) {
      Stmt d(db_, "DELETE FROM steps WHERE job_id=?1 AND step=?2 AND location=?3");
      d.Bind(job_id_).Bind(step).Bind(where);
      if (Status st = Count(Run(d, "prune steps")); !st) return st;
    }
    return Status::Ok();
  }

  // A batch of the journal; true when it was a full one (more may be left).
  Result<bool> DeleteJournalBatch() {
    int64_t n = 0;
    if (Status st = Delete("DELETE FROM journal WHERE id IN (SELECT id FROM journal WHERE "
                           "job_id=?1 ORDER BY id LIMIT " +
                               std::to_string(kPruneBatch) + ")",
                           "prune journal", &n);
        !st) {
      return st;
    }
    return n == kPruneBatch;
  }

  // A batch of commits with their files and parts, all but those of a local-only checkpoint
  // still recorded complete; true when it was a full one (more may be left).
  Result<bool> DeleteCommitBatch() {
    Stmt pick(db_, (std::string("SELECT id FROM commits WHERE job_id=?1 AND ") + kNotLocalComplete +
                    " LIMIT " + std::to_string(kPruneBatch / 8))
                       .c_str());
    pick.Bind(job_id_);
    auto ids = ReadRows<int64_t>(pick, "prune commits", [](const Stmt& r) { return r.Int(0); });
    if (!ids) return ids.status();
    for (int64_t id : *ids) {
      for (const char* sql :
           {"DELETE FROM parts WHERE commit_id=?", "DELETE FROM files WHERE commit_id=?",
            "DELETE FROM commits WHERE id=?"}) {
        Stmt d(db_, sql);
        d.Bind(id);
        if (Status st = Count(Run(d, "prune commits")); !st) return st;
      }
    }
    return static_cast<int64_t>(ids->size()) == kPruneBatch / 8;
  }

  // What is left once the journal and commits are gone: the steps (but a local-only checkpoint's
  // still recorded complete), heartbeats, owner and published segments.
  Status DeleteTheRest() {
    if (Status st = Delete("DELETE FROM steps WHERE job_id=?1 AND NOT (state='COMPLETE-LOCAL' AND "
                           "EXISTS (SELECT 1 FROM commits c WHERE c.job_id=steps.job_id AND "
                           "c.step=steps.step AND c.ckpt_dir=steps.location AND c.upload='' AND "
                           "c.state='local'))",
                           "prune steps");
        !st) {
      return st;
    }
    for (const char* table : {"heartbeats", "job_owners", "journal_segments"}) {
      if (Status st = Delete(std::string("DELETE FROM ") + table + " WHERE job_id=?1", "prune");
          !st) {
        return st;
      }
    }
    return Status::Ok();
  }

 private:
  // One statement that binds the job as ?1; `changed`, if given, gets the rows it deleted.
  Status Delete(const std::string& sql, const char* what, int64_t* changed = nullptr) {
    Stmt d(db_, sql.c_str());
    d.Bind(job_id_);
    if (Status st = Count(Run(d, what)); !st) return st;
    if (changed) *changed = sqlite3_changes(db_);
    return Status::Ok();
  }

  // `st`, having counted the rows the statement just run deleted when it succeeded.
  Status Count(Status st) {
    if (st) *rows_ += sqlite3_changes(db_);
    return st;
  }

  sqlite3* db_;
  const std::string& job_id_;
  int64_t* rows_;
};

}  // namespace

Result<StateDb::PruneResult> StateDb::PruneJob(
    const std::string& job_id, double before, bool require_published,
    const std::vector<std::pair<int64_t, std::string>>& gone_local) {
  PruneResult out;
  for (;;) {
    DbLock lock(mu_);  // released between rounds: the uploader's bookkeeping goes in between
    if (Status st = Exec(db_, "BEGIN IMMEDIATE"); !st) return st;
    const int64_t rows_before = out.rows;
    Result<bool> again = PruneRound(job_id, before, require_published, gone_local, &out);
    Status st = again.ok() ? Exec(db_, "COMMIT") : again.status();
    if (!st.ok()) {
      (void)Exec(db_, "ROLLBACK");
      out.rows = rows_before;
      return Status::Error("job " + job_id + ": " + st.message());
    }
    if (!*again) return out;
  }
}

Result<bool> StateDb::PruneRound(const std::string& job_id, double before, bool require_published,
                                 const std::vector<std::pair<int64_t, std::string>>& gone_local,
                                 PruneResult* out) {
  // Checked in every transaction: an event, commit or heartbeat arriving meanwhile keeps the
  // job (the heartbeats recorded so far are written in this transaction first).
  if (Status st = WritePendingHeartbeats(); !st) return st;
  auto keep = ReasonToKeep(db_, job_id, before, require_published);
  if (!keep) return keep.status();
  if (!keep->empty()) {
    out->kept_because = *keep;
    return false;
  }
  JobRows rows(db_, job_id, &out->rows);
  if (Status st = rows.DeleteGoneSteps(gone_local); !st) return st;
  // Large jobs go in batches, each its own short transaction: a commit waits for SQLite's
  // write lock at most one batch (about a millisecond), never the whole job.
  for (auto batch : {&JobRows::DeleteJournalBatch, &JobRows::DeleteCommitBatch}) {
    Result<bool> full = (rows.*batch)();
    if (!full) return full.status();
    if (*full) return true;
  }
  if (Status st = rows.DeleteTheRest(); !st) return st;
  out->pruned = true;
  return false;
}

Status StateDb::Heartbeat(const std::string& job_id, int rank, int64_t step, double time, int pid) {
  std::lock_guard<std::mutex> lock(heartbeats_mu_);
  heartbeats_[{job_id, rank}] = {step, time, pid};
  return Status::Ok();
}

Result<std::vector<StateDb::WatchedRank>> StateDb::WatchedRanks(double since) {
  if (Status st = FlushHeartbeats(); !st) return st;
  DbLock lock(mu_);
  Stmt s(db_,
         "SELECT job_id, rank, step, time, pid FROM heartbeats WHERE pid > 0 AND time >= ? "
         "ORDER BY job_id, rank");
  s.Bind(since);
  return ReadRows<WatchedRank>(s, "heartbeats", [](const Stmt& r) {
    return WatchedRank{r.Text(0), static_cast<int>(r.Int(1)), r.Int(2), r.Real(3),
                       static_cast<int>(r.Int(4))};
  });
}

Status StateDb::FlushHeartbeats() {
  {
    std::lock_guard<std::mutex> lock(heartbeats_mu_);
    if (heartbeats_.empty()) return Status::Ok();
  }
  DbLock lock(mu_);
  if (Status st = Exec(db_, "BEGIN IMMEDIATE"); !st) return st;
  Status st = WritePendingHeartbeats();
  if (Status end = Exec(db_, st.ok() ? "COMMIT" : "ROLLBACK"); !end && st.ok()) st = end;
  return st;
}

Status StateDb::WritePendingHeartbeats() {
  std::map<std::pair<std::string, int>, HeartbeatRow> rows;
  {
    std::lock_guard<std::mutex> lock(heartbeats_mu_);
    rows.swap(heartbeats_);
  }
  if (rows.empty()) return Status::Ok();
  Status st = Status::Ok();
  if (!heartbeat_stmt_ &&
      sqlite3_prepare_v2(db_, "INSERT OR REPLACE INTO heartbeats(job_id, rank, step, time, pid) "
                              "VALUES(?,?,?,?,?)", -1, &heartbeat_stmt_, nullptr) != SQLITE_OK) {
    st = Status::Error(std::string("state database: heartbeat: ") + sqlite3_errmsg(db_));
  }
  for (auto it = rows.begin(); st.ok() && it != rows.end(); ++it) {
    const auto& [key, row] = *it;
    sqlite3_bind_text(heartbeat_stmt_, 1, key.first.data(), static_cast<int>(key.first.size()),
                      SQLITE_TRANSIENT);
    sqlite3_bind_int64(heartbeat_stmt_, 2, key.second);
    sqlite3_bind_int64(heartbeat_stmt_, 3, row.step);
    sqlite3_bind_double(heartbeat_stmt_, 4, row.time);
    sqlite3_bind_int64(heartbeat_stmt_, 5, row.pid);
    if (sqlite3_step(heartbeat_stmt_) != SQLITE_DONE) {
      st = Status::Error(std::string("state database: heartbeat: ") + sqlite3_errmsg(db_));
    }
    sqlite3_reset(heartbeat_stmt_);
  }
  if (!st.ok()) {
    // The caller's transaction is rolled back: every row stays pending, unless a newer one of
    // the same job and rank came meanwhile.
    std::lock_guard<std::mutex> lock(heartbeats_mu_);
    heartbeats_.merge(rows);
  }
  return st;
}

}  // namespace autopar
