#include "sim/fgd/openb_trace.h"

#include <gtest/gtest.h>

namespace hangar::sim::fgd {
namespace {

constexpr const char* kNodes =
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "openb-node-0000,64000,262144,2,P100\n"
    "openb-node-0001,96000,786432,8,G2\r\n"
    "\n";

constexpr const char* kPodHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";

std::string Pods(const std::string& rows) { return kPodHeader + rows; }

std::string ErrorOf(const Status& s) { return s.message(); }

TEST(OpenbTraceTest, ReadsNodes) {
  auto nodes = ParseOpenbNodes(kNodes, "nodes.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[1].name, "openb-node-0001");
  EXPECT_EQ((*nodes)[1].milli_cpu, 96000);
  EXPECT_EQ((*nodes)[1].memory_mib, 786432);
  EXPECT_EQ((*nodes)[1].gpus, 8);
  EXPECT_EQ((*nodes)[1].model, "G2");  // the CR of a CRLF line is not part of the field
  EXPECT_EQ((*nodes)[1].line, 3);
}

TEST(OpenbTraceTest, ReadsPodsWithSpecsAndSharing) {
  auto pods = ParseOpenbPods(Pods("p0,12000,16384,1,1000,,LS,Running,0,1,0\n"
                                  "p1,6000,12288,1,460,V100M16|V100M32,LS,Running,0,1,0\n"
                                  "p2,4000,1024,0,0,,BE,Running,0,1,0\n"
                                  "p3,1000,1024,1,1500,|T4|,BE,Running,0,1,0\n"),
                             "pods.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->size(), 4u);
  EXPECT_EQ((*pods)[0].TotalMilliGpu(), 1000);
  EXPECT_TRUE((*pods)[0].models.empty());
  EXPECT_EQ((*pods)[1].gpu_milli, 460);
  EXPECT_EQ((*pods)[1].gpu_spec, "V100M16|V100M32");
  EXPECT_EQ((*pods)[1].models, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_FALSE((*pods)[2].NeedsGpu());
  EXPECT_EQ((*pods)[2].TotalMilliGpu(), 0);
  EXPECT_EQ((*pods)[3].gpu_milli, 1000);                         // clamped, as FGD's loader does
  EXPECT_EQ((*pods)[3].models, std::vector<std::string>{"T4"});  // empty parts dropped
}

TEST(OpenbTraceTest, MultiGpuFilesHaveFiveColumns) {
  auto pods = ParseOpenbPods(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
      "openb-pod-0000,12000,16384,8,1000\n",
      "multigpu.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  EXPECT_EQ((*pods)[0].TotalMilliGpu(), 8000);
  EXPECT_TRUE((*pods)[0].gpu_spec.empty());
}

TEST(OpenbTraceTest, MalformedNodeRowsNameFileLineAndProblem) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"sn,cpu_milli,memory_mib,model\nn0,1,1,T4\n", "nodes.csv:1: the header has no 'gpu' column"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,2\n",
       "nodes.csv:2: expected 5 comma-separated fields as in the header, found 4"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,64k,1,2,T4\n",
       "nodes.csv:2: cpu_milli '64k' is not a whole number"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,-2,T4\n",
       "nodes.csv:2: gpu is -2; it must be between 0 and 64"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,2,T4\nn0,1,1,2,T4\n",
       "nodes.csv:3: node 'n0' is listed twice"},
      {"sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,2,\n",
       "nodes.csv:2: node 'n0' has GPUs but no model"},
      {"", "nodes.csv:0: the file is empty; expected a header row"},
  };
  for (const auto& c : cases) {
    auto r = ParseOpenbNodes(c.text, "nodes.csv");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(ErrorOf(r.status()), c.error);
  }
}

TEST(OpenbTraceTest, MalformedPodRowsNameFileLineAndProblem) {
  struct Case {
    std::string text;
    const char* error;
  } cases[] = {
      {Pods("p0,12000,16384,2,500,,LS,Running,0,1,0\n"),
       "pods.csv:2: num_gpu is 2 but gpu_milli is 500; a pod that shares a GPU takes exactly one"},
      {Pods("p0,12000,16384,1,1000,,LS,Running,0,1,0\np1,12000,,1,1000,,LS,Running,0,1,0\n"),
       "pods.csv:3: memory_mib '' is not a whole number"},
      {Pods("p0,12000,16384,1,1000,,LS\n"),
       "pods.csv:2: expected 11 comma-separated fields as in the header, found 7"},
      {Pods(",12000,16384,1,1000,,LS,Running,0,1,0\n"), "pods.csv:2: the pod name is empty"},
      {"name,cpu_milli,num_gpu\np0,1,1\n", "pods.csv:1: the header has no 'memory_mib' column"},
      {Pods(""), "pods.csv:1: the file lists no pods"},
  };
  for (const auto& c : cases) {
    auto r = ParseOpenbPods(c.text, "pods.csv");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(ErrorOf(r.status()), c.error);
  }
}

TEST(OpenbTraceTest, MissingFileIsNotFound) {
  auto r = ReadOpenbPods("/nonexistent/openb_pod_list_none.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/openb_pod_list_none.csv"), std::string::npos);
}

}  // namespace
}  // namespace hangar::sim::fgd
