// The embedded default store: one SQLite file in WAL mode with synchronous=FULL, so a commit
// that returned survives a crash of the controller or of the machine.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/mutex.h"
#include "controller/store/state_store.h"
#include "controller/store/store_disk.h"
#include "controller/store/store_integrity.h"
#include "controller/store/store_lock.h"

namespace hangar::controller {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, queue TEXT NOT NULL, user TEXT NOT NULL,
  state TEXT NOT NULL, spec TEXT NOT NULL, submitted_ms INTEGER, started_ms INTEGER,
  ended_ms INTEGER, attempt INTEGER, restarts INTEGER, reason TEXT, message TEXT,
  placement TEXT, extra TEXT);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY AUTOINCREMENT, time_ms INTEGER, kind TEXT, subject TEXT, message TEXT);
CREATE INDEX IF NOT EXISTS events_subject ON events(subject, id);
CREATE TABLE IF NOT EXISTS audit (
  id INTEGER PRIMARY KEY AUTOINCREMENT, time_ms INTEGER, user TEXT, role TEXT, method TEXT,
  path TEXT, remote TEXT, status INTEGER, message TEXT);
CREATE INDEX IF NOT EXISTS audit_user ON audit(user, id);
CREATE TABLE IF NOT EXISTS kv (tbl TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY (tbl, key));
)sql";

struct StmtDeleter {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Stmt = std::unique_ptr<sqlite3_stmt, StmtDeleter>;

class SqliteStore final : public StateStore {
 public:
  ~SqliteStore() override {
    StopCheckpointer();
    stmts_.clear();
    if (db_) sqlite3_close(db_);
  }

  Status Open(const std::string& path) {
    path_ = path;
    std::error_code ec;
    auto parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    HANGAR_ASSIGN_OR_RETURN(lock_, StoreFileLock::Take(path));
    inode_ = lock_.inode();
    for (const char* suffix : {"-wal", "-shm"}) ::chmod((path + suffix).c_str(), 0600);
    if (sqlite3_open_v2(path.c_str(), &db_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK) {
      return Status::Unavailable("cannot open the store " + path + ": " + Error());
    }
    sqlite3_busy_timeout(db_, 5000);
    HANGAR_RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL"));
    HANGAR_RETURN_IF_ERROR(Exec("PRAGMA synchronous=FULL"));
    HANGAR_RETURN_IF_ERROR(Exec("PRAGMA foreign_keys=ON"));
    HANGAR_RETURN_IF_ERROR(Exec(kSchema));
    HANGAR_RETURN_IF_ERROR(Migrate());
    StartCheckpointer();
    return Status::Ok();
  }

  Status Commit(const StoreBatch& b) override {
    if (b.empty()) return Status::Ok();
    // A store file deleted or replaced under us would take every later commit into a file no
    // one can open again (or another store): stop at once instead of answering 201s.
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0 || st.st_ino != inode_) {
      return Status::Unavailable(
          "the store file " + path_ +
          " was deleted or replaced while the controller ran; "
          "restore it from a backup (or start on a new store) and restart the controller");
    }
    HANGAR_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    Status s = WriteBatch(b);
    if (s.ok()) s = Exec("COMMIT");
    if (!s.ok()) {
      const bool full = DiskFull();  // before the rollback sets another error
      (void)Exec("ROLLBACK");
      return full ? StoreDiskFull(path_) : s;
    }
    return s;
  }

