#include "controller/service/service_explain.h"

#include <algorithm>
#include <cstdio>

namespace hangar::controller::service {
namespace {

std::string Targets(const AutoscaleSpec& a) {
  std::string out;
  if (a.in_flight_per_replica)
    out = std::to_string(a.in_flight_per_replica) + " requests in flight per replica";
  if (a.rps_per_replica) {
    if (!out.empty()) out += " and ";
    out += std::to_string(a.rps_per_replica) + " requests per second per replica";
  }
  return out;
}

// Why the service wants `desired` replicas, in a sentence.
std::string WhyCount(const Service& s, const std::optional<SlotTraffic>& traffic) {
  const AutoscaleSpec& a = s.Target().options.autoscale;
  if (s.deleting) return "it is being deleted: its replicas drain, then stop";
  if (!a.on) {
    return "its file (or `hangar service scale`) asks for " + std::to_string(s.desired) +
           " replicas";
  }
  std::string why = "autoscaled within " + std::to_string(a.min) + "-" + std::to_string(a.max) +
                    " on " + Targets(a);
  if (traffic) {
    why += "; now " + std::to_string(traffic->in_flight) + " requests in flight and " +
           std::to_string(traffic->rps) + " per second";
  } else {
    why += "; the load balancer has not been read yet";
  }
  why += "; last decision: " + (s.scale_note.empty()
                                    ? "none since it was created or this controller started (min " +
                                          std::to_string(a.min) + ")"
                                    : s.scale_note);
  return why;
}

// Why a wanted replica is not ready, or "" when it is (or is on its way out).
std::string WhyNotReady(const Replica& r, const std::map<uint64_t, JobWait>& jobs, Time now,
                        nlohmann::json* row) {
  if (r.removing) return "";
  switch (r.state) {
    case ReplicaState::kReady:
      return "";
    case ReplicaState::kPending: {
      auto j = jobs.find(r.job);
      if (j == jobs.end()) return "its job is being placed";
      (*row)["job_state"] = j->second.state;
      (*row)["rule"] = j->second.rule;
      (*row)["queue"] = j->second.queue;
      return "its job is " + j->second.state +
             (j->second.reason.empty() ? "" : ": " + j->second.reason) +
             (j->second.rule.empty() || j->second.rule == "none"
                  ? ""
                  : " [rule: " + j->second.rule + "]");
    }
    case ReplicaState::kBackoff:
      return r.why + " (restart " + std::to_string(r.restarts) + ", in " +
             FormatDuration(std::max<Duration>(0, r.restart_at - now)) + ")";
    default:
      return r.why;
  }
}

// The queue's quota in a sentence: what it is guaranteed and what it uses now.
std::string QuotaOf(const nlohmann::json& q) {
  const auto gpus = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  std::string out = "queue " + q.value("name", "") + ": guaranteed " +
                    gpus(q.value("guarantee_gpus", 0.0)) + " GPUs, " +
                    gpus(q.value("in_use_gpus", 0.0)) + " in use";
  if (q.value("borrowed_gpus", 0.0) > 0)
    out += " (" + gpus(q.value("borrowed_gpus", 0.0)) + " borrowed)";
  return out;
}

}  // namespace

nlohmann::json ExplainService(const Service& s, const std::optional<SlotTraffic>& traffic,
                              const std::map<uint64_t, JobWait>& jobs, Time now,
                              const nlohmann::json& queue) {
  int ready = 0, guaranteed = 0, opportunistic = 0;
  nlohmann::json waiting = nlohmann::json::array();
  for (const Replica& r : s.replicas) {
    ready += r.state == ReplicaState::kReady ? 1 : 0;
    if (r.removing) continue;
    (r.guaranteed ? guaranteed : opportunistic) += 1;
    nlohmann::json row = {{"replica", r.id},
                          {"job", r.job},
                          {"state", ReplicaStateName(r.state)},
                          {"tier", ReplicaTier(s, r)}};
    const std::string why = WhyNotReady(r, jobs, now, &row);
    if (why.empty()) continue;
    row["why"] = why;
    waiting.push_back(std::move(row));
  }
  const AutoscaleSpec& a = s.Target().options.autoscale;
  nlohmann::json scale = {{"autoscale", a.on}, {"last_decision", s.scale_note}};
  if (a.on) {
    scale["min"] = a.min;
    scale["max"] = a.max;
    scale["in_flight_per_replica"] = a.in_flight_per_replica;
    scale["rps_per_replica"] = a.rps_per_replica;
    scale["scale_down_after"] = FormatDuration(a.scale_down_after);
  }
  if (traffic) {
    scale["in_flight"] = traffic->in_flight;
    scale["rps"] = traffic->rps;
  }
  nlohmann::json out = {{"name", s.name},
                        {"desired", s.desired},
                        {"ready", ready},
                        {"why", WhyCount(s, traffic)},
                        {"scale", scale},
                        {"guaranteed", guaranteed},
                        {"opportunistic", opportunistic},
                        {"rollout", s.deleting ? "deleting" : s.Target().state},
                        {"revision", s.target},
                        {"message", s.Target().note},
                        {"waiting", waiting}};
  if (queue.is_object()) {
    out["queue"] = queue;
    out["quota"] = QuotaOf(queue);
  }
  return out;
}

std::string ExplainText(const nlohmann::json& e) {
  std::string out = "service " + e.value("name", "") + " wants " +
                    std::to_string(e.value("desired", 0)) + " replicas, " +
                    std::to_string(e.value("ready", 0)) + " ready: " + e.value("why", "") + "\n";
  const int opportunistic = e.value("opportunistic", 0);
  if (opportunistic > 0) {
    out += "  " + std::to_string(e.value("guaranteed", 0)) + " run in the template's tier, " +
           std::to_string(opportunistic) +
           " opportunistic (above min: guaranteed work may reclaim their GPUs)\n";
  }
  if (!e.value("quota", "").empty()) out += "  " + e.value("quota", "") + "\n";
  out += "  revision " + std::to_string(e.value("revision", 0)) + ": " + e.value("rollout", "");
  if (!e.value("message", "").empty()) out += " (" + e.value("message", "") + ")";
  out += "\n";
  for (const auto& w : e.value("waiting", nlohmann::json::array())) {
    out +=
        "  replica " + std::to_string(w.value("replica", 0)) +
        (w.value("job", uint64_t{0}) ? " (job " + std::to_string(w.value("job", uint64_t{0})) + ")"
                                     : std::string()) +
        " is " + w.value("state", "") + ": " + w.value("why", "") + "\n";
  }
  return out;
}

}  // namespace hangar::controller::service
