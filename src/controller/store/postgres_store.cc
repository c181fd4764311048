// The PostgreSQL store: the SQLite store's contract on a server that several
// controllers can share. A commit is one transaction sent in one round trip (libpq pipeline mode;
// one statement per table, its rows as one array per column unpacked by unnest), with
// synchronous_commit on: when Commit returns OK the batch is on the server's disk.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "controller/store/postgres_arrays.h"
#include "controller/store/postgres_conn.h"
#include "controller/store/postgres_schema.h"
#include "controller/store/state_store.h"

namespace hangar::controller {
namespace {

constexpr const char* kUpsertJobs = R"sql(
INSERT INTO jobs (id,name,queue,user_name,state,spec_key,submitted_ms,started_ms,ended_ms,attempt,restarts,
                  reason,message,placement,extra)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
  $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::text[], $13::text[],
  $14::text[], $15::text[])
ON CONFLICT (id) DO UPDATE SET name=EXCLUDED.name, queue=EXCLUDED.queue, user_name=EXCLUDED.user_name,
  state=EXCLUDED.state, spec_key=EXCLUDED.spec_key, submitted_ms=EXCLUDED.submitted_ms,
  started_ms=EXCLUDED.started_ms, ended_ms=EXCLUDED.ended_ms, attempt=EXCLUDED.attempt,
  restarts=EXCLUDED.restarts, reason=EXCLUDED.reason, message=EXCLUDED.message,
  placement=EXCLUDED.placement, extra=EXCLUDED.extra)sql";

// A spec's text never changes under its key: one already stored is left as it is.
constexpr const char* kInsertSpecs = R"sql(
INSERT INTO specs (key,user_name,text) SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
ON CONFLICT (key) DO NOTHING)sql";

constexpr const char* kEraseSpecs = R"sql(DELETE FROM specs WHERE key = ANY($1::text[]))sql";
constexpr const char* kEraseJobs = R"sql(DELETE FROM jobs WHERE id = ANY($1::bigint[]))sql";

constexpr const char* kUpsertNodes = R"sql(
INSERT INTO nodes (name,state) SELECT * FROM unnest($1::text[], $2::text[])
ON CONFLICT (name) DO UPDATE SET state=EXCLUDED.state)sql";

constexpr const char* kUpsertValues = R"sql(
INSERT INTO kv (tbl,key,value) SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
ON CONFLICT (tbl,key) DO UPDATE SET value=EXCLUDED.value)sql";

constexpr const char* kEraseValues = R"sql(
DELETE FROM kv USING unnest($1::text[], $2::text[]) AS x(tbl, key) WHERE kv.tbl = x.tbl AND kv.key = x.key)sql";

// Ids follow the batch's order (WITH ORDINALITY), as SQLite's AUTOINCREMENT does.
constexpr const char* kInsertEvents = R"sql(
INSERT INTO events (time_ms,kind,subject,message)
SELECT t,k,s,m FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS x(t,k,s,m,n)
ORDER BY n)sql";

constexpr const char* kInsertAudit = R"sql(
INSERT INTO audit (time_ms,user_name,role,method,path,remote,status,message)
SELECT t,u,r,me,p,re,st,msg FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[],
  $6::text[], $7::bigint[], $8::text[]) WITH ORDINALITY AS x(t,u,r,me,p,re,st,msg,n) ORDER BY n)sql";

constexpr const char* kInsertHistory = R"sql(
INSERT INTO history (hourly,time_ms,step_ms,gpus,allocated,busy,idle,pending,running)
SELECT * FROM unnest($1::boolean[], $2::bigint[], $3::bigint[], $4::float8[], $5::float8[], $6::float8[],
  $7::float8[], $8::float8[], $9::float8[])
ON CONFLICT (hourly,time_ms) DO UPDATE SET step_ms=EXCLUDED.step_ms, gpus=EXCLUDED.gpus,
  allocated=EXCLUDED.allocated, busy=EXCLUDED.busy, idle=EXCLUDED.idle, pending=EXCLUDED.pending,
  running=EXCLUDED.running)sql";

// HistoryUpkeep: an hour rolled up already is kept as it is.
constexpr const char* kRollUpHistory = R"sql(
INSERT INTO history (hourly,time_ms,step_ms,gpus,allocated,busy,idle,pending,running)
SELECT true, time_ms / 3600000 * 3600000 AS hour, 3600000, avg(gpus), avg(allocated), avg(busy), avg(idle),
  avg(pending), avg(running)
