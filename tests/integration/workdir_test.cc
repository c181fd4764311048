// Issue 15, item 5: `workdir` lets a job's command find the user's files. The job file says
// `workdir: .`; `hangar submit`, run from elsewhere, makes it the job file's folder; the task runs
// there and reads its input by a relative path. A workdir a node does not have fails the task
// with the reason.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

constexpr const char* kCluster =
    "node_defaults: {gpus: 2, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 16, memory: 128Gi}\n"
    "nodes: [{name: node-1}]\n";

TEST(WorkdirTest, TheCommandRunsInTheJobFilesFolder) {
  LocalCluster cluster(kCluster);
  cluster.StartController();
  cluster.StartAgent("node-1");
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] { return cluster.Get("/v1/nodes/node-1").value("state", "") == "ready"; }, 20 * kSecond));
  const std::string proj = cluster.dir() + "/proj";
  std::filesystem::create_directories(proj);
  std::ofstream(proj + "/data.txt") << "the user's data\n";
  std::ofstream(proj + "/job.yaml")
      << "name: reads-its-file\nworkdir: .\n"
         "tasks: [{gpus: 1, command: [sh, -c, 'cat data.txt > out.txt']}]\n";
  std::ofstream(proj + "/elsewhere.yaml") << "name: nowhere\nworkdir: /nonexistent/hangar-test\n"
                                             "tasks: [{gpus: 1, command: ['true']}]\n";
  const std::string server = " --server http://127.0.0.1:" + std::to_string(cluster.api_port());
  // From another folder, as a person would: cd / && hangar submit proj/job.yaml.
  const std::string cmd = "cd / && " + std::string(HANGAR_BINARY) + " submit " + proj +
                          "/job.yaml" + server + " && " + HANGAR_BINARY + " submit " + proj +
                          "/elsewhere.yaml" + server;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  ASSERT_TRUE(cluster.WaitForJobState(1, "succeeded", 20 * kSecond)) << cluster.Job(1).dump();
  EXPECT_EQ(ReadFile(proj + "/out.txt"), "the user's data\n");
  ASSERT_TRUE(cluster.WaitForJobState(2, "failed", 20 * kSecond)) << cluster.Job(2).dump();
  bool said = false;
  for (const auto& e :
       cluster.Get("/v1/events?subject=job/2").value("events", nlohmann::json::array())) {
    said |= Contains(e.value("message", ""),
                     "workdir /nonexistent/hangar-test is not a directory on node node-1");
  }
  EXPECT_TRUE(said) << cluster.Get("/v1/events?subject=job/2").dump();
  // The API refuses a relative one: it means nothing on a node.
  int status = 0;
  auto r = cluster.Post("/v1/jobs", "name: r\nworkdir: proj\ntasks: [{gpus: 1, command: [x]}]\n",
                        &status);
  EXPECT_EQ(status, 400);
  EXPECT_TRUE(Contains(r.dump(), "must be an absolute path on the nodes")) << r.dump();
}

}  // namespace
}  // namespace hangar::testing
