// Reservations and maintenance windows (docs/reservations.md): named sets of nodes held over a
// window of time [start, end) for the jobs of some users or queues, or, with `maintenance`, taken
// out of service. The ReservationBook holds them, checks a new one against the others, says who
// may run inside one, gives the scheduler its windows (sched::NodeWindow) and says when each
// maintenance step is due. It keeps no jobs and sends nothing: ClusterState carries out the steps
// (controller/state/cluster_state_reservations.cc).
//
// Not thread-safe: owned by ClusterState, on the state thread.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "cluster/topology.h"
#include "common/status.h"
#include "common/time.h"
#include "sched/snapshot.h"

namespace hangar::controller::reservation {

struct Reservation {
  std::string name;
  std::vector<uint32_t> nodes;  // node indices, sorted
  Time start = 0, end = 0;
  // Who may run jobs inside it (a job names it): these users, and the jobs of these queues.
  std::vector<std::string> users, queues;
  // A maintenance window: its nodes' jobs are checkpointed and requeued before it opens, its nodes
  // drain at the start and are validated after the end. It admits no jobs.
  bool maintenance = false;
  std::string created_by;
  Time created = 0;
  // Maintenance progress: opened (its nodes drained), and which nodes it drained itself (those an
  // operator had drained already stay drained after it).
  bool opened = false;
  std::vector<uint32_t> drained;
};

class ReservationBook;

// What `hangar reservation create` sends (POST /v1/reservations): {"name", "nodes" (a list or a
// host list such as "node-[1-4]"), "start" ("2027-01-04T10:00:00Z"), "end" or "duration" ("1h"),
// "users", "queues", "maintenance"}. Instead of "nodes": "count" N and "selector" (a leaf or spine
// switch, or "all", the default): `book` picks N nodes under one leaf switch inside it
// (ReservationBook::PickUnderOneLeaf).
StatusOr<Reservation> ParseRequest(const nlohmann::json& body, const cluster::Topology& topology,
                                   const ReservationBook* book = nullptr);
// The stored and shown form; FromStored reads it back (Restore).
nlohmann::json ToJson(const Reservation& r, const cluster::Topology& topology);
StatusOr<Reservation> FromStored(const nlohmann::json& j, const cluster::Topology& topology);

class ReservationBook {
 public:
  explicit ReservationBook(const cluster::Topology& topology) : topology_(&topology) {}

  // Adds `r`. InvalidArgument when its window is empty or already over; AlreadyExists for a name
  // in use; FailedPrecondition, naming the other, when it shares a node with another reservation
  // whose window overlaps its own.
  Status Add(Reservation r, Time now);
  // Puts back a stored reservation as it was (no checks but its name).
  void Restore(Reservation r);
  Status Remove(const std::string& name);
  const Reservation* Find(const std::string& name) const;
  Reservation* FindMutable(const std::string& name);
  const std::map<std::string, Reservation>& all() const { return by_name_; }
  bool empty() const { return by_name_.empty(); }

  // Ok when a job of `user` in `queue` may run inside reservation `name`; else NotFound or
  // PermissionDenied with a sentence saying what to do.
  Status MayUse(const std::string& name, const std::string& user, const std::string& queue) const;

  // The windows the scheduler sees (Snapshot::windows), rebuilt when the book changes, and the
  // index of reservation `name` among them (-1: none).
  std::span<const sched::NodeWindow> windows() const { return windows_; }
  int32_t WindowOf(const std::string& name) const;

  // The names of the reservations whose window has ended by `now`.
  std::vector<std::string> Ended(Time now) const;

  // `count` nodes under one leaf switch inside `selector` (a leaf or spine switch, or "all"), none
  // of them in another reservation whose window overlaps [start, end): the first such leaf in the
  // cluster's order, its first nodes. NotFound for an unknown switch; FailedPrecondition, saying
  // how many the fullest leaf has free, when no leaf has enough.
  StatusOr<std::vector<uint32_t>> PickUnderOneLeaf(const std::string& selector, int count,
                                                   Time start, Time end) const;

 private:
  void Rebuild();
  const cluster::Topology* topology_;
  std::map<std::string, Reservation> by_name_;
  std::vector<sched::NodeWindow> windows_;  // in by_name_'s order
};

}  // namespace hangar::controller::reservation