FROM history WHERE NOT hourly AND time_ms < $1::bigint / 3600000 * 3600000 GROUP BY hour
ON CONFLICT (hourly,time_ms) DO NOTHING)sql";
constexpr const char* kDropHistory = R"sql(
DELETE FROM history WHERE (NOT hourly AND time_ms < $1::bigint) OR (hourly AND time_ms < $2::bigint))sql";

constexpr const char* kLogChanges = R"sql(
INSERT INTO changes (reset, job_ids, node_names, kv_tbls, kv_keys)
VALUES ($1::boolean, $2::bigint[], $3::text[], $4::text[], $5::text[]))sql";

// The change log keeps this many commits: a standby polls several times a second, so one that
// falls further behind has been away and loads everything again.
constexpr int kChangesKept = 10000;
constexpr uint64_t kPruneEvery = 256;  // commits of this store between two prunings
constexpr const char* kPruneChanges = R"sql(
DELETE FROM changes WHERE rev < (SELECT max(rev) FROM changes) - $1::bigint)sql";

constexpr const char* kJobColumns =
    "id,name,queue,user_name,state,spec_key,submitted_ms,started_ms,ended_ms,attempt,restarts,"
    "reason,message,"
    "placement,extra";

// Since $1: the log's oldest and newest revisions and whether a commit since emptied the store.
constexpr const char* kChangesHead = R"sql(
SELECT (SELECT min(rev) FROM changes), (SELECT max(rev) FROM changes),
  (SELECT coalesce(bool_or(reset), false) FROM changes WHERE rev > $1::bigint))sql";

// Takes the lease when there is none or it has expired (on the server's clock), with the next
// epoch.
constexpr const char* kAcquireLease = R"sql(
INSERT INTO lease (id, holder, epoch, acquired_at, expires_at)
VALUES (1, $1, 1, clock_timestamp(), clock_timestamp() + $2::double precision * interval '1 millisecond')
ON CONFLICT (id) DO UPDATE SET holder = EXCLUDED.holder, epoch = lease.epoch + 1,
  acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at
WHERE lease.expires_at < clock_timestamp()
RETURNING epoch)sql";

constexpr const char* kRenewLease = R"sql(
UPDATE lease SET expires_at = clock_timestamp() + $2::double precision * interval '1 millisecond'
WHERE id = 1 AND epoch = $1 AND expires_at >= clock_timestamp() RETURNING epoch)sql";

constexpr const char* kReadLease = R"sql(
SELECT holder, epoch, greatest(0, (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint)
FROM lease WHERE id = 1)sql";

constexpr const char* kReadLeaseRow = R"sql(
SELECT holder, epoch, greatest(0, (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint),
  (extract(epoch FROM acquired_at) * 1000)::bigint
FROM lease WHERE id = 1)sql";

void AddJob(const JobRow& j, pg::ArrayParams* a) {
  a->Int(0, static_cast<int64_t>(j.id));
  a->Text(1, j.name);
  a->Text(2, j.queue);
  a->Text(3, j.user);
  a->Text(4, j.state);
  a->Text(5, j.spec_key);
  a->Int(6, j.submitted);
  a->Int(7, j.started);
  a->Int(8, j.ended);
  a->Int(9, j.attempt);
  a->Int(10, j.restarts);
  a->Text(11, j.reason);
  a->Text(12, j.message);
  a->Text(13, j.placement_json);
  a->Text(14, j.extra_json);
}

void AddAudit(const AuditRow& r, pg::ArrayParams* a) {
  a->Int(0, r.time);
  a->Text(1, r.user);
  a->Text(2, r.role);
  a->Text(3, r.method);
  a->Text(4, r.path);
  a->Text(5, r.remote);
  a->Int(6, r.status);
  a->Text(7, r.message);
}

class PostgresStore final : public StateStore {
 public:
  Status Open(const std::string& url) {
    HANGAR_RETURN_IF_ERROR(conn_.Connect(url));
    // Durable on return is the contract, whatever the server's default says.
    HANGAR_RETURN_IF_ERROR(conn_.Exec("SET synchronous_commit = on").status());
    return pg::Migrate(conn_);
  }

