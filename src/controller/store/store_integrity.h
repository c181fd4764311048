// Store integrity: a damaged or unexpectedly empty store is refused, never served as if it were
// the cluster's state. A controller that served a store whose jobs table lost a page would see no
// jobs, and then stop every task that agents report -- running work lost to a disk error.
//
// Three checks, each refusing with a sentence that says what is wrong and how to restore:
//   - at open, a SQLite file that exists but holds 0 bytes (it is not "a new store"), or fails
//     SQLite's PRAGMA integrity_check (every page, every index against its table: 0.7 s for a
//     100,000-job store here, docs/ha.md);
//   - at load, any store whose rows fall short of its high-water record: how many job rows it
//     holds (new ones counted in, purged ones out), the highest job id, and whether it ever held
//     node rows, kept in the store's meta values and updated in the same transaction as the rows
//     it counts (so a jobs table emptied behind the controller's back, or a page of it lost,
//     shows);
//   - while running, a SQLite store's file is checked again every `integrity_every` (PRAGMA
//     quick_check, on a connection of its own, off the commit path); once it fails the store
//     refuses every commit with the sentence (nothing is written to a damaged file) and the
//     controller stops (state_owner.h).
// A brand-new store (no file) is made as before. `start_new` (hangar controller --store-new, for a
// SQLite store) moves a damaged or empty file aside and starts on a new store, and accepts a store
// that falls short of its record.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "common/status.h"
#include "common/time.h"
#include "controller/store/state_store.h"

namespace hangar::controller {

// "restore it from your latest backup with `hangar restore --store URL --in BACKUP.jsonl --force`",
// and for SQLite ", or start the controller once with --store-new to begin again on an empty
// store".
std::string RestoreAdvice(const std::string& url);

// The check made before a SQLite file is opened for writing (see above), under the file's lock.
// OK when the file does not exist. FailedPrecondition, with RestoreAdvice, when it is empty or
// damaged (or in use by another controller); with `start_new` an empty or damaged file (and its
// -wal and -shm) is moved aside instead, to PATH.damaged-TIME, and OK is returned. A file that
// cannot be read for want of room is StoreDiskFull; for other reasons, Unavailable.
Status CheckSqliteFileAtOpen(const std::string& path, bool start_new);

// PRAGMA quick_check (or integrity_check, `thorough`) of the file on a connection of its own.
// OK; FailedPrecondition naming the first problems SQLite found (damage); StoreDiskFull or
// Unavailable when it could not be checked.
Status CheckSqliteFile(const std::string& path, bool thorough);

// How many times a running store failed its scheduled check (for /metrics).
int64_t StoreIntegrityFailures();

// Wraps `inner` with the high-water record and the scheduled check. The record's row is the
// wrapper's own: Load and ChangesSince do not show it.
// `sqlite_path`: the file to check on schedule ("" for other stores).
std::unique_ptr<StateStore> WithIntegrityChecks(std::unique_ptr<StateStore> inner,
                                                const StoreOpenOptions& options,
                                                const std::string& sqlite_path);

}  // namespace hangar::controller
