#include "controller/service/service_book.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "job/job_spec.h"

namespace hangar::controller::service {
namespace {

ServiceSpec Spec(
    const std::string& name, int replicas, const std::string& command = "serve",
    const std::string& update = "{max_surge: 1, max_unavailable: 0, progress_deadline: 10s}") {
  auto s = ParseServiceSpec(
      "name: " + name + "\nservice: {replicas: " + std::to_string(replicas) +
          ", restart: {backoff: 1s, max_backoff: 4s}, readiness: {http: /ready, interval: 100ms}, "
          "update: " +
          update + ", drain_grace: 5s}\ntasks: [{cpu: 1, command: [" + command + "]}]\n",
      "test");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

// The world around the book: jobs the daemon would run, and the load balancer's servers.
class World {
 public:
  World() : book_(BookOptions{2, 30000, 30099, nullptr}) {}
  explicit World(BookOptions options) : book_(std::move(options)) {}

  ServiceBook& book() { return book_; }
  Time now() const { return now_; }

  // One round: observe every job, run the probes that are due (passing when `ready` says so),
  // then carry out the plan.
  Plan Round(const std::function<bool(int revision)>& ready = [](int) { return true; }) {
    for (const auto& [service, replica, job] : book_.Jobs())
      book_.SeeJob(service, replica, {jobs_[job], "10.0.0.1", "n1", TaskOf(job), messages_[job]},
                   now_);
    for (const auto& p : book_.DueProbes(now_)) {
      const Replica* r = Find(p.service, p.replica);
      probed_.push_back(p);
      if (p.liveness) {
        book_.SeeProbe(p, alive(p.replica), "the command exited with 1", now_);
      } else {
        book_.SeeProbe(p, ready(r->revision), "refused", now_);
      }
    }
    std::map<std::pair<int, int>, int> sessions;
    for (const auto& [key, op] : lb_) sessions[key] = in_flight_.count(key) ? in_flight_[key] : 0;
    book_.SeeSessions(sessions);
    book_.SeeInFlight(in_flight_by_slot_);
    book_.SeeRequestRate(rps_by_slot_);
    Plan plan = book_.Round(now_);
    for (const auto& [service, what] : plan.events) events_.push_back(service + ": " + what);
    for (const auto& c : plan.lb) {
      lb_[{c.slot, c.server}] = c.op;
      log_.push_back("lb " + std::to_string(c.server) + " " +
                     std::to_string(static_cast<int>(c.op)));
    }
    for (const auto& s : plan.stops) {
      // Only a server out of rotation may be stopped.
      const Service* svc = book_.Find(s.service);
      for (const auto& [key, op] : lb_) {
        const Replica* r = Find(s.service, s.replica);
        if (svc && r && key == std::make_pair(svc->slot, r->server)) {
          EXPECT_EQ(op, LbChange::Op::kDisable)
              << "replica " << s.replica << " stopped while in rotation";
        }
      }
      jobs_[s.job] = "cancelled";
      ++stops_;
    }
    for (const auto& s : plan.starts) {
      ++starts_;
      if (s.opportunistic) ++opportunistic_starts_;
      const uint64_t job = next_job_++;
      jobs_[job] = start_as_.empty() ? "pending" : start_as_;
      messages_[job] = start_message_;
      book_.Started(s.service, s.replica, job);
    }
    for (auto& [job, state] : jobs_) {
      if (state == "pending") state = "running";  // placed by the next round
    }
    now_ += 100;
    return plan;
  }
  void RunFor(
      Duration d, const std::function<bool(int)>& ready = [](int) { return true; }) {
    for (Time end = now_ + d; now_ < end;) {
      Round(ready);
      Check();
    }
  }
  const Replica* Find(const std::string& service, int id) {
    const Service* s = book_.Find(service);
    for (const auto& r : s->replicas) {
      if (r.id == id) return &r;
    }
    return nullptr;
  }
  int Count(const std::string& service, ReplicaState st, int revision = 0) {
    int n = 0;
    for (const auto& r : book_.Find(service)->replicas)
      n += r.state == st && (!revision || r.revision == revision);
    return n;
  }
  int InRotation() const {
    int n = 0;
    for (const auto& [key, op] : lb_) n += op == LbChange::Op::kEnable;
    return n;
  }
  void Kill(uint64_t job) { jobs_[job] = "failed"; }
  void SetJob(uint64_t job, const std::string& state) { jobs_[job] = state; }
  LbChange::Op Server(int slot, int server) { return lb_[{slot, server}]; }
  static std::string TaskOf(uint64_t job) { return std::to_string(job) + ".0.0"; }
  // Called after every round; a test sets it to assert an invariant throughout.
  std::function<void()> Check = [] {};
  // Whether a replica's liveness probe passes.
  std::function<bool(int replica)> alive = [](int) { return true; };
  std::vector<ProbeTarget> probed_;
  std::vector<std::string> events_;
  std::map<int, long> rps_by_slot_;
  int starts_ = 0;
  int stops_ = 0;
  int opportunistic_starts_ = 0;
  std::map<std::pair<int, int>, int> in_flight_;
  std::map<int, long> in_flight_by_slot_;
  // Set: every job started from now on is seen in this state, with this message (a replica
  // whose task cannot start at all).
  std::string start_as_, start_message_;

 private:
  ServiceBook book_;
  Time now_ = 1'000'000;
  uint64_t next_job_ = 1;
  std::map<uint64_t, std::string> jobs_;
  std::map<uint64_t, std::string> messages_;  // each job's message (JobSeen::message)
  std::map<std::pair<int, int>, LbChange::Op> lb_;
  std::vector<std::string> log_;
};

nlohmann::json Json(const ServiceSpec& s) { return job::JobSpecToJson(s.replica); }

TEST(ServiceBookTest, ReplicasJoinRotationOnlyOnceReady) {
  World w;
  const auto spec = Spec("echo", 3);
  ASSERT_TRUE(w.book().Create(spec, Json(spec), "alice", 0).ok());
  w.RunFor(1000, [](int) { return false; });
  EXPECT_EQ(w.Count("echo", ReplicaState::kStarting), 3);
  EXPECT_EQ(w.InRotation(), 0);
  w.RunFor(500);
  EXPECT_EQ(w.Count("echo", ReplicaState::kReady), 3);
  EXPECT_EQ(w.InRotation(), 3);
  EXPECT_EQ(w.book().Find("echo")->Target().state, "complete");
  // Each replica has its own port and server.
  std::set<int> ports, servers;
  for (const auto& r : w.book().Find("echo")->replicas)
    ports.insert(r.port), servers.insert(r.server);
  EXPECT_EQ(ports.size(), 3u);
  EXPECT_EQ(servers.size(), 3u);
}

TEST(ServiceBookTest, ACrashedReplicaLeavesRotationAndRestartsAfterABackOffThatDoubles) {
  World w;
  const auto spec = Spec("echo", 2);
  ASSERT_TRUE(w.book().Create(spec, Json(spec), "alice", 0).ok());
  w.RunFor(1000);
  const Replica first = w.book().Find("echo")->replicas[0];
  w.Kill(first.job);
  w.Round();
  EXPECT_EQ(w.Find("echo", first.id)->state, ReplicaState::kBackoff);
  EXPECT_EQ(w.InRotation(), 1);
  w.RunFor(800);  // back-off is 1 s
  EXPECT_EQ(w.Find("echo", first.id)->state, ReplicaState::kBackoff);
  w.RunFor(700);
  EXPECT_EQ(w.Find("echo", first.id)->state, ReplicaState::kReady);
  EXPECT_EQ(w.Find("echo", first.id)->restarts, 1u);
  EXPECT_NE(w.Find("echo", first.id)->job, first.job);
  // Crashing before it is ever ready again: 1 s, then 2 s (crashes in a row double the wait).
  w.Kill(w.Find("echo", first.id)->job);
  w.RunFor(1100, [](int) { return false; });
  w.Kill(w.Find("echo", first.id)->job);
  w.Round();
  const Time backoff = w.Find("echo", first.id)->restart_at - w.now() + 100;
  EXPECT_EQ(backoff, 2000);
}

// Found in services_e2e: a replica restarted for failing its liveness probe was started on its
// old port while the stopped process still held it, failed to bind and crashed again.
TEST(ServiceBookTest, AReplicaRestartedWhileItsOldProcessHoldsItsPortTakesAnother) {
  std::set<int> held;
  World w(BookOptions{2, 30000, 30099, [&](int port) { return !held.count(port); }});
  const auto spec = Spec("echo", 1, "v1");
  ASSERT_TRUE(w.book().Create(spec, Json(spec), "alice", 0).ok());
  w.RunFor(1000);
  const Replica first = w.book().Find("echo")->replicas[0];
  ASSERT_EQ(first.state, ReplicaState::kReady);
  held.insert(first.port);  // its process has not let go of it yet
  w.Kill(first.job);
  w.RunFor(1500);
  const Replica* again = w.Find("echo", first.id);
  ASSERT_EQ(again->state, ReplicaState::kReady);
  EXPECT_NE(again->port, first.port);
  EXPECT_EQ(again->restarts, 1u);
}

TEST(ServiceBookTest, ARollingUpdateStaysWithinSurgeAndUnavailabilityAndDrainsBeforeStopping) {
  World w;
  const auto v1 = Spec("echo", 3, "v1");
  ASSERT_TRUE(w.book().Create(v1, Json(v1), "alice", 0).ok());
  w.RunFor(1000);
  const auto v2 = Spec("echo", 3, "v2");
  auto rev = w.book().Update(v2, Json(v2), 0);
  ASSERT_TRUE(rev.ok());
  EXPECT_EQ(*rev, 2);
  int most = 0;
  w.Check = [&] {
    int ready = w.Count("echo", ReplicaState::kReady), live = 0;
    for (const auto& r : w.book().Find("echo")->replicas) {
      live += !r.removing && r.state != ReplicaState::kGone;
    }
    EXPECT_GE(ready, 3) << "fewer ready than replicas - max_unavailable";
    EXPECT_GE(w.InRotation(), 3);
    most = std::max(most, live);
  };
  w.RunFor(5000);
  EXPECT_LE(most, 4) << "more than replicas + max_surge";
  EXPECT_EQ(w.Count("echo", ReplicaState::kReady, 2), 3);
  EXPECT_EQ(w.book().Find("echo")->replicas.size(), 3u);
  EXPECT_EQ(w.book().Find("echo")->last_good, 2);
  EXPECT_EQ(w.stops_, 3);
}

TEST(ServiceBookTest, ADrainingReplicaIsStoppedOnlyOnceItsRequestsEnd) {
  World w;
  const auto spec = Spec("echo", 2);
  ASSERT_TRUE(w.book().Create(spec, Json(spec), "alice", 0).ok());
  w.RunFor(1000);
  const Service* s = w.book().Find("echo");
  const Replica newest = s->replicas[1];
  w.in_flight_[{s->slot, newest.server}] = 2;
  ASSERT_TRUE(w.book().Scale("echo", 1).ok());
  w.RunFor(2000);
  EXPECT_EQ(w.Find("echo", newest.id)->state, ReplicaState::kDraining);
  EXPECT_EQ(w.stops_, 0);
  w.in_flight_[{s->slot, newest.server}] = 0;
  w.RunFor(300);
  EXPECT_EQ(w.stops_, 1);
  EXPECT_EQ(w.Find("echo", newest.id), nullptr);
}

TEST(ServiceBookTest, ARevisionThatNeverBecomesReadyStopsTheRolloutAndRollbackRestoresTheLastGood) {
  World w;
  const auto v1 = Spec("echo", 3, "v1");
  ASSERT_TRUE(w.book().Create(v1, Json(v1), "alice", 0).ok());
  w.RunFor(1000);
  const auto v2 = Spec("echo", 3, "broken");
  ASSERT_TRUE(w.book().Update(v2, Json(v2), 0).ok());
  auto only_v1 = [](int revision) { return revision == 1; };
  w.Check = [&] {
    EXPECT_EQ(w.Count("echo", ReplicaState::kReady, 1), 3) << "an old replica left rotation";
  };
  w.RunFor(12'000, only_v1);
  const Service* s = w.book().Find("echo");
  EXPECT_EQ(s->Target().state, "failed");
  EXPECT_NE(s->Target().note.find("not ready"), std::string::npos) << s->Target().note;
  EXPECT_EQ(
      w.Count("echo", ReplicaState::kStarting, 2) + w.Count("echo", ReplicaState::kPending, 2), 0)
      << "the broken revision's replicas are stopped";
  auto back = w.book().Rollback("echo", 0, 0);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, 3);
  w.RunFor(2000, only_v1);
  s = w.book().Find("echo");
  EXPECT_EQ(s->Target().state, "complete");
  EXPECT_EQ(s->Target().note, "rollback to revision 1");
  EXPECT_EQ(w.Count("echo", ReplicaState::kReady), 3);
}

TEST(ServiceBookTest, AnUpdateOfTheServiceBlockOnlyKeepsTheReplicasAndGovernsThem) {
  World w;
  const auto v1 = Spec("echo", 2);
  ASSERT_TRUE(w.book().Create(v1, Json(v1), "alice", 0).ok());
  w.RunFor(1000);
  auto v2 = v1;
  v2.options.restart.backoff = 3000;
  v2.options.restart.max_backoff = 3000;
  ASSERT_TRUE(w.book().Update(v2, Json(v2), 0).ok());
  w.RunFor(1000);
  EXPECT_EQ(w.stops_, 0) << "the same replica spec: nothing to replace";
  EXPECT_EQ(w.book().Find("echo")->Target().state, "complete");
  const Replica r = w.book().Find("echo")->replicas[0];
  EXPECT_EQ(r.revision, 1);
  w.Kill(r.job);
  w.Round();
  EXPECT_EQ(w.Find("echo", r.id)->restart_at - w.now() + 100, 3000)
      << "the new revision's back-off";
}

ServiceSpec Autoscaled(const std::string& name) {
  auto s = ParseServiceSpec(
      "name: " + name +
          "\nservice: {autoscale: {min: 1, max: 4, in_flight_per_replica: 2, "
          "scale_down_after: 3s}, readiness: {tcp: HANGAR_PORT, interval: 100ms}}\n"
          "tasks: [{cpu: 1, command: [serve]}]\n",
      "test");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

TEST(ServiceBookTest, AutoscalingGoesUpAtOnceAndDownOnlyAfterItsWindowOpportunisticFirst) {
  World w;
  const auto spec = Autoscaled("echo");
  ASSERT_TRUE(w.book().Create(spec, Json(spec), "alice", 0).ok());
  const int slot = w.book().Find("echo")->slot;
  w.in_flight_by_slot_[slot] = 0;
  w.RunFor(1000);
  EXPECT_EQ(w.Count("echo", ReplicaState::kReady), 1);
  w.in_flight_by_slot_[slot] = 7;  // 2 per replica wanted: 4
  w.RunFor(1000);
  EXPECT_EQ(w.book().Find("echo")->desired, 4);
  EXPECT_EQ(w.Count("echo", ReplicaState::kReady), 4);
  EXPECT_EQ(w.opportunistic_starts_, 3) << "the replicas above min are opportunistic";
  w.in_flight_by_slot_[slot] = 20;  // never above max
  w.RunFor(500);
  EXPECT_EQ(w.book().Find("echo")->desired, 4);
  w.in_flight_by_slot_[slot] = 0;
  w.RunFor(2500);
  EXPECT_EQ(w.book().Find("echo")->desired, 4) << "down only once the whole window agrees";
  w.RunFor(1500);
  EXPECT_EQ(w.book().Find("echo")->desired, 1);
  w.RunFor(1000);
  ASSERT_EQ(w.book().Find("echo")->replicas.size(), 1u);
  EXPECT_TRUE(w.book().Find("echo")->replicas[0].guaranteed) << "the opportunistic ones went first";
  EXPECT_EQ(w.book().Scale("echo", 3).code(), StatusCode::kFailedPrecondition);
}

TEST(ServiceBookTest, APreemptedReplicaIsDrainedDuringItsGraceAndReplaced) {
  World w;
  const auto spec = Spec("echo", 2);
  ASSERT_TRUE(w.book().Create(spec, Json(spec), "alice", 0).ok());
  w.RunFor(1000);
  const Service* s = w.book().Find("echo");
  const Replica r = s->replicas[0];
  w.SetJob(r.job, "preempting");
  w.Round();
  EXPECT_EQ(w.Find("echo", r.id)->state, ReplicaState::kDraining);
  EXPECT_EQ(w.Server(s->slot, r.server), LbChange::Op::kDrain)
      << "no new requests, those in flight finish";
  w.RunFor(2000);
  EXPECT_EQ(w.stops_, 0) << "the scheduler stops it, not the service";
  EXPECT_EQ(w.Count("echo", ReplicaState::kReady), 2) << "a replacement was started meanwhile";
  w.SetJob(r.job, "pending");  // requeued once it stopped: one more than wanted, so it goes
  w.RunFor(500);
  EXPECT_EQ(w.Server(s->slot, r.server), LbChange::Op::kDisable);
  EXPECT_EQ(w.Find("echo", r.id), nullptr);
  EXPECT_EQ(w.Count("echo", ReplicaState::kReady), 2);
}

TEST(ServiceBookTest, ADeletedServiceDrainsItsReplicasAndIsErased) {
  World w;
  const auto spec = Spec("echo", 2);
  ASSERT_TRUE(w.book().Create(spec, Json(spec), "alice", 0).ok());
  w.RunFor(1000);
  ASSERT_TRUE(w.book().Delete("echo").ok());
  bool erased = false;
  for (int i = 0; i < 20 && !erased; ++i) erased = w.Round().erased.count("echo") > 0;
  EXPECT_TRUE(erased);
  EXPECT_EQ(w.book().Find("echo"), nullptr);
  EXPECT_EQ(w.InRotation(), 0);
  EXPECT_EQ(w.stops_, 2);
}

TEST(ServiceBookTest, EndpointsAreLimitedToTheLoadBalancersSlots) {
  World w;  // two slots
  for (const char* name : {"a", "b"})
    ASSERT_TRUE(w.book().Create(Spec(name, 1), Json(Spec(name, 1)), "u", 0).ok());
  Status third = w.book().Create(Spec("c", 1), Json(Spec("c", 1)), "u", 0);
  EXPECT_EQ(third.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(w.book().Create(Spec("a", 1), Json(Spec("a", 1)), "u", 0).code(),
            StatusCode::kAlreadyExists);
}

TEST(ServiceBookTest, ARestoredBookKeepsItsReplicasInRotation) {
  World w;
  const auto spec = Spec("echo", 2);
  ASSERT_TRUE(w.book().Create(spec, Json(spec), "alice", 0).ok());
  w.RunFor(1000);
  ServiceBook again(BookOptions{2, 30000, 30099, nullptr});
  ASSERT_TRUE(again.Restore(w.book().Record("echo"), 5).ok());
  EXPECT_EQ(again.Record("echo"), w.book().Record("echo"));
  int enabled = 0;
  for (const auto& c : again.LbState()) enabled += c.op == LbChange::Op::kEnable;
  EXPECT_EQ(enabled, 2);
  EXPECT_EQ(again.Jobs().size(), 2u);
}

ServiceSpec Live(const std::string& name, int replicas, const std::string& initial_delay) {
  auto s = ParseServiceSpec(
      "name: " + name + "\nservice: {replicas: " + std::to_string(replicas) +
          ", restart: {backoff: 1s, max_backoff: 4s}, readiness: {http: /ready, interval: 100ms}, "
          "liveness: {command: [check, --deep], interval: 100ms, failure_threshold: 3, "
          "initial_delay: " +
          initial_delay + "}, drain_grace: 5s}\ntasks: [{cpu: 1, command: [serve]}]\n",
      "test");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

TEST(ServiceBookTest, AReplicaFailingLivenessIsDrainedStoppedAndRestartedAfterItsBackOff) {
  World w;
  const auto spec = Live("echo", 2, "10s");
  ASSERT_TRUE(w.book().Create(spec, Json(spec), "alice", 0).ok());
  w.RunFor(1000);
  ASSERT_EQ(w.Count("echo", ReplicaState::kReady), 2);
  const Service* s = w.book().Find("echo");
  const Replica sick = s->replicas[0];
  // Ready replicas are probed at once (not after initial_delay), in their own task.
  bool probed = false;
  for (const auto& p : w.probed_) {
    if (!p.liveness || p.replica != sick.id) continue;
    probed = true;
    EXPECT_EQ(p.task_id, World::TaskOf(sick.job));
    EXPECT_EQ(p.node, "n1");
    EXPECT_EQ(p.probe.command, (std::vector<std::string>{"check", "--deep"}));
  }
  EXPECT_TRUE(probed);
  const int starts = w.starts_;
  w.in_flight_[{s->slot, sick.server}] = 1;
  w.alive = [&](int replica) { return replica != sick.id; };
  w.Check = [&] { EXPECT_EQ(w.book().Find("echo")->replicas.size(), 2u) << "no stand-in added"; };
  w.RunFor(300);  // three failures in a row
  EXPECT_EQ(w.Find("echo", sick.id)->state, ReplicaState::kDraining);
  EXPECT_EQ(w.Server(s->slot, sick.server), LbChange::Op::kDrain);
  ASSERT_EQ(w.events_.size(), 1u);
  EXPECT_NE(w.events_[0].find("liveness failed 3 times in a row (the command exited with 1)"),
            std::string::npos)
      << w.events_[0];
  w.RunFor(1000);
  EXPECT_EQ(w.stops_, 0) << "its request in flight finishes first";
  w.in_flight_[{s->slot, sick.server}] = 0;
  w.alive = [](int) { return true; };
  w.RunFor(300);
  EXPECT_EQ(w.stops_, 1);
  EXPECT_EQ(w.Find("echo", sick.id)->state, ReplicaState::kBackoff);
  EXPECT_NE(w.Find("echo", sick.id)->why.find("liveness"), std::string::npos);
  w.RunFor(1500);  // back-off 1 s
  const Replica* back = w.Find("echo", sick.id);
  EXPECT_EQ(back->state, ReplicaState::kReady);
  EXPECT_EQ(back->restarts, 1u);
  EXPECT_NE(back->job, sick.job);
  EXPECT_EQ(w.starts_, starts + 1) << "the same replica ran again, and only it";
  // A late result about the old process says nothing about the new one.
  ProbeTarget stale{"echo",
                    sick.id,
                    true,
                    sick.job,
                    "10.0.0.1",
                    0,
                    "n1",
                    World::TaskOf(sick.job),
                    *spec.options.liveness};
  for (int i = 0; i < 5; ++i) w.book().SeeProbe(stale, false, "late", w.now());
  w.Round();
  EXPECT_EQ(w.Find("echo", sick.id)->state, ReplicaState::kReady);
}

TEST(ServiceBookTest, LivenessWaitsForReadinessOrItsInitialDelay) {
  World w;
  const auto spec = Live("echo", 1, "2s");
  ASSERT_TRUE(w.book().Create(spec, Json(spec), "alice", 0).ok());
  w.alive = [](int) { return false; };
  w.RunFor(1900, [](int) { return false; });  // still loading
  for (const auto& p : w.probed_) EXPECT_FALSE(p.liveness) << "probed before initial_delay";
  EXPECT_EQ(w.Count("echo", ReplicaState::kStarting), 1);
  w.RunFor(600, [](int) { return false; });
  EXPECT_EQ(w.stops_, 1) << "hung before it was ever ready: stopped once initial_delay passed";
  EXPECT_EQ(w.InRotation(), 0);
  w.alive = [](int) { return true; };
  w.RunFor(1500);
  EXPECT_EQ(w.Count("echo", ReplicaState::kReady), 1);
}

ServiceSpec ByRate(const std::string& targets) {
  auto s = ParseServiceSpec("name: web\nservice: {autoscale: {min: 1, max: 4, " + targets +
                                ", scale_down_after: 1s}, readiness: {tcp: HANGAR_PORT}}\n"
                                "tasks: [{cpu: 1, command: [serve]}]\n",
                            "test");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

TEST(ServiceBookTest, AutoscalingOnRequestsPerSecondAimsAtTheRatePerReplica) {
  World w;
  const auto spec = ByRate("rps_per_replica: 10");
  ASSERT_TRUE(w.book().Create(spec, Json(spec), "alice", 0).ok());
  const int slot = w.book().Find("web")->slot;
  w.rps_by_slot_[slot] = 25;  // no in-flight reading: the rate alone decides
  w.RunFor(500);
  EXPECT_EQ(w.book().Find("web")->desired, 3);
  EXPECT_EQ(w.book().Find("web")->scale_note,
            "25 requests per second, 10 per replica wanted: 3 replicas (within 1-4)");
  w.rps_by_slot_[slot] = 4;
  w.RunFor(800);
  EXPECT_EQ(w.book().Find("web")->desired, 3) << "within the stabilisation window";
  w.RunFor(400);
  EXPECT_EQ(w.book().Find("web")->desired, 1);
}

TEST(ServiceBookTest, AutoscalingOnBothTargetsTakesTheLargerCount) {
  World w;
  const auto spec = ByRate("in_flight_per_replica: 2, rps_per_replica: 10");
  ASSERT_TRUE(w.book().Create(spec, Json(spec), "alice", 0).ok());
  const int slot = w.book().Find("web")->slot;
  w.rps_by_slot_[slot] = 5;
  w.RunFor(300);
  EXPECT_EQ(w.book().Find("web")->desired, 1) << "both readings are needed";
  w.in_flight_by_slot_[slot] = 7;
  w.RunFor(300);
  EXPECT_EQ(w.book().Find("web")->desired, 4);
  EXPECT_EQ(w.book().Find("web")->scale_note,
            "7 requests in flight, 2 per replica wanted: 4 replicas (within 1-4)");
  w.in_flight_by_slot_[slot] = 0;
  w.rps_by_slot_[slot] = 21;
  w.RunFor(1500);
  EXPECT_EQ(w.book().Find("web")->desired, 3);
  EXPECT_NE(w.book().Find("web")->scale_note.find("21 requests per second"), std::string::npos);
}

// A CI-like run of bench/services_bench.py showed it: a service created on the slot a deleted one
// had just given back scaled to its max at once, on the deleted service's request rate, which
// HAProxy still reported for that slot.
TEST(ServiceBookTest, AServiceOnAFreedSlotDoesNotScaleByItsPredecessorsTraffic) {
  World w;
  const auto busy = ByRate("rps_per_replica: 10");
  ASSERT_TRUE(w.book().Create(busy, Json(busy), "alice", 0).ok());
  const int slot = w.book().Find("web")->slot;
  w.rps_by_slot_[slot] = 100;
  w.RunFor(300);
  ASSERT_EQ(w.book().Find("web")->desired, 4);
  ASSERT_TRUE(w.book().Delete("web").ok());
  for (int i = 0; i < 1000 && w.book().Find("web"); ++i) w.RunFor(10);
  ASSERT_EQ(w.book().Find("web"), nullptr) << "deleted";
  // The book has two slots: the one never used goes first, then the freed one.
  auto other = ParseServiceSpec(
      "name: other\nservice: {replicas: 1, readiness: {tcp: HANGAR_PORT}}\n"
      "tasks: [{cpu: 1, command: [serve]}]\n",
      "test");
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(w.book().Create(*other, Json(*other), "alice", 0).ok());
  ASSERT_NE(w.book().Find("other")->slot, slot);
  const auto quiet = ByRate("rps_per_replica: 10");
  ASSERT_TRUE(w.book().Create(quiet, Json(quiet), "bob", 0).ok());
  ASSERT_EQ(w.book().Find("web")->slot, slot);
  w.RunFor(500);  // the load balancer still says 100/s for the slot: the deleted service's
  EXPECT_EQ(w.book().Find("web")->desired, 1) << w.book().Find("web")->scale_note;
  w.rps_by_slot_[slot] = 0;
  w.RunFor(2000);
  EXPECT_EQ(w.book().Find("web")->desired, 1) << w.book().Find("web")->scale_note;
  w.rps_by_slot_[slot] = 25;  // its own traffic counts
  w.RunFor(300);
  EXPECT_EQ(w.book().Find("web")->desired, 3);
}

// A walk found it: replicas whose task could not start (the token's user had no Unix account on
// the node) said only "its job ended (failed)", and the stopped rollout offered a rollback to
// "revision 0". Now the replica says why its job ended, and the rollout says there is nothing to
// roll back to.
TEST(ServiceBookTest, AReplicaThatCannotStartSaysWhyAndTheFirstRolloutHasNothingToRollBackTo) {
  World w;
  const auto spec = Spec("echo", 1, "serve");
  ASSERT_TRUE(w.book().Create(spec, Json(spec), "alice", 0).ok());
  w.start_as_ = "failed";
  w.start_message_ =
      "task 0 could not start on n1: this node has no Unix account 'alice' (getpwnam)\nmore";
  w.RunFor(20000);
  const Service* s = w.book().Find("echo");
  ASSERT_EQ(s->Target().state, "failed");
  EXPECT_EQ(s->Target().note,
            "replica 1 ended 3 times before it was ever ready (its job ended (failed: task 0 could "
            "not start on n1: this node has no Unix account 'alice' (getpwnam))); the rollout "
            "stopped (no revision of it was ever ready: fix the file and `hangar service update "
            "echo -f FILE`, or delete it)");
}

}  // namespace
}  // namespace hangar::controller::service