  Status Commit(const StoreBatch& b) override {
    if (b.empty()) return Status::Ok();
    std::vector<Statement> statements;
    // A leader's commit first passes the fence, in the same transaction (migration 2).
    if (epoch_ > 0)
      statements.push_back({"SELECT hangar_check_epoch($1)", {std::to_string(epoch_)}});
    std::vector<std::string> new_specs;
    AppendStatements(b, &statements, &new_specs);
    if (++commits_ % kPruneEvery == 0)
      statements.push_back({kPruneChanges, {std::to_string(kChangesKept)}});
    HANGAR_RETURN_IF_ERROR(conn_.ExecInTransaction(statements));
    if (b.erase_all) stored_specs_.clear();
    for (const auto& key : b.erased_specs) stored_specs_.erase(key);
    for (auto& key : new_specs) stored_specs_.insert(std::move(key));
    return Status::Ok();
  }

  StatusOr<StoreChanges> ChangesSince(int64_t since) override {
    HANGAR_RETURN_IF_ERROR(conn_.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").status());
    auto c = ChangesInTransaction(since);
    (void)conn_.Exec(c.ok() ? "COMMIT" : "ROLLBACK");
    return c;
  }

  StatusOr<int64_t> AcquireLease(const std::string& holder, Duration ttl) override {
    if (holder.empty() || ttl <= 0)
      return Status::InvalidArgument("a lease needs a holder's name and a positive ttl");
    HANGAR_ASSIGN_OR_RETURN(pg::Result r, conn_.Exec(kAcquireLease, {holder, std::to_string(ttl)}));
    if (PQntuples(r.get()) == 1) {
      epoch_ = pg::Int(r.get(), 0, 0);
      return epoch_;
    }
    HANGAR_ASSIGN_OR_RETURN(pg::Result held, conn_.Exec(kReadLease));
    if (PQntuples(held.get()) != 1)
      return Status::Unavailable("store " + conn_.shown() + ": the lease row vanished");
    return Status::FailedPrecondition(
        "the store " + conn_.shown() + " is led by " + pg::Text(held.get(), 0, 0) + " (epoch " +
        pg::Text(held.get(), 0, 1) + ") for " + pg::Text(held.get(), 0, 2) +
        " ms more unless it renews; stand by");
  }

  Status RenewLease(Duration ttl) override {
    if (epoch_ == 0)
      return Status::FailedPrecondition("this store holds no lease to renew; acquire it first");
    if (ttl <= 0) return Status::InvalidArgument("a lease needs a positive ttl");
    HANGAR_ASSIGN_OR_RETURN(pg::Result r,
                            conn_.Exec(kRenewLease, {std::to_string(epoch_), std::to_string(ttl)}));
    if (PQntuples(r.get()) == 1) return Status::Ok();
    HANGAR_ASSIGN_OR_RETURN(pg::Result now, conn_.Exec(kReadLease));
    const bool same = PQntuples(now.get()) == 1 && pg::Int(now.get(), 0, 1) == epoch_;
    return Status::Aborted("store " + conn_.shown() + ": this controller's lease (epoch " +
                           std::to_string(epoch_) + ") " +
                           (same ? std::string("expired before it was renewed")
                                 : "was taken over by " + pg::Text(now.get(), 0, 0) + " at epoch " +
                                       pg::Text(now.get(), 0, 1)) +
                           "; this controller must stop acting");
  }

  StatusOr<LeaseRow> ReadLease() override {
    HANGAR_ASSIGN_OR_RETURN(pg::Result r, conn_.Exec(kReadLeaseRow));
    LeaseRow row;
    if (PQntuples(r.get()) != 1) return row;
    row.holder = pg::Text(r.get(), 0, 0);
    row.epoch = pg::Int(r.get(), 0, 1);
    row.left = pg::Int(r.get(), 0, 2);
    row.acquired = pg::Int(r.get(), 0, 3);
    return row;
  }

  Status AdoptLease(int64_t epoch) override {
    if (epoch <= 0) return Status::InvalidArgument("a lease epoch is a positive number");
    epoch_ = epoch;
    return Status::Ok();
  }

  StatusOr<StoreContents> Load() override {
    // One snapshot for the three tables, even while another store writes to the database.
    HANGAR_RETURN_IF_ERROR(conn_.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").status());
    auto c = LoadInTransaction();
    (void)conn_.Exec(c.ok() ? "COMMIT" : "ROLLBACK");
    return c;
  }

  StatusOr<std::vector<EventRow>> Events(const std::string& prefix, int limit) override {
    // The range lets the planner use events_subject; starts_with is the exact test.
    HANGAR_ASSIGN_OR_RETURN(pg::Result r,
                            conn_.Exec("SELECT id,time_ms,kind,subject,message FROM events WHERE "
                                       "$1 = '' OR (subject COLLATE \"C\" >= $1 AND "
                                       "subject COLLATE \"C\" < $1 || chr(1114111) AND "
                                       "starts_with(subject, $1)) ORDER BY id DESC LIMIT $2",
                                       {prefix, std::to_string(limit)}));
    std::vector<EventRow> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      out.push_back({pg::Int(r.get(), i, 0), pg::Int(r.get(), i, 1), pg::Text(r.get(), i, 2),
                     pg::Text(r.get(), i, 3), pg::Text(r.get(), i, 4)});
    }
    return out;
  }

  StatusOr<std::vector<AuditRow>> Audit(const std::string& user, int limit) override {
    HANGAR_ASSIGN_OR_RETURN(
        pg::Result r,
        conn_.Exec("SELECT id,time_ms,user_name,role,method,path,remote,status,message FROM audit "
                   "WHERE $1 = '' OR user_name = $1 ORDER BY id DESC LIMIT $2",
                   {user, std::to_string(limit)}));
    std::vector<AuditRow> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      const PGresult* q = r.get();
      out.push_back({pg::Int(q, i, 0), pg::Int(q, i, 1), pg::Text(q, i, 2), pg::Text(q, i, 3),
                     pg::Text(q, i, 4), pg::Text(q, i, 5), pg::Text(q, i, 6),
                     static_cast<int>(pg::Int(q, i, 7)), pg::Text(q, i, 8)});
    }
    return out;
  }

