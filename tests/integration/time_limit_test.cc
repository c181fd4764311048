// Issue 15: time_limit is a promise. A real controller and agent on loopback; a task that traps
// the checkpoint signal and would otherwise sleep for a minute is stopped at its limit: the
// signal first, then SIGTERM after the grace, and the job ends timed_out with the reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

constexpr const char* kCluster =
    "node_defaults: {gpus: 2, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: 128Gi}\n"
    "nodes: [{name: node-1}]\n";

TEST(TimeLimitTest, AJobIsSignalledThenStoppedAtItsLimit) {
  LocalCluster cluster(kCluster);
  cluster.StartController();
  cluster.StartAgent("node-1");
  ASSERT_TRUE(cluster.WaitForAgents(1));
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster.Get("/v1/nodes/node-1").value("state", "") == "ready"; }, 20 * kSecond));
  const std::string out = cluster.dir() + "/signals";
  const std::string script = cluster.dir() + "/task.sh";
  // The task notes each signal it gets; after SIGUSR1 it keeps sleeping (it ignores the hint),
  // so only the SIGTERM after the grace ends it.
  std::ofstream(script) << "#!/bin/sh\n"
                           "trap 'echo USR1 >> "
                        << out
                        << "' USR1\n"
                           "trap 'echo TERM >> "
                        << out
                        << "; exit 143' TERM\n"
                           "i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  int status = 0;
  auto r = cluster.Post("/v1/jobs",
                        "name: limited\ntime_limit: 2s\ncheckpoint: {signal: SIGUSR1, grace: 1s}\n"
                        "tasks: [{gpus: 1, command: ['" +
                            script + "']}]\n",
                        &status);
  ASSERT_EQ(status, 201) << r.dump();
  const uint64_t id = r["id"];
  ASSERT_TRUE(cluster.WaitForJobState(id, "running", 20 * kSecond));
  ASSERT_TRUE(cluster.WaitForJobState(id, "timed_out", 10 * kSecond)) << cluster.Job(id).dump();
  auto job = cluster.Job(id);
  EXPECT_TRUE(Contains(job.value("message", ""), "time limit 2s reached: sent SIGUSR1"))
      << job.dump();
  // Its GPU comes back once the task has ended, which takes the grace (1 s) and the SIGTERM.
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster.Get("/v1/nodes/node-1").value("gpus_free", 0.0) == 2.0; },
      10 * kSecond));
  EXPECT_EQ(ReadFile(out), "USR1\nTERM\n");
  EXPECT_EQ(cluster.Job(id).value("state", ""), "timed_out")
      << "its exit after SIGTERM does not change how it ended";
  bool said = false;
  for (const auto& e :
       cluster.Get("/v1/events?limit=100").value("events", nlohmann::json::array())) {
    said |= Contains(e.value("message", ""), "timed out: time limit 2s reached");
  }
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace hangar::testing
