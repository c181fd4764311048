// ServiceBook's stored records and API views (service_book.h).
#include "controller/service/service_book.h"

namespace hangar::controller::service {
namespace {

std::optional<ReplicaState> ParseReplicaState(const std::string& s) {
  for (auto st : {ReplicaState::kPending, ReplicaState::kStarting, ReplicaState::kReady,
                  ReplicaState::kDraining, ReplicaState::kStopping, ReplicaState::kBackoff,
                  ReplicaState::kGone}) {
    if (ReplicaStateName(st) == s) return st;
  }
  return std::nullopt;
}

nlohmann::json RevisionJson(const Revision& r) {
  return {{"revision", r.number}, {"options", ServiceOptionsToJson(r.options)},
          {"replica", r.replica}, {"created_ms", r.created},
          {"state", r.state},     {"note", r.note},
          {"good", r.good}};
}

}  // namespace

nlohmann::json ServiceBook::Record(const std::string& name) const {
  const Service* s = Find(name);
  if (!s) return nullptr;
  nlohmann::json revisions = nlohmann::json::array(), replicas = nlohmann::json::array();
  for (const auto& r : s->revisions) revisions.push_back(RevisionJson(r));
  for (const auto& r : s->replicas) {
    replicas.push_back({{"id", r.id},
                        {"revision", r.revision},
                        {"job", r.job},
                        {"port", r.port},
                        {"server", r.server},
                        {"address", r.address},
                        {"state", ReplicaStateName(r.state)},
                        {"removing", r.removing},
                        {"relaunch", r.relaunch},
                        {"restarts", r.restarts},
                        {"crashes", r.crashes},
                        {"ever_ready", r.ever_ready},
                        {"guaranteed", r.guaranteed}});
  }
  return {{"name", s->name},         {"user", s->user},
          {"slot", s->slot},         {"desired", s->desired},
          {"target", s->target},     {"last_good", s->last_good},
          {"deleting", s->deleting}, {"next_replica", s->next_replica},
          {"revisions", revisions},  {"replicas", replicas}};
}

Status ServiceBook::Restore(const nlohmann::json& j, Time now) {
  const Status bad = Status::FailedPrecondition(
      "a stored service record cannot be read; remove it from the store's service "
      "table or restore a backup");
  try {
    Service s;
    s.name = j.at("name").get<std::string>();
    s.user = j.at("user").get<std::string>();
    s.slot = j.at("slot").get<int>();
    s.desired = j.at("desired").get<int>();
    s.target = j.at("target").get<int>();
    s.last_good = j.at("last_good").get<int>();
    s.deleting = j.at("deleting").get<bool>();
    s.next_replica = j.at("next_replica").get<int>();
    for (const auto& r : j.at("revisions")) {
      HANGAR_ASSIGN_OR_RETURN(ServiceOptions o, ServiceOptionsFromJson(r.at("options")));
      s.revisions.push_back({r.at("revision").get<int>(), o, r.at("replica"),
                             r.at("created_ms").get<Time>(), r.at("state").get<std::string>(),
                             r.at("note").get<std::string>(), r.at("good").get<bool>()});
    }
    if (!s.Find(s.target)) return bad;
    for (const auto& r : j.at("replicas")) {
      Replica x;
      x.id = r.at("id").get<int>();
      x.revision = r.at("revision").get<int>();
      x.job = r.at("job").get<uint64_t>();
      x.port = r.at("port").get<int>();
      x.server = r.at("server").get<int>();
      x.address = r.at("address").get<std::string>();
      auto st = ParseReplicaState(r.at("state").get<std::string>());
      if (!st || !s.Find(x.revision)) return bad;
      x.state = *st;
      x.removing = r.at("removing").get<bool>();
      x.restarts = r.at("restarts").get<uint32_t>();
      x.crashes = r.at("crashes").get<int>();
      x.ever_ready = r.at("ever_ready").get<bool>();
      x.guaranteed = r.value("guaranteed", true);
      x.relaunch = r.value("relaunch", false);
      // Timers restart now: the clock they ran on was another process's. Liveness resumes at
      // once for a replica that was ready, after its initial delay for one still starting.
      x.since = x.started = x.next_probe = x.restart_at = now;
      const auto& live = s.Find(x.revision)->options.liveness;
      x.live_from = x.next_live_probe =
          now + (x.state == ReplicaState::kReady || !live ? 0 : live->initial_delay);
      x.why = "restored by this controller";
      s.replicas.push_back(std::move(x));
    }
    services_[s.name] = std::move(s);
  } catch (const nlohmann::json::exception&) {
    return bad;
  }
  return Status::Ok();
}

std::string ReplicaTier(const Service& s, const Replica& r) {
  if (!r.guaranteed) return "opportunistic";
  const Revision* rev = s.Find(r.revision);
  const std::string tier = rev ? rev->replica.value("tier", "") : "";
  return tier.empty() ? "guaranteed" : tier;
}

nlohmann::json ServiceBook::View(const Service& s, const std::string& endpoint, Time now) {
  nlohmann::json revisions = nlohmann::json::array(), replicas = nlohmann::json::array();
  for (const auto& r : s.revisions) {
    nlohmann::json v = RevisionJson(r);
    v.erase("options");
    v["image"] = r.replica["tasks"][0].value("image", "");
    v["command"] = r.replica["tasks"][0].value("command", nlohmann::json::array());
    revisions.push_back(std::move(v));
  }
  int ready = 0;
  for (const auto& r : s.replicas) {
    ready += r.state == ReplicaState::kReady ? 1 : 0;
    replicas.push_back(
        {{"id", r.id},
         {"revision", r.revision},
         {"job", r.job},
         {"state", ReplicaStateName(r.state)},
         {"address", r.address.empty() ? "" : r.address + ":" + std::to_string(r.port)},
         {"restarts", r.restarts},
         {"why", r.why},
         {"for_ms", now - r.since},
         {"tier", ReplicaTier(s, r)}});
  }
  const Revision& t = s.Target();
  std::string rollout = t.state;
  if (s.deleting) rollout = "deleting";
  return {{"name", s.name},           {"user", s.user},
          {"endpoint", endpoint},     {"desired", s.desired},
          {"ready", ready},           {"revision", s.target},
          {"last_good", s.last_good}, {"rollout", rollout},
          {"message", t.note},        {"revisions", revisions},
          {"replicas", replicas},     {"options", ServiceOptionsToJson(t.options)},
          {"scale", s.scale_note}};
}

}  // namespace hangar::controller::service
