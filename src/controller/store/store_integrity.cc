#include "controller/store/store_integrity.h"

#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sstream>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "controller/store/store_disk.h"
#include "controller/store/store_lock.h"

namespace hangar::controller {
namespace {

std::atomic<int64_t> g_integrity_failures{0};

int64_t FileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

// "20261206T013000Z": when a damaged file was moved aside.
std::string Stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

// Moves a damaged or empty store file (and its -wal and -shm) aside, once no controller holds it.
Status MoveAside(const std::string& path, const Status& why) {
  HANGAR_ASSIGN_OR_RETURN(StoreFileLock lock, StoreFileLock::Take(path));
  const std::string aside = path + ".damaged-" + Stamp();
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string from = path + suffix, to = aside + suffix;
    if (FileSize(from) < 0) continue;
    if (std::rename(from.c_str(), to.c_str()) != 0) {
      return Status::Unavailable("cannot move " + from + " aside to " + to + ": " +
                                 std::strerror(errno));
    }
  }
  spdlog::warn("{} -- it was moved to {}, and a new, empty store begins at {}", why.message(),
               aside, path);
  return Status::Ok();
}

}  // namespace

std::string RestoreAdvice(const std::string& url) {
  const std::string restore = "restore it from your latest backup with `hangar restore --store " +
                              url + " --in BACKUP.jsonl --force`";
  if (url.rfind("sqlite://", 0) != 0) return restore + " (docs/ha.md)";
  return restore +
         ", or start the controller once with --store-new to begin again on an empty store "
         "(docs/ha.md)";
}

Status CheckSqliteFile(const std::string& path, bool thorough) {
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  struct Closer {
    sqlite3* db;
    ~Closer() { sqlite3_close(db); }
  } closer{db};
  auto damaged = [&](const std::string& what) {
    return Status::FailedPrecondition(
        "the store " + path + " is damaged (" + what +
        "); a controller does not start on a damaged store, since it would not "
        "know the work that runs: " +
        RestoreAdvice("sqlite://" + path));
  };
  // Only SQLite's own verdict is damage: a file it cannot read for want of room, memory or access
  // is not damaged, and is not to be moved aside or replaced.
  auto failed = [&](const char* doing) {
    const int code = db ? sqlite3_errcode(db) : SQLITE_NOMEM;
    const std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB)
      return damaged(std::string("SQLite cannot read it: ") + why);
    if (code == SQLITE_FULL || (db && sqlite3_system_errno(db) == ENOSPC))
      return StoreDiskFull(path);
    return Status::Unavailable("cannot " + std::string(doing) + " the store " + path +
                               " to check it: " + why);
  };
  if (rc != SQLITE_OK) return failed("open");
  // This connection only reads: it leaves checkpoints to the store's owner.
  sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* q = nullptr;
  const char* sql = thorough ? "PRAGMA integrity_check(4)" : "PRAGMA quick_check(4)";
  if (sqlite3_prepare_v2(db, sql, -1, &q, nullptr) != SQLITE_OK) return failed("read");
  std::vector<std::string> found;
  int step;
  while ((step = sqlite3_step(q)) == SQLITE_ROW) {
    const unsigned char* t = sqlite3_column_text(q, 0);
    found.emplace_back(t ? reinterpret_cast<const char*>(t) : "");
  }
  if (step != SQLITE_DONE) {
    Status s = failed("read");
    sqlite3_finalize(q);
    return s;
  }
  sqlite3_finalize(q);
  if (found.size() == 1 && found[0] == "ok") return Status::Ok();
  // One line of the log and the error: SQLite's rows may hold several lines, and a heading.
  std::string problems;
  for (const std::string& row : found) {
    std::istringstream lines(row);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty() || line.rfind("*** in database", 0) == 0) continue;
      problems += (problems.empty() ? "" : "; ") + line;
    }
  }
  return damaged(std::string("SQLite's ") + (thorough ? "integrity_check" : "quick_check") +
                 " found: " + problems);
}

Status CheckSqliteFileAtOpen(const std::string& path, bool start_new) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();  // a new store
    return Status::Unavailable("cannot read the store " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return Status::Ok();  // opening it says what it is
  Status problem;
  {
    // Checked under the store's lock: a file another controller holds is refused as in use, not
    // read (through a hard link, SQLite would even take another WAL file for it).
    HANGAR_ASSIGN_OR_RETURN(StoreFileLock lock, StoreFileLock::Take(path));
    // A store's file has its header from its first moment (WAL mode is set in it); 0 bytes and no
    // WAL is a file that lost its contents, or never was a store.
    if (st.st_size == 0 && FileSize(path + "-wal") <= 0) {
      problem = Status::FailedPrecondition(
          "the store " + path +
          " exists but is empty (0 bytes): it holds none of the cluster's jobs, and "
          "a controller does not start on it as if it were a new store: " +
          RestoreAdvice("sqlite://" + path));
    } else {
      problem = CheckSqliteFile(path, /*thorough=*/true);
    }
  }
  if (problem.ok() || !start_new || problem.code() != StatusCode::kFailedPrecondition)
    return problem;
  return MoveAside(path, problem);
}

