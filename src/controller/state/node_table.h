// The node table: every node of the cluster as the controller holds it (by its index in the
// topology), whether the controller hears the fleet at all (FleetHearing: heartbeats' lateness,
// held losses, the reconnect grace after a restore), and which nodes the last cycle's reasons name
// as never registered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "controller/state/fleet_hearing.h"
#include "controller/state/node_record.h"

namespace hangar::controller {

class NodeTable {
 public:
  explicit NodeTable(size_t nodes) : records_(nodes) {}

  NodeRecord& operator[](uint32_t n) { return records_[n]; }
  const NodeRecord& operator[](uint32_t n) const { return records_[n]; }
  size_t size() const { return records_.size(); }
  std::vector<NodeRecord>::iterator begin() { return records_.begin(); }
  std::vector<NodeRecord>::iterator end() { return records_.end(); }
  std::vector<NodeRecord>::const_iterator begin() const { return records_.begin(); }
  std::vector<NodeRecord>::const_iterator end() const { return records_.end(); }

  FleetHearing& hearing() { return hearing_; }
  const FleetHearing& hearing() const { return hearing_; }

  // The nodes the last cycle's reasons of unhealthy nodes name: the first five of those no agent
  // has registered for, as a list ("" when none), and whether a registered node may not take work
  // either.
  struct InReasons {
    std::string unregistered;
    bool others = false;
  };
  // Notes the names of `unregistered` (the first five, and how many more) and `in` as the last
  // reasons name them.
  void NoteInReasons(const std::vector<std::string>& unregistered, InReasons in);
  const InReasons& in_reasons() const { return in_reasons_; }

 private:
  std::vector<NodeRecord> records_;
  FleetHearing hearing_;
  InReasons in_reasons_;
};

}  // namespace hangar::controller
