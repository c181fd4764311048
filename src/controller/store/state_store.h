// StateStore: where the controller's state becomes durable. The controller commits a batch (a
// scheduling cycle's decisions, an accepted job) and only then tells anyone; after a crash it
// rebuilds everything from Load(). Implementations: SQLite in WAL mode (the embedded default),
// PostgreSQL (for controllers that share one store) and an in-memory twin for unit tests. Not
// thread-safe: the controller's state owner is the only writer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"

namespace hangar::controller {

// The key a job spec is stored under: the hex SHA-256 of its text.
std::string SpecKey(std::string_view text);

struct JobRow {
  uint64_t id = 0;
  std::string name;
  std::string queue;
  std::string user;
  std::string state;
  // Its spec (JSON), which the store holds once however many jobs share it (an array's elements, a
  // sweep of identical jobs), under `spec_key`. Rows of the same spec share one text: a commit
  // writes a spec's text only when the store does not hold its key yet, and Load gives every row
  // of a spec the same pointer.
  std::string spec_key;
  std::shared_ptr<const std::string> spec;
  Time submitted = 0;
  Time started = 0;
  Time ended = 0;
  uint32_t attempt = 0;
  uint32_t restarts = 0;
  std::string reason;
  std::string message;
  std::string placement_json;  // the current attempt's tasks and GPUs; "" when not placed
  std::string extra_json;      // accounting and checkpoint bookkeeping; "" when none
  // Sets spec and spec_key from the text (tools and tests; the controller shares its own).
  void SetSpec(std::string text);
  const std::string& spec_text() const;  // "" when it has none
};

struct NodeRow {
  std::string name;
  std::string state_json;  // drain flag and reason, health state, validation results
};

struct EventRow {
  int64_t id = 0;  // assigned by the store
  Time time = 0;
  std::string kind;     // e.g. "job", "node", "health"
  std::string subject;  // e.g. "job/42", "node/gpu-003"
  std::string message;
};

// One mutating API call: who, what, when, from where, and how it ended.
struct AuditRow {
  int64_t id = 0;  // assigned by the store
  Time time = 0;
  std::string user, role;  // "" when the call did not authenticate
  std::string method, path, remote;
  int status = 0;       // the HTTP status answered
  std::string message;  // the error sentence, when it failed
};

struct KeyValueRow {
  std::string table;  // "meta", "queue", "token", "usage"
  std::string key;
  std::string value;
  bool erase = false;
};

// The cluster's load at `time` (the dashboard's charts, GET /v1/history), averaged over `step` ms:
// the sampling interval for a sample, kHistoryHour for an hourly roll-up. GPUs are counted whole
// (a fraction counts its share).
struct HistoryRow {
  Time time = 0;
  Duration step = 0;
  double gpus = 0;                  // on the cluster
  double allocated = 0;             // held by jobs
  double busy = 0;                  // held and at or above the idle threshold
  double idle = 0;                  // held but below it: the waste
  double pending = 0, running = 0;  // jobs
};
inline constexpr Duration kHistoryHour = 3'600'000;

// Keeps the history bounded (HistorySampler): samples of the whole hours before
// `roll_up_before` are averaged into one hourly row each (once: an hour rolled up is left as it
// is), then samples before `drop_samples_before` and hourly rows before `drop_hourly_before` are
// deleted. 0: that step is skipped.
struct HistoryUpkeep {
  Time roll_up_before = 0;
  Time drop_samples_before = 0;
  Time drop_hourly_before = 0;
  bool empty() const {
    return roll_up_before == 0 && drop_samples_before == 0 && drop_hourly_before == 0;
  }
};

// Everything one commit writes, atomically.
struct StoreBatch {
  std::vector<JobRow> jobs;
  std::vector<NodeRow> nodes;
  std::vector<EventRow> events;
  std::vector<KeyValueRow> values;
  std::vector<AuditRow> audit;
  // Erase every row of every table first, in the same transaction (a restore with --force).
  bool erase_all = false;
  // Jobs purged (finished long enough ago), erased after `jobs` is written; and specs no job refers
  // to any more, erased before it is (a spec purged and then used again in one batch is written
  // again).
  std::vector<uint64_t> erased_jobs;
  std::vector<std::string> erased_specs;
  // History samples to add, then the upkeep (after them, in the same transaction).
  std::vector<HistoryRow> history;
  HistoryUpkeep history_upkeep;
  bool empty() const {
    return !erase_all && jobs.empty() && nodes.empty() && events.empty() && values.empty() &&
           audit.empty() && erased_jobs.empty() && erased_specs.empty() && history.empty() &&
           history_upkeep.empty();
  }
};

// The leadership lease as it is now; epoch 0 and holder "" when nobody ever took it.
struct LeaseRow {
  std::string holder;
  int64_t epoch = 0;
  Time acquired = 0;  // when its holder took it (the database server's clock, ms since the epoch)
  Duration left = 0;  // until it expires unless renewed; 0 when it has expired
};

struct StoreContents {
  std::vector<JobRow> jobs;
  std::vector<NodeRow> nodes;
  std::vector<KeyValueRow> values;
  // The store's change revision this snapshot includes (ChangesSince); 0 where stores keep none.
  int64_t rev = 0;
};

// The rows written since a revision (a standby follows the store this way). `values`
// has erase set for rows deleted since. `reset`: the changes cannot be told (the store was emptied
// by a restore, or its change log was pruned past `since`): Load everything again.
struct StoreChanges {
  int64_t rev = 0;  // the revision these bring a follower to
  bool reset = false;
  std::vector<JobRow> jobs;
  std::vector<uint64_t> erased_jobs;  // purged since
  std::vector<NodeRow> nodes;
  std::vector<KeyValueRow> values;
};

class StateStore {
 public:
  virtual ~StateStore() = default;
  // Writes the batch atomically (upserting jobs, nodes and values by key); durable on return.
  virtual Status Commit(const StoreBatch& batch) = 0;
  // Everything but the events, as it was after the last successful commit.
  virtual StatusOr<StoreContents> Load() = 0;
  // The newest events first; `subject_prefix` "" for all. At most `limit`.
  virtual StatusOr<std::vector<EventRow>> Events(const std::string& subject_prefix, int limit) = 0;
  // The audit log, newest first: at most `limit` rows, of `user` only unless it is "".
  virtual StatusOr<std::vector<AuditRow>> Audit(const std::string& user, int limit) = 0;
  // The history's hourly roll-ups (`hourly`) or its samples at or after `since`, oldest first.
  // Unimplemented where a store keeps none.
  virtual StatusOr<std::vector<HistoryRow>> History(bool hourly, Time since);
  virtual std::string Describe() const = 0;
  // What was committed after revision `since` (a Load's or an earlier call's rev), as one
  // consistent snapshot. Stores that several controllers share keep a change log for it
  // (PostgreSQL); the others answer Unimplemented.
  virtual StatusOr<StoreChanges> ChangesSince(int64_t since);