  StatusOr<std::vector<HistoryRow>> History(bool hourly, Time since) override {
    HANGAR_ASSIGN_OR_RETURN(
        pg::Result r,
        conn_.Exec("SELECT time_ms,step_ms,gpus,allocated,busy,idle,pending,running FROM history "
                   "WHERE hourly = $1::boolean AND time_ms >= $2::bigint ORDER BY time_ms",
                   {hourly ? "true" : "false", std::to_string(since)}));
    std::vector<HistoryRow> out;
    const PGresult* q = r.get();
    auto real = [&](int i, int c) { return std::strtod(PQgetvalue(q, i, c), nullptr); };
    for (int i = 0; i < PQntuples(q); ++i) {
      out.push_back({pg::Int(q, i, 0), pg::Int(q, i, 1), real(i, 2), real(i, 3), real(i, 4),
                     real(i, 5), real(i, 6), real(i, 7)});
    }
    return out;
  }

  std::string Describe() const override { return conn_.shown(); }

 private:
  using Statement = std::pair<const char*, std::vector<std::string>>;

  static void AppendHistory(const StoreBatch& b, std::vector<Statement>* out) {
    if (!b.history.empty()) {
      pg::ArrayParams rows(9);
      for (const auto& h : b.history) {
        rows.Text(0, h.step == kHistoryHour ? "true" : "false");
        rows.Int(1, h.time);
        rows.Int(2, h.step);
        const double values[] = {h.gpus, h.allocated, h.busy, h.idle, h.pending, h.running};
        char text[64];
        for (int i = 0; i < 6; ++i) {
          std::snprintf(text, sizeof text, "%.17g", values[i]);
          rows.Text(3 + i, text);
        }
      }
      out->push_back({kInsertHistory, rows.Take()});
    }
    const HistoryUpkeep& u = b.history_upkeep;
    if (u.empty()) return;
    out->push_back({kRollUpHistory, {std::to_string(u.roll_up_before)}});
    out->push_back({kDropHistory,
                    {std::to_string(u.drop_samples_before), std::to_string(u.drop_hourly_before)}});
  }

