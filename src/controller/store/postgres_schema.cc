// The PostgreSQL store's schema, as numbered migrations applied in order at open. A migration is
// never edited once released: a change of schema is a new one at the end.
#include "controller/store/postgres_schema.h"

#include <string>

namespace hangar::controller::pg {
namespace {

struct Migration {
  int version;
  const char* sql;
};

constexpr Migration kMigrations[] = {
    {1, R"sql(
-- No index but the key on jobs (nothing reads jobs by state), and room in each page, so that a
-- job's updates (pending, running, ended) are HOT: no index to touch.
CREATE TABLE jobs (
  id BIGINT PRIMARY KEY, name TEXT NOT NULL, queue TEXT NOT NULL, user_name TEXT NOT NULL,
  state TEXT NOT NULL, spec TEXT NOT NULL, submitted_ms BIGINT, started_ms BIGINT, ended_ms BIGINT,
  attempt BIGINT, restarts BIGINT, reason TEXT, message TEXT, placement TEXT, extra TEXT)
  WITH (fillfactor = 70);
CREATE TABLE nodes (name TEXT PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE events (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, time_ms BIGINT, kind TEXT, subject TEXT,
  message TEXT);
-- Byte order, whatever the database's collation: a subject prefix is a range of this index.
CREATE INDEX events_subject ON events((subject COLLATE "C"), id);
CREATE TABLE audit (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, time_ms BIGINT, user_name TEXT, role TEXT,
  method TEXT, path TEXT, remote TEXT, status BIGINT, message TEXT);
CREATE INDEX audit_user ON audit(user_name, id);
CREATE TABLE kv (tbl TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (tbl, key));
)sql"},
    // The leadership lease (one row) and the fence every leader's commit passes: FOR SHARE holds
    // the row until the commit ends, so a takeover waits for a commit already checked.
    {2, R"sql(
CREATE TABLE lease (
  id SMALLINT PRIMARY KEY CHECK (id = 1), holder TEXT NOT NULL, epoch BIGINT NOT NULL,
  acquired_at TIMESTAMPTZ NOT NULL, expires_at TIMESTAMPTZ NOT NULL);
CREATE FUNCTION hangar_check_epoch(mine BIGINT) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  cur BIGINT;
  who TEXT;
BEGIN
  SELECT epoch, holder INTO cur, who FROM lease WHERE id = 1 FOR SHARE;
  IF cur IS DISTINCT FROM mine THEN
    RAISE EXCEPTION 'this controller''s lease (epoch %) is no longer current: % leads at epoch %', mine, who, cur
      USING ERRCODE = 'HF001';
  END IF;
END $$;
)sql"},
    // The change log standbys follow: one row per commit, naming the rows it wrote, so
    // that a standby reads only those. Commits are serial (one leader, fenced), so revisions grow
    // in commit order. `reset`: a restore emptied every table.
    {3, R"sql(
CREATE TABLE changes (
  rev BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, reset BOOLEAN NOT NULL DEFAULT false,
  job_ids BIGINT[] NOT NULL, node_names TEXT[] NOT NULL, kv_tbls TEXT[] NOT NULL, kv_keys TEXT[] NOT NULL);
)sql"},
    // A leader renews its lease while its own commits are in flight. The fence check used to take
    // FOR SHARE on the lease row until its commit ended, and a renewal (an UPDATE) waited for it:
    // a commit of 81,920 new jobs (1.5-2 s) let the lease run out under a healthy leader. With a
    // unique index on `epoch`, PostgreSQL counts it as a key column: the check takes FOR KEY SHARE,
    // which a renewal (FOR NO KEY UPDATE: it changes only expires_at) does not wait for, while a
    // takeover, which changes the epoch (FOR UPDATE), still waits until the old leader's commit in
    // flight has ended, so that every commit of the old epoch comes before the new one's.
    {4, R"sql(
CREATE UNIQUE INDEX lease_epoch ON lease (epoch);
CREATE OR REPLACE FUNCTION hangar_check_epoch(mine BIGINT) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  cur BIGINT;
  who TEXT;
BEGIN
  SELECT epoch, holder INTO cur, who FROM lease WHERE id = 1 FOR KEY SHARE;
  IF cur IS DISTINCT FROM mine THEN
    RAISE EXCEPTION 'this controller''s lease (epoch %) is no longer current: % leads at epoch %', mine, who, cur
      USING ERRCODE = 'HF001';
  END IF;
END $$;
)sql"},
    // Job specs stored once, keyed by the SHA-256 of their text (the controller's SpecKey), instead
    // of one copy per job: a 500 KB spec with array: "0-199" wrote 200 MB.
    {5, R"sql(
CREATE TABLE specs (key TEXT PRIMARY KEY, user_name TEXT NOT NULL, text TEXT NOT NULL);
INSERT INTO specs (key, user_name, text)
  SELECT DISTINCT ON (k) k, user_name, spec
  FROM (SELECT encode(sha256(convert_to(spec, 'UTF8')), 'hex') AS k, user_name, spec FROM jobs) AS x
  ORDER BY k;
ALTER TABLE jobs ADD COLUMN spec_key TEXT NOT NULL DEFAULT '';
UPDATE jobs SET spec_key = encode(sha256(convert_to(spec, 'UTF8')), 'hex');
ALTER TABLE jobs DROP COLUMN spec;
)sql"},
    // The cluster's history (HistoryRow): samples, and their hourly roll-ups (`hourly`).
    {6, R"sql(
CREATE TABLE history (
  hourly BOOLEAN NOT NULL, time_ms BIGINT NOT NULL, step_ms BIGINT NOT NULL,
  gpus DOUBLE PRECISION NOT NULL, allocated DOUBLE PRECISION NOT NULL, busy DOUBLE PRECISION NOT NULL,
  idle DOUBLE PRECISION NOT NULL, pending DOUBLE PRECISION NOT NULL, running DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (hourly, time_ms));
)sql"},
};

}  // namespace

int LatestSchemaVersion() { return kMigrations[std::size(kMigrations) - 1].version; }

Status Migrate(Connection& conn) {
  HANGAR_RETURN_IF_ERROR(conn.Exec("BEGIN").status());
  auto run = [&]() -> Status {
    HANGAR_RETURN_IF_ERROR(conn.Exec("SET LOCAL client_min_messages = warning").status());
    // Two controllers (or a leader and its standby's follower) opening one new database at once:
    // CREATE TABLE IF NOT EXISTS is not safe against itself (the loser fails on pg_type's unique
    // index), so the first takes this transaction-scoped lock and the second waits for it.
    HANGAR_RETURN_IF_ERROR(conn.Exec("SELECT pg_advisory_xact_lock(7304715823210)").status());
    HANGAR_RETURN_IF_ERROR(
        conn.Exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                  "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
            .status());
    // Two controllers opening one new database at once: the second waits, then finds it done.
    HANGAR_RETURN_IF_ERROR(conn.Exec("LOCK TABLE schema_version IN EXCLUSIVE MODE").status());
    HANGAR_ASSIGN_OR_RETURN(Result r,
                            conn.Exec("SELECT coalesce(max(version), 0) FROM schema_version"));
    const int current = static_cast<int>(Int(r.get(), 0, 0));
    if (current > LatestSchemaVersion()) {
      return Status::FailedPrecondition(
          "the store " + conn.shown() + " has schema version " + std::to_string(current) +
          ", newer than this hangar knows (up to " + std::to_string(LatestSchemaVersion()) +
          "); run the newer hangar that wrote it, or restore a backup into an empty database");
    }
    for (const Migration& m : kMigrations) {
      if (m.version <= current) continue;
      HANGAR_RETURN_IF_ERROR(conn.Exec(m.sql).status());
      HANGAR_RETURN_IF_ERROR(
          conn.Exec("INSERT INTO schema_version (version) VALUES ($1)", {std::to_string(m.version)})
              .status());
    }
    return Status::Ok();
  };
  Status s = run();
  if (!s.ok()) {
    (void)conn.Exec("ROLLBACK");
    return s;
  }
  return conn.Exec("COMMIT").status();
}

}  // namespace hangar::controller::pg
