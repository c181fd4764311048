#include "controller/service/service_controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <future>

#include "common/net.h"
#include "controller/service/readiness_probe.h"
#include "controller/service/service_explain.h"
#include "job/job_spec.h"

namespace hangar::controller::service {
namespace {

constexpr const char* kTable = "service";
constexpr Duration kResyncEvery = 10 * kSecond;  // every server set again, against drift

BookOptions BookFrom(const ServiceControllerOptions& o) {
  BookOptions b;
  b.slots = o.lb.slots;
  b.first_port = o.first_port;
  b.last_port = o.last_port;
  if (o.ports_on_this_host) b.port_usable = [](int port) { return PortIsFree("127.0.0.1", port); };
  return b;
}

// The job a replica runs: the revision's template, named after the replica, with its port and
// identity in the environment.
StatusOr<job::JobSpec> ReplicaJob(const Service& s, const ReplicaStart& start) {
  HANGAR_ASSIGN_OR_RETURN(job::JobSpec spec, job::JobSpecFromJson(s.Find(start.revision)->replica));
  spec.name = s.name + "-" + std::to_string(start.replica);
  auto& env = spec.tasks[0].env;
  env.emplace_back("HANGAR_PORT", std::to_string(start.port));
  env.emplace_back("HANGAR_SERVICE", s.name);
  env.emplace_back("HANGAR_REPLICA", std::to_string(start.replica));
  env.emplace_back("HANGAR_REVISION", std::to_string(start.revision));
  if (start.opportunistic) spec.tier = job::Tier::kOpportunistic;
  return spec;
}

}  // namespace

StatusOr<std::pair<int, int>> ParsePortRange(const std::string& text) {
  const size_t dash = text.find('-');
  int lo = 0, hi = 0;
  const bool ok =
      dash != std::string::npos &&
      std::from_chars(text.data(), text.data() + dash, lo).ec == std::errc() &&
      std::from_chars(text.data() + dash + 1, text.data() + text.size(), hi).ec == std::errc();
  if (!ok || lo < 1024 || hi > 65535 || hi < lo) {
    return Status::InvalidArgument(
        "--service-ports '" + text +
        "' must be a range of ports such as 24000-28999 (above 1023, outside the nodes' "
        "ephemeral range)");
  }
  return std::make_pair(lo, hi);
}

ServiceController::ServiceController(StateOwner* owner, ServiceControllerOptions options,
                                     CommandProber* prober)
    : owner_(owner),
      options_(std::move(options)),
      lb_(options_.lb.admin),
      prober_(prober),
      book_(BookFrom(options_)) {}

ServiceController::~ServiceController() { Stop(); }

Time ServiceController::Now() const { return MonotonicNanos() / 1'000'000; }

Status ServiceController::Restore(const std::vector<KeyValueRow>& values) {
  MutexLock lock(mu_);
  for (const auto& v : values) {
    if (v.table != kTable) continue;
    auto j = nlohmann::json::parse(v.value, nullptr, false);
    if (j.is_discarded())
      return Status::FailedPrecondition("the stored service '" + v.key + "' is not JSON");
    HANGAR_RETURN_IF_ERROR(book_.Restore(j, Now()));
  }
  if (!book_.services().empty())
    spdlog::info("services: restored {} services", book_.services().size());
  return Status::Ok();
}

void ServiceController::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void ServiceController::Stop() {
  {
    MutexLock lock(wake_mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  probing_.clear();  // waits for the probes still out, each within its timeout
}

void ServiceController::Loop() {
  MutexLock lock(wake_mu_);
  while (!stopping_) {
    lock.Unlock();
    Tick();
    lock.Lock();
    lock.WaitFor(wake_, std::chrono::milliseconds(options_.tick),
                 [this]() HANGAR_REQUIRES(wake_mu_) { return stopping_; });
  }
}

// A round's table of contents: what became of the replicas' jobs, their readiness, what the load
// balancer says, then the book's round carried out.
void ServiceController::Tick() {
  if (owner_->stopping()) return;
  ObserveJobs();
  auto probed = RunDueProbes();
  auto stat = ReadLoadBalancer();
  MutexLock lock(mu_);
  for (const auto& [target, result] : probed) {
    if (result.unknown) {
      spdlog::debug("services: replica {} of {}: probe not run: {}", target.replica, target.service,
                    result.detail);
      continue;
    }
    book_.SeeProbe(target, result.passed, result.detail, Now());
  }
  if (stat) {
    book_.SeeSessions(ParseSessions(*stat));
    std::map<int, long> in_flight, rps;
    traffic_ = ParseTraffic(*stat);
    for (const auto& [slot, t] : traffic_) {
      in_flight[slot] = t.in_flight;
      rps[slot] = t.rps;
    }
    book_.SeeInFlight(std::move(in_flight));
    book_.SeeRequestRate(std::move(rps));
  }
  // Every server set again when HAProxy disagrees with what the last round left (it restarted,
  // or was changed by hand), after a failed command, and every kResyncEvery.
  const Time now = Now();
  if (stat && lb_in_sync_ && !LbAgrees(lb_set_, ParseStatus(*stat))) {
    spdlog::warn(
        "services: the load balancer's servers differ from the services' replicas; setting them "
        "again");
    lb_in_sync_ = false;
  }
  if (stat && (!lb_in_sync_ || now - last_resync_ >= kResyncEvery)) {
    lb_in_sync_ = true;
    last_resync_ = now;
    ApplyLb(book_.LbState());
  }
  Execute(book_.Round(now));
  lb_set_ = book_.LbState();
}

void ServiceController::ObserveJobs() {
  std::vector<std::tuple<std::string, int, uint64_t>> jobs;
  {
    MutexLock lock(mu_);
    jobs = book_.Jobs();
  }
  if (jobs.empty()) return;
  auto seen = owner_->Call<std::vector<JobSeen>>([&jobs](ClusterState& st, Effects*) {
    std::vector<JobSeen> out;
    for (const auto& [service, replica, id] : jobs) {
      auto j = st.GetJob(id);
      JobSeen s;
      if (j.ok()) {
        s.state = j->state;
        s.message = j->message;
        const std::string node = j->task_views.empty() ? "" : j->task_views[0].node;
        auto n = node.empty() ? StatusOr<api::NodeView>(Status::NotFound("")) : st.GetNode(node);
        s.address = n.ok() && !n->address.empty() ? n->address : node;
        if (auto where = st.LocateTask(id, 0); where.ok() && where->first == node) {
          s.node = where->first;
          s.task_id = where->second;
        }
      }
      out.push_back(std::move(s));
    }
    return out;
  });
  MutexLock lock(mu_);
  for (size_t i = 0; i < jobs.size(); ++i)
    book_.SeeJob(std::get<0>(jobs[i]), std::get<1>(jobs[i]), seen[i], Now());
}

std::vector<std::pair<ProbeTarget, ProbeResult>> ServiceController::RunDueProbes() {
  std::vector<ProbeTarget> due;
  {
    MutexLock lock(mu_);
    due = book_.DueProbes(Now());
  }
  // In parallel, off the lock: each is bounded by its own timeout.
  for (auto& p : due) {
    const bool busy = std::any_of(probing_.begin(), probing_.end(), [&p](const auto& x) {
      return x.first.service == p.service && x.first.replica == p.replica &&
             x.first.liveness == p.liveness;
    });
    if (busy) continue;  // the last one is still out: this interval's is skipped
    auto f = std::async(std::launch::async, [this, p] { return RunOne(p); });
    probing_.emplace_back(std::move(p), std::move(f));
  }
  std::vector<std::pair<ProbeTarget, ProbeResult>> out;
  for (auto it = probing_.begin(); it != probing_.end();) {
    if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ++it;
      continue;
    }
    out.emplace_back(std::move(it->first), it->second.get());
    it = probing_.erase(it);
  }
  return out;
}

ProbeResult ServiceController::RunOne(const ProbeTarget& p) const {
  if (p.probe.kind != ProbeSpec::Kind::kCommand) return RunProbe(p.address, p.port, p.probe);
  if (!prober_) return {false, "this controller runs no command probes (no agent channel)"};
  return prober_->Run(p.node, p.task_id, p.job, p.probe.command, p.probe.timeout);
}

std::optional<std::string> ServiceController::ReadLoadBalancer() {
  auto stat = lb_.Run("show stat");
  if (stat.ok() != lb_reachable_) {
    if (stat.ok())
      spdlog::info("services: the load balancer answers again at {}; setting every server",
                   lb_.admin());
    if (!stat.ok()) spdlog::warn("services: {}", stat.status().message());
    lb_reachable_ = stat.ok();
  }
  if (!stat.ok()) {
    lb_in_sync_ = false;
    return std::nullopt;
  }
  return *stat;
}

void ServiceController::Execute(const Plan& plan) {
  // Out of rotation before any job is told to stop.
  ApplyLb(plan.lb);
  if (plan.starts.empty() && plan.stops.empty() && plan.changed.empty() && plan.erased.empty() &&
      plan.events.empty())
    return;
  std::set<std::string> changed = plan.changed;
  // Call waits for the owner thread to run this: it runs while this thread holds mu_.
  Status stored = owner_->Call<Status>([&](ClusterState& st, Effects* fx) HANGAR_REQUIRES(mu_) {
    const Time wall = owner_->clock()->Now();
    for (const auto& stop : plan.stops) {
      if (Status s = st.Cancel(stop.job, wall, fx); !s.ok()) {
        spdlog::debug("services: replica {} of {}: job {}: {}", stop.replica, stop.service,
                      stop.job, s.message());
      }
    }
    for (const auto& start : plan.starts) {
      const Service* s = book_.Find(start.service);
      auto spec = ReplicaJob(*s, start);
      auto id = spec.ok() ? st.Submit(*spec, wall, fx) : StatusOr<sched::JobId>(spec.status());
      if (!id.ok()) {
        spdlog::error("services: cannot start replica {} of {}: {}", start.replica, start.service,
                      id.status().message());
        continue;
      }
      book_.Started(start.service, start.replica, *id);
      fx->Event(wall, "service", "service/" + start.service,
                "replica " + std::to_string(start.replica) + " (revision " +
                    std::to_string(start.revision) + ") runs as job " + std::to_string(*id));
      changed.insert(start.service);
    }
    for (const auto& [service, what] : plan.events)
      fx->Event(wall, "service", "service/" + service, what);
    for (const auto& name : changed) {
      if (book_.Find(name))
        fx->batch.values.push_back({kTable, name, book_.Record(name).dump(), false});
    }
    for (const auto& name : plan.erased) fx->batch.values.push_back({kTable, name, "", true});
    return Status::Ok();
  });
  if (!stored.ok()) spdlog::error("services: {}", stored.message());
}

void ServiceController::ApplyLb(const std::vector<LbChange>& changes) {
  for (const auto& c : changes) {
    if (Status s = lb_.Apply(c); !s.ok()) {
      if (s.code() != StatusCode::kUnavailable) spdlog::warn("services: {}", s.message());
      lb_in_sync_ = false;  // set every server again next round
    }
  }
}

Status ServiceController::Store(const std::set<std::string>& changed,
                                const std::set<std::string>& erased) {
  // Call waits for the owner thread to run this: it runs while this thread holds mu_.
  return owner_->Call<Status>([&](ClusterState&, Effects* fx) HANGAR_REQUIRES(mu_) {
    for (const auto& name : changed)
      fx->batch.values.push_back({kTable, name, book_.Record(name).dump(), false});
    for (const auto& name : erased) fx->batch.values.push_back({kTable, name, "", true});
    return Status::Ok();
  });
}

Status ServiceController::MayChange(const std::string& name, const std::string& user,
                                    bool admin) const {
  const Service* s = book_.Find(name);
  if (!s)
    return Status::NotFound("service '" + name +
                            "' does not exist; `hangar service list` lists them");
  if (!admin && s->user != user) {
    return Status::PermissionDenied("service " + name + " belongs to " + s->user +
                                    "; only they and admins change it");
  }
  return Status::Ok();
}

Status ServiceController::Create(const ServiceSpec& spec, const std::string& user) {
  MutexLock lock(mu_);
  HANGAR_RETURN_IF_ERROR(
      book_.Create(spec, job::JobSpecToJson(spec.replica), user, owner_->clock()->Now()));
  Status s = Store({spec.name}, {});
  lock.Unlock();
  wake_.notify_all();
  return s;
}

StatusOr<int> ServiceController::Update(const ServiceSpec& spec, const std::string& user,
                                        bool admin) {
  MutexLock lock(mu_);
  HANGAR_RETURN_IF_ERROR(MayChange(spec.name, user, admin));
  HANGAR_ASSIGN_OR_RETURN(
      int rev, book_.Update(spec, job::JobSpecToJson(spec.replica), owner_->clock()->Now()));
  HANGAR_RETURN_IF_ERROR(Store({spec.name}, {}));
  return rev;
}

Status ServiceController::Scale(const std::string& name, int replicas, const std::string& user,
                                bool admin) {
  MutexLock lock(mu_);
  HANGAR_RETURN_IF_ERROR(MayChange(name, user, admin));
  HANGAR_RETURN_IF_ERROR(book_.Scale(name, replicas));
  return Store({name}, {});
}

StatusOr<int> ServiceController::Rollback(const std::string& name, int revision,
                                          const std::string& user, bool admin) {
  MutexLock lock(mu_);
  HANGAR_RETURN_IF_ERROR(MayChange(name, user, admin));
  HANGAR_ASSIGN_OR_RETURN(int rev, book_.Rollback(name, revision, owner_->clock()->Now()));
  HANGAR_RETURN_IF_ERROR(Store({name}, {}));
  return rev;
}

Status ServiceController::Delete(const std::string& name, const std::string& user, bool admin) {
  MutexLock lock(mu_);
  HANGAR_RETURN_IF_ERROR(MayChange(name, user, admin));
  HANGAR_RETURN_IF_ERROR(book_.Delete(name));
  return Store({name}, {});
}

nlohmann::json ServiceController::List() const {
  MutexLock lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  const Time now = Now();
  for (const auto& [name, s] : book_.services()) {
    nlohmann::json v = ServiceBook::View(s, options_.lb.Endpoint(s.slot), now);
    v.erase("replicas");
    v.erase("revisions");
    AddTraffic(s.slot, &v);
    out.push_back(std::move(v));
  }
  return out;
}

StatusOr<nlohmann::json> ServiceController::Get(const std::string& name) const {
  MutexLock lock(mu_);
  const Service* s = book_.Find(name);
  if (!s)
    return Status::NotFound("service '" + name +
                            "' does not exist; `hangar service list` lists them");
  nlohmann::json v = ServiceBook::View(*s, options_.lb.Endpoint(s->slot), Now());
  AddTraffic(s->slot, &v);
  return v;
}

void ServiceController::AddTraffic(int slot, nlohmann::json* view) const {
  auto t = traffic_.find(slot);
  if (t == traffic_.end()) return;
  (*view)["traffic"] = {{"requests", t->second.requests},
                        {"errors_5xx", t->second.errors_5xx},
                        {"in_flight", t->second.in_flight},
                        {"requests_per_second", t->second.rps}};
}

std::string ServiceController::RenderMetrics() const {
  MutexLock lock(mu_);
  if (book_.services().empty()) return "";
  std::string replicas, requests, errors, in_flight;
  for (const auto& [name, s] : book_.services()) {
    int ready = 0;
    for (const auto& r : s.replicas) ready += r.state == ReplicaState::kReady ? 1 : 0;
    const std::string label = "service=\"" + name + "\"";  // names are [a-z0-9-]
    replicas += "hangar_service_replicas{" + label + ",kind=\"desired\"} " +
                std::to_string(s.desired) + "\n";
    replicas +=
        "hangar_service_replicas{" + label + ",kind=\"ready\"} " + std::to_string(ready) + "\n";
    auto t = traffic_.find(s.slot);
    if (t == traffic_.end()) continue;
    requests +=
        "hangar_service_requests_total{" + label + "} " + std::to_string(t->second.requests) + "\n";
    errors += "hangar_service_responses_5xx_total{" + label + "} " +
              std::to_string(t->second.errors_5xx) + "\n";
    in_flight += "hangar_service_requests_in_flight{" + label + "} " +
                 std::to_string(t->second.in_flight) + "\n";
  }
  std::string out =
      "# HELP hangar_service_replicas Replicas of each service: desired, and ready (in rotation).\n"
      "# TYPE hangar_service_replicas gauge\n" +
      replicas;
  if (!requests.empty()) {
    out +=
        "# HELP hangar_service_requests_total Requests through the service's endpoint (HAProxy's "
        "count).\n"
        "# TYPE hangar_service_requests_total counter\n" +
        requests +
        "# HELP hangar_service_responses_5xx_total 5xx answers at the service's endpoint "
        "(HAProxy's count).\n"
        "# TYPE hangar_service_responses_5xx_total counter\n" +
        errors +
        "# HELP hangar_service_requests_in_flight Requests at the service's replicas or queued for "
        "one.\n"
        "# TYPE hangar_service_requests_in_flight gauge\n" +
        in_flight;
  }
  return out;
}

StatusOr<nlohmann::json> ServiceController::Explain(const std::string& name) const {
  std::optional<Service> copy;
  std::optional<SlotTraffic> traffic;
  {
    MutexLock lock(mu_);
    if (const Service* s = book_.Find(name)) copy = *s;
    if (copy) {
      if (auto t = traffic_.find(copy->slot); t != traffic_.end()) traffic = t->second;
    }
  }
  if (!copy)
    return Status::NotFound("service '" + name +
                            "' does not exist; `hangar service list` lists them");
  // The scheduler's word on each replica job that waits, and the replicas' queue's share.
  const std::string queue = copy->Target().replica.value("queue", std::string("default"));
  nlohmann::json row;
  const Time wall = owner_->clock()->Now();
  auto jobs = owner_->Call<std::map<uint64_t, JobWait>>([&](ClusterState& st, Effects*) {
    std::map<uint64_t, JobWait> out;
    for (const Replica& r : copy->replicas) {
      if (!r.job || r.state != ReplicaState::kPending) continue;
      if (auto j = st.GetJob(r.job); j.ok())
        out[r.job] = {j->state, j->reason, j->reason_rule, j->queue};
    }
    for (const auto& q : st.ShareJson(wall).value("queues", nlohmann::json::array())) {
      if (q.value("name", "") == queue) row = q;
    }
    return out;
  });
  return ExplainService(*copy, traffic, jobs, Now(), row);
}

std::optional<std::string> ServiceController::OwnerOf(uint64_t job) const {
  MutexLock lock(mu_);
  for (const auto& [name, s] : book_.services()) {
    for (const Replica& r : s.replicas) {
      if (r.job == job) return name;
    }
  }
  return std::nullopt;
}

StatusOr<nlohmann::json> ServiceController::Endpoints(const std::string& name) const {
  MutexLock lock(mu_);
  const Service* s = book_.Find(name);
  if (!s)
    return Status::NotFound("service '" + name +
                            "' does not exist; `hangar service list` lists them");
  nlohmann::json ready = nlohmann::json::array();
  for (const auto& r : s->replicas) {
    if (r.state != ReplicaState::kReady) continue;
    ready.push_back({{"replica", r.id},
                     {"revision", r.revision},
                     {"address", r.address + ":" + std::to_string(r.port)}});
  }
  return nlohmann::json{
      {"name", name}, {"endpoint", options_.lb.Endpoint(s->slot)}, {"ready", ready}};
}

}  // namespace hangar::controller::service
