#include "controller/service/service_explain.h"

#include <gtest/gtest.h>

#include "job/job_spec.h"

namespace hangar::controller::service {
namespace {

Service Make(const std::string& block) {
  auto spec = ParseServiceSpec(
      "name: web\nservice: " + block + "\ntasks: [{cpu: 1, command: [serve]}]\n", "test");
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  Service s;
  s.name = "web";
  s.target = 1;
  s.desired = spec->options.replicas;
  s.revisions.push_back(
      {1, spec->options, job::JobSpecToJson(spec->replica), 0, "complete", "", true});
  return s;
}

Replica Rep(int id, uint64_t job, ReplicaState state, bool guaranteed) {
  Replica r;
  r.id = id;
  r.job = job;
  r.state = state;
  r.guaranteed = guaranteed;
  return r;
}

TEST(ServiceExplainTest, SaysWhyTheAutoscalerWantsItsCountAndWhyEachWantedReplicaWaits) {
  Service s = Make("{autoscale: {min: 1, max: 4, in_flight_per_replica: 2}}");
  s.desired = 3;
  s.scale_note = "5 requests in flight, 2 per replica wanted: 3 replicas (within 1-4)";
  s.replicas.push_back(Rep(1, 10, ReplicaState::kReady, true));
  s.replicas.push_back(Rep(2, 11, ReplicaState::kPending, false));
  Replica crashed = Rep(3, 0, ReplicaState::kBackoff, false);
  crashed.why = "its job ended (failed); restarts in 2s";
  crashed.restarts = 2;
  crashed.restart_at = 5000;
  s.replicas.push_back(crashed);
  Replica leaving = Rep(4, 13, ReplicaState::kDraining, false);
  leaving.removing = true;
  s.replicas.push_back(leaving);
  const std::map<uint64_t, JobWait> jobs = {
      {11, {"pending", "queue research is at its quota (8 of 8 GPUs)", "quota", "research"}}};
  SlotTraffic t;
  t.in_flight = 5;
  t.rps = 12;
  const nlohmann::json queue = {
      {"name", "research"}, {"guarantee_gpus", 8}, {"in_use_gpus", 10.5}, {"borrowed_gpus", 2.5}};
  const auto e = ExplainService(s, t, jobs, 3000, queue);
  EXPECT_EQ(e["desired"], 3);
  EXPECT_EQ(e["ready"], 1);
  EXPECT_EQ(e["why"],
            "autoscaled within 1-4 on 2 requests in flight per replica; now 5 requests in flight "
            "and 12 per second; last decision: 5 requests in flight, 2 per replica wanted: 3 "
            "replicas (within 1-4)");
  EXPECT_EQ(e["guaranteed"], 1);
  EXPECT_EQ(e["opportunistic"], 2) << "the replica on its way out is not counted";
  ASSERT_EQ(e["waiting"].size(), 2u);
  EXPECT_EQ(e["waiting"][0]["why"],
            "its job is pending: queue research is at its quota (8 of 8 GPUs) [rule: quota]");
  EXPECT_EQ(e["waiting"][0]["queue"], "research");
  EXPECT_EQ(e["waiting"][1]["why"], "its job ended (failed); restarts in 2s (restart 2, in 2s)");
  const std::string text = ExplainText(e);
  EXPECT_NE(text.find("service web wants 3 replicas, 1 ready: autoscaled within 1-4"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  replica 2 (job 11) is pending: its job is pending: queue research"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1 run in the template's tier, 2 opportunistic"), std::string::npos) << text;
  EXPECT_NE(text.find("  queue research: guaranteed 8 GPUs, 10.5 in use (2.5 borrowed)\n"),
            std::string::npos)
      << text;
}

TEST(ServiceExplainTest, AFixedCountComesFromTheFileAndAnUnreadLoadBalancerIsSaid) {
  Service s = Make("{replicas: 2}");
  s.replicas.push_back(Rep(1, 10, ReplicaState::kReady, true));
  s.replicas.push_back(Rep(2, 11, ReplicaState::kReady, true));
  auto e = ExplainService(s, std::nullopt, {}, 0);
  EXPECT_EQ(e["why"], "its file (or `hangar service scale`) asks for 2 replicas");
  EXPECT_TRUE(e["waiting"].empty());
  EXPECT_FALSE(e.contains("quota")) << "no queue row: no quota said";
  Service a = Make("{autoscale: {min: 2, max: 3, rps_per_replica: 50}}");
  a.desired = 2;
  e = ExplainService(a, std::nullopt, {}, 0);
  EXPECT_EQ(e["why"],
            "autoscaled within 2-3 on 50 requests per second per replica; the load balancer has "
            "not been read yet; last decision: none since it was created or this controller "
            "started (min 2)");
}

}  // namespace
}  // namespace hangar::controller::service
