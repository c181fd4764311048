// ClusterState: reservations and maintenance windows (docs/reservations.md). The book
// (controller/reservation/) holds them and gives the scheduler its windows; here they are
// stored, listed, and a maintenance window's steps are carried out on the jobs and nodes.
#include "controller/state/cluster_state.h"

namespace hangar::controller {

namespace {
// A checkpoint grace longer than this is signalled this long before a window: the book is scanned
// for jobs to signal only this close to a window's start.
constexpr Duration kMaxCheckpointLead = kDay;

std::string DrainReason(const reservation::Reservation& r) {
  return "maintenance window " + r.name + " until " + FormatUtcTimestamp(r.end);
}
}  // namespace

void ClusterState::PersistReservation(const reservation::Reservation& r, Effects* fx) const {
  fx->batch.values.push_back(
      {"reservation", r.name, reservation::ToJson(r, *topology_).dump(), false});
}

void ClusterState::RestoreReservation(const KeyValueRow& row) {
  auto j = nlohmann::json::parse(row.value, nullptr, false);
  if (j.is_discarded()) return;
  auto r = reservation::FromStored(j, *topology_);
  if (r.ok()) reservations_.Restore(std::move(*r));
}

StatusOr<nlohmann::json> ClusterState::CreateReservation(const Principal& p,
                                                         const nlohmann::json& body, Time now,
                                                         Effects* fx) {
  HANGAR_ASSIGN_OR_RETURN(reservation::Reservation r,
                          reservation::ParseRequest(body, *topology_, &reservations_));
  r.created_by = p.user;
  r.created = now;
  for (const std::string& q : r.queues) {
    if (queues_.tree().FindLeaf(q) < 0) {
      return Status::NotFound("queue '" + q + "' does not exist; `hangar queues` lists them");
    }
  }
  const std::string name = r.name;
  HANGAR_RETURN_IF_ERROR(reservations_.Add(std::move(r), now));
  const reservation::Reservation& added = *reservations_.Find(name);
  PersistReservation(added, fx);
  fx->Event(now, "reservation", "reservation/" + name,
            std::string(added.maintenance ? "maintenance window" : "reservation") + " booked by " +
                p.user + ": " + std::to_string(added.nodes.size()) + " node(s) from " +
                FormatUtcTimestamp(added.start) + " to " + FormatUtcTimestamp(added.end));
  dirty_ = true;
  return reservation::ToJson(added, *topology_);
}

Status ClusterState::DeleteReservation(const std::string& name, const Principal& p, Time now,
                                       Effects* fx) {
  if (!reservations_.Find(name)) {
    return Status::NotFound("reservation '" + name +
                            "' does not exist; `hangar reservation list` shows them");
  }
  EndReservation(name, "deleted by " + p.user, now, fx);
  return Status::Ok();
}

nlohmann::json ClusterState::ReservationsJson(Time now) const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, r] : reservations_.all()) {
    nlohmann::json j = reservation::ToJson(r, *topology_);
    j["state"] = now < r.start ? "scheduled" : "open";
    out.push_back(std::move(j));
  }
  return {{"reservations", out}};
}

void ClusterState::AdvanceReservations(Time now, Effects* fx) {
  if (reservations_.empty()) return;
  for (const std::string& name : reservations_.Ended(now))
    EndReservation(name, "its window ended", now, fx);
  std::vector<std::string> names;
  for (const auto& [name, r] : reservations_.all()) names.push_back(name);
  for (const std::string& name : names) {
    reservation::Reservation& r = *reservations_.FindMutable(name);
    if (r.opened || now + kMaxCheckpointLead < r.start) continue;
    if (r.maintenance) CheckpointBeforeWindow(r, now, fx);
    if (now < r.start) continue;
    if (r.maintenance) {
      OpenMaintenance(r, now, fx);
    } else {
      r.opened = true;
      fx->Event(now, "reservation", "reservation/" + name,
                "opened: its nodes take only its jobs until " + FormatUtcTimestamp(r.end));
    }
    PersistReservation(r, fx);
    dirty_ = true;  // its jobs may start, others may not
  }
}

// A job still running on the window's nodes at its start gets the checkpoint signal early enough
// that its grace, and the stop after it, end by then; it is requeued, whole, to run elsewhere.
void ClusterState::CheckpointBeforeWindow(const reservation::Reservation& r, Time now,
                                          Effects* fx) {
  std::vector<uint8_t> in(topology_->nodes().size(), 0);
  for (uint32_t n : r.nodes) in[n] = 1;
  std::vector<sched::JobId> due;
  for (sched::JobId id : jobs_.active()) {
    const JobRecord& j = jobs_.at(id);
    const job::JobSpec& s = j.spec->spec;
    const Time start = j.started ? j.started : now;
    if (s.time_limit > 0 && start + s.time_limit <= r.start) continue;  // ends before it opens
    if (now < r.start - (s.checkpoint.grace + options_.stop_grace)) continue;
    for (const auto& t : j.tasks) {
      if (t.phase != TaskRun::Phase::kEnded && in[t.node]) {
        due.push_back(id);
        break;
      }
    }
  }
  for (sched::JobId id : due) {
    JobRecord& j = jobs_.at(id);
    if (job::IsFinal(j.state)) continue;
    const std::string why = "maintenance window " + r.name + " opens at " +
                            FormatUtcTimestamp(r.start) +
                            " on its nodes: checkpointed and requeued";
    fx->Event(now, "job", "job/" + std::to_string(id), why);
    Requeue(j, why, now, fx);  // the checkpoint signal first, then its grace
  }
}

void ClusterState::OpenMaintenance(reservation::Reservation& r, Time now, Effects* fx) {
  for (uint32_t n : r.nodes) {
    if (nodes_[n].drained) continue;  // an operator's drain stays the operator's
    if (Drain(topology_->nodes()[n].name, DrainReason(r), now, fx).ok()) r.drained.push_back(n);
  }
  r.opened = true;
  health_pass_.Touch();
  fx->Event(now, "reservation", "reservation/" + r.name,
            "maintenance window opened: " + std::to_string(r.drained.size()) +
                " node(s) drained until " + FormatUtcTimestamp(r.end));
}

void ClusterState::EndReservation(const std::string& name, const std::string& why, Time now,
                                  Effects* fx) {
  const reservation::Reservation* r = reservations_.Find(name);
  if (!r) return;
  // The nodes it drained come back through validation (health: quarantined -> pending validation).
  for (uint32_t n : r->drained) {
    if (nodes_[n].drained && nodes_[n].drain_reason == DrainReason(*r)) {
      (void)Undrain(topology_->nodes()[n].name, now, fx);
    }
  }
  fx->Event(now, "reservation", "reservation/" + name,
            std::string(r->maintenance ? "maintenance window" : "reservation") + " ended: " + why +
                (r->drained.empty() ? "" : "; its nodes return to service once validated"));
  fx->batch.values.push_back({"reservation", name, "", true});
  (void)reservations_.Remove(name);
  dirty_ = true;
}

}  // namespace hangar::controller
