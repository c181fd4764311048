// The PostgreSQL store (issue 18): the SQLite store's contract on a server that several
// controllers can share. A commit is one transaction sent in one round trip (libpq pipeline mode;
// each table's rows go as one JSON parameter unpacked by json_to_recordset), with
// synchronous_commit on: when Commit returns OK the batch is on the server's disk.
#include <map>
#include <nlohmann/json.hpp>

#include "controller/store/postgres_conn.h"
#include "controller/store/postgres_schema.h"
#include "controller/store/state_store.h"

namespace hangar::controller {
namespace {

using nlohmann::json;

constexpr const char* kUpsertJobs = R"sql(
INSERT INTO jobs (id,name,queue,user_name,state,spec,submitted_ms,started_ms,ended_ms,attempt,restarts,
                  reason,message,placement,extra)
SELECT * FROM json_to_recordset($1::json) AS x(id bigint, name text, queue text, user_name text,
  state text, spec text, submitted_ms bigint, started_ms bigint, ended_ms bigint, attempt bigint,
  restarts bigint, reason text, message text, placement text, extra text)
ON CONFLICT (id) DO UPDATE SET name=EXCLUDED.name, queue=EXCLUDED.queue, user_name=EXCLUDED.user_name,
  state=EXCLUDED.state, spec=EXCLUDED.spec, submitted_ms=EXCLUDED.submitted_ms,
  started_ms=EXCLUDED.started_ms, ended_ms=EXCLUDED.ended_ms, attempt=EXCLUDED.attempt,
  restarts=EXCLUDED.restarts, reason=EXCLUDED.reason, message=EXCLUDED.message,
  placement=EXCLUDED.placement, extra=EXCLUDED.extra)sql";

constexpr const char* kUpsertNodes = R"sql(
INSERT INTO nodes (name,state) SELECT * FROM json_to_recordset($1::json) AS x(name text, state text)
ON CONFLICT (name) DO UPDATE SET state=EXCLUDED.state)sql";

constexpr const char* kUpsertValues = R"sql(
INSERT INTO kv (tbl,key,value) SELECT * FROM json_to_recordset($1::json) AS x(tbl text, key text, value text)
ON CONFLICT (tbl,key) DO UPDATE SET value=EXCLUDED.value)sql";

constexpr const char* kEraseValues = R"sql(
DELETE FROM kv USING json_to_recordset($1::json) AS x(tbl text, key text)
WHERE kv.tbl = x.tbl AND kv.key = x.key)sql";

// Ids follow the batch's order (WITH ORDINALITY), as SQLite's AUTOINCREMENT does.
constexpr const char* kInsertEvents = R"sql(
INSERT INTO events (time_ms,kind,subject,message)
SELECT time_ms,kind,subject,message FROM ROWS FROM (json_to_recordset($1::json) AS (time_ms bigint,
  kind text, subject text, message text)) WITH ORDINALITY AS x(time_ms,kind,subject,message,n) ORDER BY n)sql";

constexpr const char* kInsertAudit = R"sql(
INSERT INTO audit (time_ms,user_name,role,method,path,remote,status,message)
SELECT time_ms,user_name,role,method,path,remote,status,message FROM ROWS FROM (json_to_recordset($1::json)
  AS (time_ms bigint, user_name text, role text, method text, path text, remote text, status bigint,
  message text)) WITH ORDINALITY AS x(time_ms,user_name,role,method,path,remote,status,message,n) ORDER BY n)sql";

// Takes the lease when there is none or it has expired (on the server's clock), with the next epoch.
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