  StatusOr<StoreContents> Load() override {
    StoreContents c;
    std::unordered_map<std::string, std::shared_ptr<const std::string>> specs;
    HANGAR_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare("SELECT key,text FROM specs"));
    while (sqlite3_step(s) == SQLITE_ROW)
      specs.emplace(Text(s, 0), std::make_shared<const std::string>(Text(s, 1)));
    sqlite3_reset(s);
    HANGAR_ASSIGN_OR_RETURN(
        sqlite3_stmt * q,
        Prepare(
            "SELECT "
            "id,name,queue,user,state,spec_key,submitted_ms,started_ms,ended_ms,attempt,restarts,"
            "reason,message,placement,extra FROM jobs ORDER BY id"));
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
      JobRow j;
      j.id = static_cast<uint64_t>(sqlite3_column_int64(q, 0));
      j.name = Text(q, 1);
      j.queue = Text(q, 2);
      j.user = Text(q, 3);
      j.state = Text(q, 4);
      j.spec_key = Text(q, 5);
      if (auto it = specs.find(j.spec_key); it != specs.end()) j.spec = it->second;
      j.submitted = sqlite3_column_int64(q, 6);
      j.started = sqlite3_column_int64(q, 7);
      j.ended = sqlite3_column_int64(q, 8);
      j.attempt = static_cast<uint32_t>(sqlite3_column_int64(q, 9));
      j.restarts = static_cast<uint32_t>(sqlite3_column_int64(q, 10));
      j.reason = Text(q, 11);
      j.message = Text(q, 12);
      j.placement_json = Text(q, 13);
      j.extra_json = Text(q, 14);
      c.jobs.push_back(std::move(j));
    }
    HANGAR_RETURN_IF_ERROR(Finish(q, rc, "jobs"));
    HANGAR_ASSIGN_OR_RETURN(sqlite3_stmt * n,
                            Prepare("SELECT name,state FROM nodes ORDER BY name"));
    while ((rc = sqlite3_step(n)) == SQLITE_ROW) c.nodes.push_back({Text(n, 0), Text(n, 1)});
    HANGAR_RETURN_IF_ERROR(Finish(n, rc, "nodes"));
    HANGAR_ASSIGN_OR_RETURN(sqlite3_stmt * v,
                            Prepare("SELECT tbl,key,value FROM kv ORDER BY tbl,key"));
    while ((rc = sqlite3_step(v)) == SQLITE_ROW)
      c.values.push_back({Text(v, 0), Text(v, 1), Text(v, 2), false});
    HANGAR_RETURN_IF_ERROR(Finish(v, rc, "values"));
    return c;
  }

  StatusOr<std::vector<EventRow>> Events(const std::string& prefix, int limit) override {
    HANGAR_ASSIGN_OR_RETURN(
        sqlite3_stmt * q,
        Prepare("SELECT id,time_ms,kind,subject,message FROM events WHERE substr(subject,1,?1)=?2 "
                "ORDER BY id DESC LIMIT ?3"));
    sqlite3_bind_int64(q, 1, static_cast<int64_t>(prefix.size()));
    sqlite3_bind_text(q, 2, prefix.data(), static_cast<int>(prefix.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(q, 3, limit);
    std::vector<EventRow> out;
    while (sqlite3_step(q) == SQLITE_ROW) {
      out.push_back({sqlite3_column_int64(q, 0), sqlite3_column_int64(q, 1), Text(q, 2), Text(q, 3),
                     Text(q, 4)});
    }
    sqlite3_reset(q);
    return out;
  }

  StatusOr<std::vector<AuditRow>> Audit(const std::string& user, int limit) override {
    HANGAR_ASSIGN_OR_RETURN(sqlite3_stmt * q,
                            Prepare("SELECT id,time_ms,user,role,method,path,remote,status,message "
                                    "FROM audit WHERE ?1='' OR user=?1 "
                                    "ORDER BY id DESC LIMIT ?2"));
    BindText(q, 1, user);
    sqlite3_bind_int64(q, 2, limit);
    std::vector<AuditRow> out;
    while (sqlite3_step(q) == SQLITE_ROW) {
      AuditRow a;
      a.id = sqlite3_column_int64(q, 0);
      a.time = sqlite3_column_int64(q, 1);
      a.user = Text(q, 2);
      a.role = Text(q, 3);
      a.method = Text(q, 4);
      a.path = Text(q, 5);
      a.remote = Text(q, 6);
      a.status = static_cast<int>(sqlite3_column_int64(q, 7));
      a.message = Text(q, 8);
      out.push_back(std::move(a));
    }
    sqlite3_reset(q);
    return out;
  }

  StatusOr<std::vector<HistoryRow>> History(bool hourly, Time since) override {
    HANGAR_ASSIGN_OR_RETURN(
        sqlite3_stmt * q, Prepare("SELECT time_ms,step_ms,gpus,allocated,busy,idle,pending,running "
                                  "FROM history WHERE hourly=?1 AND "
                                  "time_ms>=?2 ORDER BY time_ms"));
    sqlite3_bind_int(q, 1, hourly ? 1 : 0);
    sqlite3_bind_int64(q, 2, since);
    std::vector<HistoryRow> out;
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
      out.push_back({sqlite3_column_int64(q, 0), sqlite3_column_int64(q, 1),
                     sqlite3_column_double(q, 2), sqlite3_column_double(q, 3),
                     sqlite3_column_double(q, 4), sqlite3_column_double(q, 5),
                     sqlite3_column_double(q, 6), sqlite3_column_double(q, 7)});
    }
    HANGAR_RETURN_IF_ERROR(Finish(q, rc, "history"));
    return out;
  }

  std::string Describe() const override { return "sqlite://" + path_; }
  // The last failure was for want of room on the store's disk.
  bool DiskFull() const {
    return db_ && (sqlite3_errcode(db_) == SQLITE_FULL || sqlite3_system_errno(db_) == ENOSPC);
  }

 private:
  StoreFileLock lock_;  // one controller per store file (store_lock.h); released after db_ closes
  ino_t inode_ = 0;
  Status WriteBatch(const StoreBatch& b) {
    if (b.erase_all) {
      HANGAR_RETURN_IF_ERROR(
          Exec("DELETE FROM jobs; DELETE FROM specs; DELETE FROM nodes; DELETE FROM events; "
               "DELETE FROM audit; DELETE FROM kv; DELETE FROM history"));
    }
    for (const auto& key : b.erased_specs) {
      HANGAR_ASSIGN_OR_RETURN(sqlite3_stmt * q, Prepare("DELETE FROM specs WHERE key=?1"));
      BindText(q, 1, key);
      HANGAR_RETURN_IF_ERROR(StepDone(q));
    }
    if (!b.jobs.empty()) {
      HANGAR_RETURN_IF_ERROR(WriteSpecs(b.jobs));
      HANGAR_ASSIGN_OR_RETURN(
          sqlite3_stmt * q,
          Prepare("INSERT INTO jobs "
                  "(id,name,queue,user,state,spec_key,submitted_ms,started_ms,ended_ms,attempt,"
                  "restarts,reason,message,placement,extra) VALUES "
                  "(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,"
                  "?13,?14,?15) ON CONFLICT(id) DO UPDATE SET "
                  "name=?2,queue=?3,user=?4,state=?5,spec_key=?6,"
                  "submitted_ms=?7,started_ms=?8,ended_ms=?9,attempt=?10,restarts=?11,reason=?12,"
                  "message=?13,placement=?14,extra=?15"));
      for (const auto& j : b.jobs) {
        sqlite3_bind_int64(q, 1, static_cast<int64_t>(j.id));
        BindText(q, 2, j.name);
        BindText(q, 3, j.queue);
        BindText(q, 4, j.user);
        BindText(q, 5, j.state);
        BindText(q, 6, j.spec_key);
        sqlite3_bind_int64(q, 7, j.submitted);
        sqlite3_bind_int64(q, 8, j.started);
        sqlite3_bind_int64(q, 9, j.ended);
        sqlite3_bind_int64(q, 10, j.attempt);
        sqlite3_bind_int64(q, 11, j.restarts);
        BindText(q, 12, j.reason);
        BindText(q, 13, j.message);
        BindText(q, 14, j.placement_json);
        BindText(q, 15, j.extra_json);
        HANGAR_RETURN_IF_ERROR(StepDone(q));
      }
    }
    for (uint64_t id : b.erased_jobs) {
      HANGAR_ASSIGN_OR_RETURN(sqlite3_stmt * q, Prepare("DELETE FROM jobs WHERE id=?1"));
      sqlite3_bind_int64(q, 1, static_cast<int64_t>(id));
      HANGAR_RETURN_IF_ERROR(StepDone(q));
    }
    if (!b.nodes.empty()) {
      HANGAR_ASSIGN_OR_RETURN(sqlite3_stmt * q,
                              Prepare("INSERT INTO nodes (name,state) VALUES (?1,?2) ON "
                                      "CONFLICT(name) DO UPDATE SET state=?2"));
      for (const auto& n : b.nodes) {
        BindText(q, 1, n.name);
        BindText(q, 2, n.state_json);
        HANGAR_RETURN_IF_ERROR(StepDone(q));
      }
    }
    if (!b.events.empty()) {
      HANGAR_ASSIGN_OR_RETURN(
          sqlite3_stmt * q,
          Prepare("INSERT INTO events (time_ms,kind,subject,message) VALUES (?1,?2,?3,?4)"));
      for (const auto& e : b.events) {
        sqlite3_bind_int64(q, 1, e.time);
        BindText(q, 2, e.kind);
        BindText(q, 3, e.subject);
        BindText(q, 4, e.message);
        HANGAR_RETURN_IF_ERROR(StepDone(q));
      }
    }
    if (!b.audit.empty()) {
      HANGAR_ASSIGN_OR_RETURN(
          sqlite3_stmt * q,
          Prepare("INSERT INTO audit (time_ms,user,role,method,path,remote,status,message) VALUES "
                  "(?1,?2,?3,?4,?5,?6,?7,?8)"));
      for (const auto& a : b.audit) {
        sqlite3_bind_int64(q, 1, a.time);
        BindText(q, 2, a.user);
        BindText(q, 3, a.role);
        BindText(q, 4, a.method);
        BindText(q, 5, a.path);
        BindText(q, 6, a.remote);
        sqlite3_bind_int64(q, 7, a.status);
        BindText(q, 8, a.message);
        HANGAR_RETURN_IF_ERROR(StepDone(q));
      }
    }
    for (const auto& v : b.values) {
      HANGAR_ASSIGN_OR_RETURN(sqlite3_stmt * q,
                              Prepare(v.erase ? "DELETE FROM kv WHERE tbl=?1 AND key=?2"
                                              : "INSERT INTO kv (tbl,key,value) VALUES (?1,?2,?3) "
                                                "ON CONFLICT(tbl,key) DO UPDATE SET value=?3"));
      BindText(q, 1, v.table);
      BindText(q, 2, v.key);
      if (!v.erase) BindText(q, 3, v.value);
      HANGAR_RETURN_IF_ERROR(StepDone(q));
    }
    return WriteHistory(b);
  }

  // Each spec of the batch's jobs once: a key the store holds already is left as it is (the text
  // of a key never changes).
  Status WriteSpecs(const std::vector<JobRow>& jobs) {
    HANGAR_ASSIGN_OR_RETURN(
        sqlite3_stmt * q, Prepare("INSERT OR IGNORE INTO specs (key,user,text) VALUES (?1,?2,?3)"));
    std::unordered_set<std::string_view> done;
    for (const auto& j : jobs) {
      if (!j.spec)
        return Status::Internal("store: job " + std::to_string(j.id) + " has no spec to write");
      if (!done.insert(j.spec_key).second) continue;
      BindText(q, 1, j.spec_key);
      BindText(q, 2, j.user);
      sqlite3_bind_text(q, 3, j.spec->data(), static_cast<int>(j.spec->size()), SQLITE_STATIC);
      HANGAR_RETURN_IF_ERROR(StepDone(q));
    }
    return Status::Ok();
  }

  // The schema's versions after kSchema (PRAGMA user_version), applied in order at open; a store
  // newer than this binary is refused. Version 1: job specs stored once (a specs table keyed by
  // the SHA-256 of the text; jobs refer to it by spec_key) instead of one copy per job. Version 2:
  // the cluster's history (samples and hourly roll-ups, HistoryRow).
  static constexpr int kSchemaVersion = 2;
  Status Migrate() {
    HANGAR_ASSIGN_OR_RETURN(sqlite3_stmt * v, Prepare("PRAGMA user_version"));
    const int version = sqlite3_step(v) == SQLITE_ROW ? sqlite3_column_int(v, 0) : 0;
    sqlite3_reset(v);
    if (version > kSchemaVersion) {
      return Status::FailedPrecondition(
          "the store " + path_ + " has schema version " + std::to_string(version) +
          ", newer than this hangar knows (up to " + std::to_string(kSchemaVersion) +
          "); run the newer hangar that wrote it, or restore a backup into a new store");
    }
    if (version >= kSchemaVersion) return Status::Ok();
    HANGAR_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    Status s = version < 1 ? MigrateToSharedSpecs() : Status::Ok();
    if (s.ok()) {
      s = Exec(
          "CREATE TABLE history (hourly INTEGER NOT NULL, time_ms INTEGER NOT NULL, step_ms "
          "INTEGER NOT NULL, "
          "gpus REAL NOT NULL, allocated REAL NOT NULL, busy REAL NOT NULL, idle REAL NOT NULL, "
          "pending REAL NOT NULL, running REAL NOT NULL, PRIMARY KEY (hourly, time_ms)); "
          "PRAGMA user_version = 2");
    }
    if (!s.ok()) {
      (void)Exec("ROLLBACK");
      return Status(s.code(), "the store " + path_ +
                                  " could not be upgraded to this hangar's schema: " + s.message());
    }
    return Exec("COMMIT");
  }

  // History samples, then the upkeep (HistoryUpkeep): the roll-up keeps an hour already rolled up.
  Status WriteHistory(const StoreBatch& b) {
    if (!b.history.empty()) {
      HANGAR_ASSIGN_OR_RETURN(
          sqlite3_stmt * q,
          Prepare("INSERT INTO history "
                  "(hourly,time_ms,step_ms,gpus,allocated,busy,idle,pending,running) VALUES "
                  "(?1,?2,?3,?4,?5,?6,?7,?8,?9) ON CONFLICT(hourly,time_ms) DO UPDATE SET "
                  "step_ms=?3,gpus=?4,"
                  "allocated=?5,busy=?6,idle=?7,pending=?8,running=?9"));
      for (const auto& h : b.history) {
        sqlite3_bind_int(q, 1, h.step == kHistoryHour ? 1 : 0);
        sqlite3_bind_int64(q, 2, h.time);
        sqlite3_bind_int64(q, 3, h.step);
        const double values[] = {h.gpus, h.allocated, h.busy, h.idle, h.pending, h.running};
        for (int i = 0; i < 6; ++i) sqlite3_bind_double(q, 4 + i, values[i]);
        HANGAR_RETURN_IF_ERROR(StepDone(q));
      }
    }
    const HistoryUpkeep& u = b.history_upkeep;
    if (u.empty()) return Status::Ok();
    HANGAR_ASSIGN_OR_RETURN(
        sqlite3_stmt * q,
        Prepare(
            "INSERT INTO history (hourly,time_ms,step_ms,gpus,allocated,busy,idle,pending,running) "
            "SELECT 1, time_ms / 3600000 * 3600000 AS hour, 3600000, avg(gpus), avg(allocated), "
            "avg(busy), avg(idle), "
            "avg(pending), avg(running) FROM history WHERE hourly = 0 AND time_ms < ?1 / 3600000 * "
            "3600000 "
            "GROUP BY hour ON CONFLICT(hourly,time_ms) DO NOTHING"));
    sqlite3_bind_int64(q, 1, u.roll_up_before);
    HANGAR_RETURN_IF_ERROR(StepDone(q));
    HANGAR_ASSIGN_OR_RETURN(sqlite3_stmt * d,
                            Prepare("DELETE FROM history WHERE (hourly = 0 AND time_ms < ?1) OR "
                                    "(hourly = 1 AND time_ms < ?2)"));
    sqlite3_bind_int64(d, 1, u.drop_samples_before);
    sqlite3_bind_int64(d, 2, u.drop_hourly_before);
    return StepDone(d);
  }

  Status MigrateToSharedSpecs() {
    HANGAR_RETURN_IF_ERROR(
        Exec("CREATE TABLE specs (key TEXT PRIMARY KEY, user TEXT NOT NULL, text TEXT NOT NULL);"
             "ALTER TABLE jobs ADD COLUMN spec_key TEXT NOT NULL DEFAULT ''"));
    std::vector<std::pair<int64_t, std::string>> keys;  // job id, its spec's key
    {
      HANGAR_ASSIGN_OR_RETURN(sqlite3_stmt * q, Prepare("SELECT id,user,spec FROM jobs"));
      HANGAR_ASSIGN_OR_RETURN(
          sqlite3_stmt * ins,
          Prepare("INSERT OR IGNORE INTO specs (key,user,text) VALUES (?1,?2,?3)"));
      int rc = SQLITE_ROW;
      while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const std::string text = Text(q, 2);
        keys.emplace_back(sqlite3_column_int64(q, 0), SpecKey(text));
        BindText(ins, 1, keys.back().second);
        BindText(ins, 2, Text(q, 1));
        BindText(ins, 3, text);
        if (Status st = StepDone(ins); !st.ok()) {
          sqlite3_reset(q);
          return st;
        }
      }
      sqlite3_reset(q);
      if (rc != SQLITE_DONE) return Status::Unavailable("store read failed: " + Error());
    }
    HANGAR_ASSIGN_OR_RETURN(sqlite3_stmt * set, Prepare("UPDATE jobs SET spec_key=?2 WHERE id=?1"));
    for (const auto& [id, key] : keys) {
      sqlite3_bind_int64(set, 1, id);
      BindText(set, 2, key);
      HANGAR_RETURN_IF_ERROR(StepDone(set));
    }
    // Statements prepared on the old layout would not survive the column's removal.
    stmts_.clear();
    return Exec("ALTER TABLE jobs DROP COLUMN spec; PRAGMA user_version = 1");
  }

  StatusOr<sqlite3_stmt*> Prepare(const char* sql) {
    for (auto& [text, stmt] : stmts_) {
      if (text == sql) return stmt.get();
    }
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &s, nullptr) != SQLITE_OK) {
      return Status::Internal("store: cannot prepare a statement: " + Error());
    }
    stmts_.emplace_back(sql, Stmt(s));
    return s;
  }

  Status StepDone(sqlite3_stmt* q) {
    int rc = sqlite3_step(q);
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    if (rc != SQLITE_DONE) return Status::Unavailable("store write failed: " + Error());
    return Status::Ok();
  }

  Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string m = err ? err : "unknown error";
      sqlite3_free(err);
      return Status::Unavailable("store " + path_ + ": " + m);
    }
    return Status::Ok();
  }

  static void BindText(sqlite3_stmt* q, int i, const std::string& s) {
    sqlite3_bind_text(q, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  static std::string Text(sqlite3_stmt* q, int i) {
    const unsigned char* t = sqlite3_column_text(q, i);
    return t ? std::string(reinterpret_cast<const char*>(t),
                           static_cast<size_t>(sqlite3_column_bytes(q, i)))
             : "";
  }
  std::string Error() const { return db_ ? sqlite3_errmsg(db_) : "out of memory"; }
  // A scan that stopped before its end (a damaged page) is an error, never a shorter answer.
  Status Finish(sqlite3_stmt* q, int rc, const char* what) {
    const std::string why = rc == SQLITE_DONE ? std::string() : Error();
    sqlite3_reset(q);
    if (rc == SQLITE_DONE) return Status::Ok();
    return Status::FailedPrecondition("the store " + path_ +
                                      " could not be read to the end of its " + what + " (" + why +
                                      "); " + RestoreAdvice(Describe()));
  }

  // Checkpoints off the commit path. SQLite's automatic checkpoint runs inside the COMMIT that
  // takes the WAL past 1,000 pages: it copies the WAL into the database and syncs it, and that
  // commit (and everything the state thread does after it) waited 30-130 ms for it, every few
  // seconds at 100 submissions/s (the tail of submit-to-started; docs/benchmarks.md). Here a
  // thread of the store's own, on a connection of its own, checkpoints PASSIVE (it never blocks
  // a commit) when the WAL passes 1,000 pages and once a second otherwise; a commit checkpoints
  // itself only if the WAL passes 64 MiB, should that thread fall behind.
  static constexpr int kWakePages = 1000, kInlinePages = 16384;
  static int OnWalCommit(void* self, sqlite3* db, const char*, int pages) {
    auto* store = static_cast<SqliteStore*>(self);
    if (pages >= kInlinePages) {
      sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    } else if (pages >= kWakePages) {
      MutexLock l(store->ck_mu_);
      store->ck_wake_ = true;
      store->ck_cv_.notify_one();
    }
    return SQLITE_OK;
  }
  void StartCheckpointer() {
    if (sqlite3_open_v2(path_.c_str(), &ck_db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK) {
      if (ck_db_) sqlite3_close(ck_db_);
      ck_db_ = nullptr;
      return;  // the commits checkpoint themselves, as SQLite does by default
    }
    sqlite3_busy_timeout(ck_db_, 1000);
    // A connection learns that the database is in WAL mode when it first reads it; until then a
    // checkpoint on it does nothing.
    if (sqlite3_exec(ck_db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr) != SQLITE_OK) {
      sqlite3_close(ck_db_);
      ck_db_ = nullptr;
      return;
    }
    sqlite3_wal_hook(db_, &SqliteStore::OnWalCommit, this);
    checkpointer_ = std::thread([this] {
      MutexLock l(ck_mu_);
      while (!ck_stop_) {
        l.WaitFor(ck_cv_, std::chrono::seconds(1),
                  [&]() HANGAR_REQUIRES(ck_mu_) { return ck_stop_ || ck_wake_; });
        if (ck_stop_) break;
        ck_wake_ = false;
        l.Unlock();
        sqlite3_wal_checkpoint_v2(ck_db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
        l.Lock();
      }
    });
  }
  void StopCheckpointer() HANGAR_EXCLUDES(ck_mu_) {
    if (checkpointer_.joinable()) {
      {
        MutexLock l(ck_mu_);
        ck_stop_ = true;
        ck_cv_.notify_one();
      }
      checkpointer_.join();
    }
    if (db_) sqlite3_wal_hook(db_, nullptr, nullptr);
    if (ck_db_) sqlite3_close(ck_db_);
    ck_db_ = nullptr;
  }

  sqlite3* db_ = nullptr;
  std::string path_;
  std::vector<std::pair<const char*, Stmt>> stmts_;
  sqlite3* ck_db_ = nullptr;
  std::thread checkpointer_;
  Mutex ck_mu_;
  std::condition_variable ck_cv_;
  bool ck_stop_ HANGAR_GUARDED_BY(ck_mu_) = false, ck_wake_ HANGAR_GUARDED_BY(ck_mu_) = false;
};

}  // namespace

StatusOr<std::unique_ptr<StateStore>> OpenSqliteStore(const std::string& path) {
  auto s = std::make_unique<SqliteStore>();
  if (Status opened = s->Open(path); !opened.ok())
    return s->DiskFull() ? StoreDiskFull(path) : opened;
  return std::unique_ptr<StateStore>(std::move(s));
}

}  // namespace hangar::controller
