// StoreFollower: a standby controller's copy of the rows of a store that another controller
// leads. The standby catches up several times a second, reading only what the leader's
// commits wrote since (StateStore::ChangesSince), so that a takeover starts from rows already in
// memory -- one last catch-up, not a full load of every job.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "controller/store/state_store.h"

namespace hangar::controller {

class StoreFollower {
 public:
  explicit StoreFollower(std::unique_ptr<StateStore> store) : store_(std::move(store)) {}

  // Reads what was committed since the last call: everything the first time, and again after a
  // restore emptied the store or when its change log no longer reaches back this far. `changed`
  // (optional) gets the job rows read, valid until the next call.
  Status CatchUp(std::vector<const JobRow*>* changed = nullptr);

  int64_t rev() const { return rev_; }
  size_t jobs() const { return jobs_.size(); }
  int full_loads() const { return full_loads_; }
  int catch_ups() const { return catch_ups_; }
  // Job rows read by catch-ups (not by full loads).
  int64_t rows_followed() const { return rows_followed_; }

  // The rows as Load() returns them (jobs by id, nodes by name, values by table and key); the
  // follower holds none afterwards.
  StoreContents Take();
  StateStore& store() { return *store_; }
  std::unique_ptr<StateStore> TakeStore() { return std::move(store_); }

 private:
  Status LoadAll(std::vector<const JobRow*>* changed);

  std::unique_ptr<StateStore> store_;
  bool loaded_ = false;
  int64_t rev_ = 0;
  std::map<uint64_t, JobRow> jobs_;
  std::map<std::string, NodeRow> nodes_;
  std::map<std::pair<std::string, std::string>, KeyValueRow> values_;
  int full_loads_ = 0, catch_ups_ = 0;
  int64_t rows_followed_ = 0;
};

}  // namespace hangar::controller