  // One statement per table. A batch may name a row twice (a job submitted and placed in one
  // batch): the last write wins, as it does when SQLite applies the rows one by one.
  // `new_specs`: the keys of the specs this batch writes, known to be stored once it commits.
  void AppendStatements(const StoreBatch& b, std::vector<Statement>* statements,
                        std::vector<std::string>* new_specs) const {
    std::vector<Statement>& out = *statements;
    if (b.erase_all) out.push_back({"TRUNCATE jobs, specs, nodes, events, audit, kv, history", {}});
    std::map<uint64_t, const JobRow*> jobs;
    for (const auto& j : b.jobs) jobs[j.id] = &j;
    if (!b.erased_specs.empty()) {
      pg::ArrayParams keys(1);
      for (const auto& k : b.erased_specs) keys.Text(0, k);
      out.push_back({kEraseSpecs, keys.Take()});
    }
    AppendSpecs(jobs, b.erase_all, b.erased_specs, &out, new_specs);
    if (!jobs.empty()) {
      pg::ArrayParams rows(15);
      for (const auto& [id, j] : jobs) AddJob(*j, &rows);
      out.push_back({kUpsertJobs, rows.Take()});
    }
    if (!b.erased_jobs.empty()) {
      pg::ArrayParams ids(1);
      for (uint64_t id : b.erased_jobs) ids.Int(0, static_cast<int64_t>(id));
      out.push_back({kEraseJobs, ids.Take()});
    }
    std::map<std::string, const NodeRow*> nodes;
    for (const auto& n : b.nodes) nodes[n.name] = &n;
    if (!nodes.empty()) {
      pg::ArrayParams rows(2);
      for (const auto& [name, n] : nodes) {
        rows.Text(0, name);
        rows.Text(1, n->state_json);
      }
      out.push_back({kUpsertNodes, rows.Take()});
    }
    AppendValues(b.values, &out);
    if (!b.events.empty()) {
      pg::ArrayParams rows(4);
      for (const auto& e : b.events) {
        rows.Int(0, e.time);
        rows.Text(1, e.kind);
        rows.Text(2, e.subject);
        rows.Text(3, e.message);
      }
      out.push_back({kInsertEvents, rows.Take()});
    }
    if (!b.audit.empty()) {
      pg::ArrayParams rows(8);
      for (const auto& a : b.audit) AddAudit(a, &rows);
      out.push_back({kInsertAudit, rows.Take()});
    }
    AppendHistory(b, &out);
    // The change log: what a standby must read again (not events nor audit, which it never holds).
    if (b.erase_all || !jobs.empty() || !b.erased_jobs.empty() || !nodes.empty() ||
        !b.values.empty()) {
      pg::ArrayParams ids(1), names(1), kv(2);
      for (const auto& [id, j] : jobs) ids.Int(0, static_cast<int64_t>(id));
      for (uint64_t id : b.erased_jobs)
        ids.Int(0, static_cast<int64_t>(id));  // a follower finds them gone
      for (const auto& [name, n] : nodes) names.Text(0, name);
      for (const auto& v : b.values) {
        kv.Text(0, v.table);
        kv.Text(1, v.key);
      }
      std::vector<std::string> params = {b.erase_all ? "true" : "false", std::move(ids.Take()[0]),
                                         std::move(names.Take()[0])};
      for (auto& col : kv.Take()) params.push_back(std::move(col));
      out.push_back({kLogChanges, std::move(params)});
    }
  }

  // The specs of the batch's jobs that this store has not written or read yet, each once: a
  // spec's text goes over the wire once, not with every commit that touches one of its jobs.
  void AppendSpecs(const std::map<uint64_t, const JobRow*>& jobs, bool erase_all,
                   const std::vector<std::string>& erased, std::vector<Statement>* out,
                   std::vector<std::string>* new_specs) const {
    pg::ArrayParams rows(3);
    std::set<std::string_view> seen;
    const std::set<std::string_view> gone(erased.begin(), erased.end());
    for (const auto& [id, j] : jobs) {
      const bool stored =
          !erase_all && stored_specs_.count(j->spec_key) && !gone.count(j->spec_key);
      if (!j->spec || stored || !seen.insert(j->spec_key).second) continue;
      rows.Text(0, j->spec_key);
      rows.Text(1, j->user);
      rows.Text(2, *j->spec);
      new_specs->push_back(j->spec_key);
    }
    if (!seen.empty()) out->push_back({kInsertSpecs, rows.Take()});
  }