  // Leadership of a store that several controllers share (PostgreSQL). The lease is one
  // row: its holder, its expiry on the database server's clock, and an epoch that grows at every
  // takeover. AcquireLease takes it when it is free or expired and returns the new epoch; from then
  // on every Commit of this store checks, in its own transaction, that this epoch is still the
  // current one, and fails with Aborted (IsFenced) when another store has taken the lease since --
  // writing nothing. FailedPrecondition, naming the holder, while another holds it. Stores with a
  // single owner (SQLite's file lock, memory) answer Unimplemented.
  virtual StatusOr<int64_t> AcquireLease(const std::string& holder, Duration ttl);
  // Extends this store's lease to `ttl` from now. Aborted (IsFenced) when it expired or was taken.
  virtual Status RenewLease(Duration ttl);
  // The lease row, for standbys and `hangar status`.
  virtual StatusOr<LeaseRow> ReadLease();
  // From now on this store commits and renews as the holder of `epoch`, which another store object
  // of this controller (on a connection of its own) acquired. Unimplemented where there is no
  // lease.
  virtual Status AdoptLease(int64_t epoch);
};

// True for the one failure that means "another controller leads now": stop acting at once.
inline bool IsFenced(const Status& s) { return s.code() == StatusCode::kAborted; }

// "sqlite:///var/lib/hangar/state.db", "sqlite://relative/path.db", "memory://", or a libpq URI
// "postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAM=VALUE...]" (also "postgresql://").
// A controller's store is checked (store_integrity.h): a damaged or unexpectedly empty one is
// refused with a sentence and the restore command.
struct StoreOpenOptions {
  // false: opened as it is, unchecked (`hangar backup` reads what is left of a store, `hangar
  // restore` replaces it).
  bool check = true;
  // hangar controller --store-new: a damaged or empty store file is moved aside and a new store
  // begins; a store short of its high-water record is accepted as it is.
  bool start_new = false;
  // A SQLite store's file is checked this often while it is open; 0: never.
  Duration integrity_every = 10 * kMinute;
};
StatusOr<std::unique_ptr<StateStore>> OpenStore(const std::string& url,
                                                const StoreOpenOptions& options = {});
// The URL as it may be shown in logs and messages: a PostgreSQL URL without its password.
std::string ShownStoreUrl(const std::string& url);

// The store's identity: meta/store_id in `contents`, or a new random one committed
// now when the store has none (a new store, or one from before identities). Agents remember it,
// so a controller started on a lost store's empty replacement cannot take their old results.
StatusOr<std::string> EnsureStoreId(StateStore& store, const StoreContents& contents);

std::unique_ptr<StateStore> NewMemoryStore();
StatusOr<std::unique_ptr<StateStore>> OpenSqliteStore(const std::string& path);
// Connects, then applies the schema's migrations in order (a database newer than this binary is
// refused). Unavailable, naming the URL without its password, when the server cannot be reached.
StatusOr<std::unique_ptr<StateStore>> OpenPostgresStore(const std::string& url);

}  // namespace hangar::controller