int64_t StoreIntegrityFailures() { return g_integrity_failures.load(); }

namespace {

// Job rows a batch erases: the store's retention may purge finished jobs (StoreBatch::erased_jobs,
// where the store has it); none otherwise.
template <typename Batch>
uint64_t ErasedJobs(const Batch& b) {
  if constexpr (requires { b.erased_jobs; }) {
    return b.erased_jobs.size();
  } else {
    return 0;
  }
}

// The high-water record: how many job rows the store holds, the highest job id it ever gave, and
// whether it held node rows. Job rows go only by a purge that the record counts (or a restore's
// erase_all, which starts it again), so a store holding fewer rows than its record lost them.
struct HighWater {
  uint64_t jobs = 0;
  uint64_t last_job_id = 0;
  bool nodes = false;
  bool operator==(const HighWater&) const = default;
  static HighWater Of(const StoreContents& c) {
    HighWater h;
    h.jobs = c.jobs.size();
    for (const auto& j : c.jobs) h.last_job_id = std::max(h.last_job_id, j.id);
    h.nodes = !c.nodes.empty();
    return h;
  }
  // Job ids are given in ascending order: a row above the highest id is a new one.
  HighWater With(const StoreBatch& b) const {
    HighWater h = *this;
    uint64_t top = last_job_id;
    for (const auto& j : b.jobs) {
      if (j.id > top) {
        top = j.id;
        h.jobs++;
      }
    }
    const uint64_t erased = ErasedJobs(b);
    h.jobs = h.jobs > erased ? h.jobs - erased : 0;
    h.last_job_id = top;
    h.nodes = h.nodes || !b.nodes.empty();
    return h;
  }
  bool Covers(const HighWater& record) const {
    return jobs >= record.jobs && (nodes || !record.nodes);
  }
  std::string Value() const {
    return "{\"jobs\":" + std::to_string(jobs) + ",\"last_job_id\":" + std::to_string(last_job_id) +
           ",\"nodes\":" + (nodes ? "true" : "false") + "}";
  }
  static HighWater Parse(const std::string& v) {
    HighWater h;
    unsigned long long jobs = 0, id = 0;
    if (std::sscanf(v.c_str(), "{\"jobs\":%llu,\"last_job_id\":%llu", &jobs, &id) == 2) {
      h.jobs = jobs;
      h.last_job_id = id;
    }
    h.nodes = v.find("\"nodes\":true") != std::string::npos;
    return h;
  }
};

constexpr const char* kTable = "meta";
constexpr const char* kKey = "high_water";

bool IsRecord(const KeyValueRow& v) { return v.table == kTable && v.key == kKey; }

// Takes the record's row out of `values`; `found` says whether there was one.
HighWater TakeRecord(std::vector<KeyValueRow>* values, bool* found) {
  HighWater h;
  *found = false;
  for (auto it = values->begin(); it != values->end(); ++it) {
    if (!IsRecord(*it)) continue;
    if (!it->erase) h = HighWater::Parse(it->value);
    *found = !it->erase;
    values->erase(it);
    break;
  }
  return h;
}

class CheckedStore final : public StateStore {
 public:
  CheckedStore(std::unique_ptr<StateStore> inner, const StoreOpenOptions& options,
               std::string sqlite_path)
      : inner_(std::move(inner)), options_(options), path_(std::move(sqlite_path)) {
    if (!path_.empty() && options_.integrity_every > 0) watch_ = std::thread([this] { Watch(); });
  }
  ~CheckedStore() override {
    {
      MutexLock l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (watch_.joinable()) watch_.join();
  }

  Status Commit(const StoreBatch& b) override HANGAR_EXCLUDES(mu_) {
    if (damaged_) {
      MutexLock l(mu_);
      return damage_;
    }
    if (!loaded_ && (!b.jobs.empty() || !b.nodes.empty())) {
      HANGAR_RETURN_IF_ERROR(Load().status());
    }
    const HighWater base = b.erase_all ? HighWater{} : record_;
    const HighWater next = base.With(b);
    if (next == record_ && !b.erase_all && !unwritten_) return inner_->Commit(b);
    if (b.empty()) return Status::Ok();
    StoreBatch with = b;  // the record goes in the same transaction as the rows it counts
    with.values.push_back({kTable, kKey, next.Value(), false});
    HANGAR_RETURN_IF_ERROR(inner_->Commit(with));
    record_ = next;
    unwritten_ = false;
    return Status::Ok();
  }

  StatusOr<StoreContents> Load() override {
    HANGAR_ASSIGN_OR_RETURN(StoreContents c, inner_->Load());
    bool found = false;
    const HighWater record = TakeRecord(&c.values, &found);
    const HighWater have = HighWater::Of(c);
    loaded_ = true;
    if (have.Covers(record)) {
      record_ = found ? HighWater{have.jobs, std::max(have.last_job_id, record.last_job_id),
                                  have.nodes || record.nodes}
                      : have;
      // A store from before the record: it goes in with the next commit.
      unwritten_ = !found && !(have == HighWater{});
      return c;
    }
    const Status short_of = ShortOf(record, have);
    if (options_.check && !options_.start_new) return short_of;
    if (options_.start_new) {
      spdlog::warn("--store-new: {}; going on with what it holds", short_of.message());
      StoreBatch reset;
      reset.values.push_back({kTable, kKey, have.Value(), false});
      HANGAR_RETURN_IF_ERROR(inner_->Commit(reset));
    }
    record_ = have;
    return c;
  }

  StatusOr<StoreChanges> ChangesSince(int64_t since) override {
    HANGAR_ASSIGN_OR_RETURN(StoreChanges c, inner_->ChangesSince(since));
    bool found = false;
    const HighWater record = TakeRecord(&c.values, &found);
    if (found && loaded_) record_ = record;  // the leader's, as of these changes
    return c;
  }
  StatusOr<std::vector<EventRow>> Events(const std::string& prefix, int limit) override {
    return inner_->Events(prefix, limit);
  }
  StatusOr<std::vector<AuditRow>> Audit(const std::string& user, int limit) override {
    return inner_->Audit(user, limit);
  }
  StatusOr<std::vector<HistoryRow>> History(bool hourly, Time since) override {
    return inner_->History(hourly, since);
  }
  std::string Describe() const override { return inner_->Describe(); }
  StatusOr<int64_t> AcquireLease(const std::string& holder, Duration ttl) override {
    return inner_->AcquireLease(holder, ttl);
  }
  Status RenewLease(Duration ttl) override { return inner_->RenewLease(ttl); }
  StatusOr<LeaseRow> ReadLease() override { return inner_->ReadLease(); }
  Status AdoptLease(int64_t epoch) override { return inner_->AdoptLease(epoch); }

 private:
  Status ShortOf(const HighWater& record, const HighWater& have) const {
    const std::string url = ShownStoreUrl(inner_->Describe());
    std::string what;
    if (have.jobs < record.jobs) {
      what = (have.jobs == 0 ? std::string("holds no jobs")
                             : "holds " + std::to_string(have.jobs) + " jobs") +
             ", but it should hold " + std::to_string(record.jobs) + " (its job ids went up to " +
             std::to_string(record.last_job_id) + ")";
    } else {
      what = "holds no nodes, but it has held some";
    }
    return Status::FailedPrecondition(
        "the store " + url + " is unexpectedly empty: it " + what +
        ": its rows were deleted or lost (a damaged page, an emptied table); a "
        "controller does not start on it, since it would not know the work that runs: " +
        RestoreAdvice(url));
  }

  // The scheduled check: once the file fails it, every commit is refused with its sentence.
  void Watch() HANGAR_EXCLUDES(mu_) {
    MutexLock l(mu_);
    while (!stop_) {
      l.WaitFor(cv_, std::chrono::milliseconds(options_.integrity_every),
                [&]() HANGAR_REQUIRES(mu_) { return stop_; });
      if (stop_) return;
      l.Unlock();
      const Status s = CheckSqliteFile(path_, /*thorough=*/false);
      l.Lock();
      if (s.ok()) continue;
      if (s.code() != StatusCode::kFailedPrecondition) {  // not damage: could not check this time
        spdlog::warn("the scheduled integrity check of the store did not run: {}", s.message());
        continue;
      }
      damage_ = Status::FailedPrecondition(
          "the store " + path_ +
          " failed its scheduled integrity check, so the controller writes nothing more to it: " +
          s.message());
      damaged_ = true;
      g_integrity_failures++;
      spdlog::critical("{}", damage_.message());
      return;
    }
  }

  std::unique_ptr<StateStore> inner_;
  const StoreOpenOptions options_;
  const std::string path_;
  // Commit's and Load's (the store's one caller at a time).
  HighWater record_;
  bool loaded_ = false;
  bool unwritten_ = false;  // the store holds rows but no record yet
  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ HANGAR_GUARDED_BY(mu_) = false;
  Status damage_ HANGAR_GUARDED_BY(mu_);
  std::atomic<bool> damaged_{false};
  std::thread watch_;
};

}  // namespace

std::unique_ptr<StateStore> WithIntegrityChecks(std::unique_ptr<StateStore> inner,
                                                const StoreOpenOptions& options,
                                                const std::string& sqlite_path) {
  return std::make_unique<CheckedStore>(std::move(inner), options, sqlite_path);
}

}  // namespace hangar::controller
