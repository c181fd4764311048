// TaskJournal: the agent's task records on disk, across its restarts. A snapshot
// (<dir>/tasks.json) of every record, and after it a journal (<dir>/tasks.journal) with one line
// per changed record, so that a task's launch or end costs one appended line, not a rewrite of
// every record the agent keeps (an hour of ended tasks on a busy node is thousands). The journal
// is folded into a new snapshot once it outgrows the records. Both carry a generation: a journal
// of an older snapshot (the agent stopped between writing the one and starting the other) is
// ignored, so an older line never undoes a newer snapshot. A torn last line is skipped.
//
// Beside them, <dir>/store_id: the identity of the controller store the agent serves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hangar::agent {

class TaskJournal {
 public:
  explicit TaskJournal(std::string dir) : dir_(std::move(dir)) {}
  ~TaskJournal();
  TaskJournal(const TaskJournal&) = delete;
  TaskJournal& operator=(const TaskJournal&) = delete;

  // The records as last written, oldest first (a later one of a task replaces an earlier one).
  // Reads the snapshot of earlier agents too (a bare array).
  std::vector<nlohmann::json> Load();
  // One changed record, appended to the journal.
  void Append(const nlohmann::json& record);
  // Every record as a new snapshot; the journal starts again empty.
  void Compact(const std::vector<nlohmann::json>& records);
  // Lines appended since the last snapshot.
  size_t appended() const { return appended_; }

 private:
  void OpenJournal();  // a new, empty journal of generation_

  std::string dir_;
  uint64_t generation_ = 0;
  int fd_ = -1;  // the journal, O_APPEND
  size_t appended_ = 0;
};

// The latest record of each task an agent left in `dir`, in the order the tasks first appear
// (for tools and tests that read an agent's records without being the agent).
std::vector<nlohmann::json> LatestTaskRecords(const std::string& dir);

// The store this agent serves ("" when none yet) and its change; WriteStoreId("") forgets it.
std::string ReadStoreId(const std::string& dir);
bool WriteStoreId(const std::string& dir, const std::string& id);

}  // namespace hangar::agent