  // Gives each row (from `from` on) the text of its spec: reading every spec when `all`, else only
  // those the rows refer to.
  Status AttachSpecs(std::vector<JobRow>* rows, size_t from, bool all) {
    std::unordered_map<std::string, std::shared_ptr<const std::string>> texts;
    pg::ArrayParams keys(1);
    std::set<std::string_view> wanted;
    for (size_t i = from; i < rows->size(); ++i) {
      if (wanted.insert((*rows)[i].spec_key).second) keys.Text(0, (*rows)[i].spec_key);
    }
    if (wanted.empty() && !all) return Status::Ok();
    HANGAR_ASSIGN_OR_RETURN(
        pg::Result r, all ? conn_.Exec("SELECT key,text FROM specs")
                          : conn_.Exec("SELECT key,text FROM specs WHERE key = ANY($1::text[])",
                                       {std::move(keys.Take()[0])}));
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      texts.emplace(pg::Text(r.get(), i, 0),
                    std::make_shared<const std::string>(pg::Text(r.get(), i, 1)));
    }
    for (size_t i = from; i < rows->size(); ++i) {
      if (auto it = texts.find((*rows)[i].spec_key); it != texts.end())
        (*rows)[i].spec = it->second;
    }
    return Status::Ok();
  }

  static void AppendValues(const std::vector<KeyValueRow>& values, std::vector<Statement>* out) {
    std::map<std::pair<std::string, std::string>, const KeyValueRow*> last;
    for (const auto& v : values) last[{v.table, v.key}] = &v;
    pg::ArrayParams set(3), erase(2);
    size_t sets = 0, erases = 0;
    for (const auto& [key, v] : last) {
      if (v->erase) {
        erase.Text(0, v->table);
        erase.Text(1, v->key);
        ++erases;
      } else {
        set.Text(0, v->table);
        set.Text(1, v->key);
        set.Text(2, v->value);
        ++sets;
      }
    }
    if (erases > 0) out->push_back({kEraseValues, erase.Take()});
    if (sets > 0) out->push_back({kUpsertValues, set.Take()});
  }

  static void ReadJobs(const PGresult* q, std::vector<JobRow>* out) {
    out->reserve(out->size() + static_cast<size_t>(PQntuples(q)));
    for (int i = 0; i < PQntuples(q); ++i) {
      JobRow r;
      r.id = static_cast<uint64_t>(pg::Int(q, i, 0));
      r.name = pg::Text(q, i, 1);
      r.queue = pg::Text(q, i, 2);
      r.user = pg::Text(q, i, 3);
      r.state = pg::Text(q, i, 4);
      r.spec_key = pg::Text(q, i, 5);
      r.submitted = pg::Int(q, i, 6);
      r.started = pg::Int(q, i, 7);
      r.ended = pg::Int(q, i, 8);
      r.attempt = static_cast<uint32_t>(pg::Int(q, i, 9));
      r.restarts = static_cast<uint32_t>(pg::Int(q, i, 10));
      r.reason = pg::Text(q, i, 11);
      r.message = pg::Text(q, i, 12);
      r.placement_json = pg::Text(q, i, 13);
      r.extra_json = pg::Text(q, i, 14);
      out->push_back(std::move(r));
    }
  }

  StatusOr<StoreChanges> ChangesInTransaction(int64_t since) {
    StoreChanges c;
    const std::string from = std::to_string(since);
    HANGAR_ASSIGN_OR_RETURN(pg::Result head, conn_.Exec(kChangesHead, {from}));
    const bool empty = PQgetisnull(head.get(), 0, 0);
    c.rev = empty ? since : pg::Int(head.get(), 0, 1);
    // Pruned past `since` (the log keeps no row right after it), or emptied by a restore.
    const bool pruned = !empty && pg::Int(head.get(), 0, 0) > since + 1;
    if (pruned || pg::Text(head.get(), 0, 2) == "t" || c.rev < since) {
      c.reset = true;
      return c;
    }
    if (c.rev == since) return c;
    HANGAR_ASSIGN_OR_RETURN(
        pg::Result j,
        conn_.Exec(std::string("SELECT ") + kJobColumns +
                       " FROM jobs WHERE id IN (SELECT x.id FROM changes, unnest(job_ids) AS x(id) "
                       "WHERE rev > $1::bigint) ORDER BY id",
                   {from}));
    ReadJobs(j.get(), &c.jobs);
    HANGAR_RETURN_IF_ERROR(AttachSpecs(&c.jobs, 0, false));
    HANGAR_ASSIGN_OR_RETURN(
        pg::Result gone,
        conn_.Exec(
            "SELECT DISTINCT x.id FROM changes, unnest(job_ids) AS x(id) WHERE rev > $1::bigint "
            "AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = x.id)",
            {from}));
    for (int i = 0; i < PQntuples(gone.get()); ++i)
      c.erased_jobs.push_back(static_cast<uint64_t>(pg::Int(gone.get(), i, 0)));
    HANGAR_ASSIGN_OR_RETURN(
        pg::Result n,
        conn_.Exec("SELECT name,state FROM nodes WHERE name IN (SELECT x.n FROM changes, "
                   "unnest(node_names) AS x(n) WHERE rev > $1::bigint)",
                   {from}));
    for (int i = 0; i < PQntuples(n.get()); ++i)
      c.nodes.push_back({pg::Text(n.get(), i, 0), pg::Text(n.get(), i, 1)});
    HANGAR_ASSIGN_OR_RETURN(
        pg::Result v,
        conn_.Exec(
            "SELECT x.t, x.k, kv.value, kv.value IS NULL FROM (SELECT DISTINCT x.t, x.k FROM "
            "changes, unnest(kv_tbls, kv_keys) AS x(t, k) WHERE rev > $1::bigint) AS x "
            "LEFT JOIN kv ON kv.tbl = x.t AND kv.key = x.k",
            {from}));
    for (int i = 0; i < PQntuples(v.get()); ++i) {
      c.values.push_back({pg::Text(v.get(), i, 0), pg::Text(v.get(), i, 1), pg::Text(v.get(), i, 2),
                          pg::Text(v.get(), i, 3) == "t"});
    }
    return c;
  }

  StatusOr<StoreContents> LoadInTransaction() {
    StoreContents c;
    HANGAR_ASSIGN_OR_RETURN(pg::Result rev,
                            conn_.Exec("SELECT coalesce(max(rev), 0) FROM changes"));
    c.rev = pg::Int(rev.get(), 0, 0);
    HANGAR_ASSIGN_OR_RETURN(
        pg::Result j, conn_.Exec(std::string("SELECT ") + kJobColumns + " FROM jobs ORDER BY id"));
    ReadJobs(j.get(), &c.jobs);
    HANGAR_RETURN_IF_ERROR(AttachSpecs(&c.jobs, 0, true));
    // COLLATE "C": the same order as SQLite's byte order, whatever the database's locale.
    HANGAR_ASSIGN_OR_RETURN(pg::Result n,
                            conn_.Exec("SELECT name,state FROM nodes ORDER BY name COLLATE \"C\""));
    for (int i = 0; i < PQntuples(n.get()); ++i)
      c.nodes.push_back({pg::Text(n.get(), i, 0), pg::Text(n.get(), i, 1)});
    HANGAR_ASSIGN_OR_RETURN(
        pg::Result v,
        conn_.Exec("SELECT tbl,key,value FROM kv ORDER BY tbl COLLATE \"C\", key COLLATE \"C\""));
    for (int i = 0; i < PQntuples(v.get()); ++i) {
      c.values.push_back(
          {pg::Text(v.get(), i, 0), pg::Text(v.get(), i, 1), pg::Text(v.get(), i, 2), false});
    }
    return c;
  }

  pg::Connection conn_;
  // Keys of the specs this store's own commits wrote (and did not erase since). Not those it read:
  // a standby that read a spec the leader then purged must write it again once it leads. A
  // restore (erase_all) forgets them.
  std::unordered_set<std::string> stored_specs_;
  uint64_t commits_ = 0;
  int64_t epoch_ = 0;  // the lease epoch this store holds; 0: it never took the lease
};

}  // namespace

StatusOr<std::unique_ptr<StateStore>> OpenPostgresStore(const std::string& url) {
  auto s = std::make_unique<PostgresStore>();
  HANGAR_RETURN_IF_ERROR(s->Open(url));
  return std::unique_ptr<StateStore>(std::move(s));
}

}  // namespace hangar::controller
