// Backups of a store, in a format that any store reads back: JSON lines, one row a line, after a
// header line ({"hangar_backup":1,...}). A SQLite store's backup restores into PostgreSQL and back.
// Event and audit rows keep their order; the restored store numbers them afresh.
#pragma once

#include <cstddef>
#include <istream>
#include <ostream>
#include <string>

#include "common/status.h"
#include "controller/store/state_store.h"

namespace hangar::controller {

struct BackupCounts {
  size_t jobs = 0, nodes = 0, values = 0, events = 0, audit = 0;
  size_t specs = 0;    // distinct job specs (each written once); 0 in backups of format 1
  size_t history = 0;  // history samples and hourly roll-ups; 0 in backups before format 3
  std::string ToString() const;
};

// Writes every row of `store` to `out`. The jobs, nodes and values are one snapshot of the store;
// the events and the audit log are read after them.
StatusOr<BackupCounts> WriteBackup(StateStore& store, std::ostream& out);

// True when the store holds no row at all.
StatusOr<bool> StoreIsEmpty(StateStore& store);

// Reads a backup written by WriteBackup into `store`, in commits of at most 10,000 rows. A store
// that is not empty is refused (FailedPrecondition) unless `replace`: then its rows are erased in
// the first commit. `source` names the input in error messages ("backup.jsonl:12: ...").
StatusOr<BackupCounts> RestoreBackup(std::istream& in, const std::string& source, StateStore& store,
                                     bool replace);

}  // namespace hangar::controller