// Text that PostgreSQL stores is UTF-8; a byte that is not is replaced rather than failing the batch.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json JobJson(const JobRow& j) {
  return {{"id", j.id},           {"name", j.name},         {"queue", j.queue},
          {"user_name", j.user},  {"state", j.state},       {"spec", j.spec_json},
          {"submitted_ms", j.submitted}, {"started_ms", j.started}, {"ended_ms", j.ended},
          {"attempt", j.attempt}, {"restarts", j.restarts}, {"reason", j.reason},
          {"message", j.message}, {"placement", j.placement_json}, {"extra", j.extra_json}};
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
    if (epoch_ > 0) statements.push_back({"SELECT hangar_check_epoch($1)", {std::to_string(epoch_)}});
    AppendStatements(b, &statements);
    return conn_.ExecInTransaction(statements);
  }

  StatusOr<int64_t> AcquireLease(const std::string& holder, Duration ttl) override {
    if (holder.empty() || ttl <= 0) return Status::InvalidArgument("a lease needs a holder's name and a positive ttl");
    HANGAR_ASSIGN_OR_RETURN(pg::Result r, conn_.Exec(kAcquireLease, {holder, std::to_string(ttl)}));
    if (PQntuples(r.get()) == 1) {
      epoch_ = pg::Int(r.get(), 0, 0);
      return epoch_;
    }
    HANGAR_ASSIGN_OR_RETURN(pg::Result held, conn_.Exec(kReadLease));
    if (PQntuples(held.get()) != 1) return Status::Unavailable("store " + conn_.shown() + ": the lease row vanished");
    return Status::FailedPrecondition("the store " + conn_.shown() + " is led by " + pg::Text(held.get(), 0, 0) +
                                      " (epoch " + pg::Text(held.get(), 0, 1) + ") for " +
                                      pg::Text(held.get(), 0, 2) + " ms more unless it renews; stand by");
  }

  Status RenewLease(Duration ttl) override {
    if (epoch_ == 0) return Status::FailedPrecondition("this store holds no lease to renew; acquire it first");
    if (ttl <= 0) return Status::InvalidArgument("a lease needs a positive ttl");
    HANGAR_ASSIGN_OR_RETURN(pg::Result r, conn_.Exec(kRenewLease, {std::to_string(epoch_), std::to_string(ttl)}));
    if (PQntuples(r.get()) == 1) return Status::Ok();
    HANGAR_ASSIGN_OR_RETURN(pg::Result now, conn_.Exec(kReadLease));
    const bool same = PQntuples(now.get()) == 1 && pg::Int(now.get(), 0, 1) == epoch_;
    return Status::Aborted("store " + conn_.shown() + ": this controller's lease (epoch " + std::to_string(epoch_) +
                           ") " +
                           (same ? std::string("expired before it was renewed")
                                 : "was taken over by " + pg::Text(now.get(), 0, 0) + " at epoch " +
                                       pg::Text(now.get(), 0, 1)) +
                           "; this controller must stop acting");
  }

  StatusOr<StoreContents> Load() override {
    // One snapshot for the three tables, even while another store writes to the database.
    HANGAR_RETURN_IF_ERROR(conn_.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").status());
    auto c = LoadInTransaction();
    (void)conn_.Exec(c.ok() ? "COMMIT" : "ROLLBACK");
    return c;
  }

  StatusOr<std::vector<EventRow>> Events(const std::string& prefix, int limit) override {
    HANGAR_ASSIGN_OR_RETURN(pg::Result r, conn_.Exec("SELECT id,time_ms,kind,subject,message FROM events WHERE "
                                                     "starts_with(subject, $1) ORDER BY id DESC LIMIT $2",
                                                     {prefix, std::to_string(limit)}));
    std::vector<EventRow> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      out.push_back({pg::Int(r.get(), i, 0), pg::Int(r.get(), i, 1), pg::Text(r.get(), i, 2),
                     pg::Text(r.get(), i, 3), pg::Text(r.get(), i, 4)});
    }
    return out;
  }

  StatusOr<std::vector<AuditRow>> Audit(const std::string& user, int limit) override {
    HANGAR_ASSIGN_OR_RETURN(pg::Result r,
                            conn_.Exec("SELECT id,time_ms,user_name,role,method,path,remote,status,message FROM audit "
                                       "WHERE $1 = '' OR user_name = $1 ORDER BY id DESC LIMIT $2",
                                       {user, std::to_string(limit)}));
    std::vector<AuditRow> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      const PGresult* q = r.get();
      out.push_back({pg::Int(q, i, 0), pg::Int(q, i, 1), pg::Text(q, i, 2), pg::Text(q, i, 3), pg::Text(q, i, 4),
                     pg::Text(q, i, 5), pg::Text(q, i, 6), static_cast<int>(pg::Int(q, i, 7)), pg::Text(q, i, 8)});
    }
    return out;
  }

  std::string Describe() const override { return conn_.shown(); }

 private:
  using Statement = std::pair<const char*, std::vector<std::string>>;

  // One statement per table. A batch may name a row twice (a job submitted and placed in one
  // batch): the last write wins, as it does when SQLite applies the rows one by one.
  static void AppendStatements(const StoreBatch& b, std::vector<Statement>* statements) {
    std::vector<Statement>& out = *statements;
    if (b.erase_all) out.push_back({"TRUNCATE jobs, nodes, events, audit, kv", {}});
    std::map<uint64_t, const JobRow*> jobs;
    for (const auto& j : b.jobs) jobs[j.id] = &j;
    if (!jobs.empty()) {
      json rows = json::array();
      for (const auto& [id, j] : jobs) rows.push_back(JobJson(*j));
      out.push_back({kUpsertJobs, {Dump(rows)}});
    }
    std::map<std::string, const NodeRow*> nodes;
    for (const auto& n : b.nodes) nodes[n.name] = &n;
    if (!nodes.empty()) {
      json rows = json::array();
      for (const auto& [name, n] : nodes) rows.push_back({{"name", name}, {"state", n->state_json}});
      out.push_back({kUpsertNodes, {Dump(rows)}});
    }
    AppendValues(b.values, &out);
    if (!b.events.empty()) {
      json rows = json::array();
      for (const auto& e : b.events) {
        rows.push_back({{"time_ms", e.time}, {"kind", e.kind}, {"subject", e.subject}, {"message", e.message}});
      }
      out.push_back({kInsertEvents, {Dump(rows)}});
    }
    if (!b.audit.empty()) {
      json rows = json::array();
      for (const auto& a : b.audit) {
        rows.push_back({{"time_ms", a.time}, {"user_name", a.user}, {"role", a.role}, {"method", a.method},
                        {"path", a.path}, {"remote", a.remote}, {"status", a.status}, {"message", a.message}});
      }
      out.push_back({kInsertAudit, {Dump(rows)}});
    }
  }

  static void AppendValues(const std::vector<KeyValueRow>& values, std::vector<Statement>* out) {
    std::map<std::pair<std::string, std::string>, const KeyValueRow*> last;
    for (const auto& v : values) last[{v.table, v.key}] = &v;
    json set = json::array(), erase = json::array();
    for (const auto& [key, v] : last) {
      if (v->erase) erase.push_back({{"tbl", v->table}, {"key", v->key}});
      else set.push_back({{"tbl", v->table}, {"key", v->key}, {"value", v->value}});
    }
    if (!erase.empty()) out->push_back({kEraseValues, {Dump(erase)}});
    if (!set.empty()) out->push_back({kUpsertValues, {Dump(set)}});
  }

  StatusOr<StoreContents> LoadInTransaction() {
    StoreContents c;
    HANGAR_ASSIGN_OR_RETURN(pg::Result j, conn_.Exec(
        "SELECT id,name,queue,user_name,state,spec,submitted_ms,started_ms,ended_ms,attempt,restarts,reason,"
        "message,placement,extra FROM jobs ORDER BY id"));
    const PGresult* q = j.get();
    for (int i = 0; i < PQntuples(q); ++i) {
      JobRow r;
      r.id = static_cast<uint64_t>(pg::Int(q, i, 0));
      r.name = pg::Text(q, i, 1);
      r.queue = pg::Text(q, i, 2);
      r.user = pg::Text(q, i, 3);
      r.state = pg::Text(q, i, 4);
      r.spec_json = pg::Text(q, i, 5);
      r.submitted = pg::Int(q, i, 6);
      r.started = pg::Int(q, i, 7);
      r.ended = pg::Int(q, i, 8);
      r.attempt = static_cast<uint32_t>(pg::Int(q, i, 9));
      r.restarts = static_cast<uint32_t>(pg::Int(q, i, 10));
      r.reason = pg::Text(q, i, 11);
      r.message = pg::Text(q, i, 12);
      r.placement_json = pg::Text(q, i, 13);
      r.extra_json = pg::Text(q, i, 14);
      c.jobs.push_back(std::move(r));
    }
    // COLLATE "C": the same order as SQLite's byte order, whatever the database's locale.
    HANGAR_ASSIGN_OR_RETURN(pg::Result n, conn_.Exec("SELECT name,state FROM nodes ORDER BY name COLLATE \"C\""));
    for (int i = 0; i < PQntuples(n.get()); ++i) c.nodes.push_back({pg::Text(n.get(), i, 0), pg::Text(n.get(), i, 1)});
    HANGAR_ASSIGN_OR_RETURN(pg::Result v,
                            conn_.Exec("SELECT tbl,key,value FROM kv ORDER BY tbl COLLATE \"C\", key COLLATE \"C\""));
    for (int i = 0; i < PQntuples(v.get()); ++i) {
      c.values.push_back({pg::Text(v.get(), i, 0), pg::Text(v.get(), i, 1), pg::Text(v.get(), i, 2), false});
    }
    return c;
  }

  pg::Connection conn_;
  int64_t epoch_ = 0;  // the lease epoch this store holds; 0: it never took the lease
};

}  // namespace

StatusOr<std::unique_ptr<StateStore>> OpenPostgresStore(const std::string& url) {
  auto s = std::make_unique<PostgresStore>();
  HANGAR_RETURN_IF_ERROR(s->Open(url));
  return std::unique_ptr<StateStore>(std::move(s));
}

}  // namespace hangar::controller
