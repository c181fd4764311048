#include "swarm/swarm.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "cluster/cluster_yaml.h"
#include "proto/agent.grpc.pb.h"

namespace hangar::swarm {
namespace {

namespace pb = hangar::agent::v1;

TEST(SwarmTest, TaskDurationFromTheCommand) {
  EXPECT_EQ(TaskDuration({"sleep", "2"}, 5), 2000);
  EXPECT_EQ(TaskDuration({"/bin/sh", "-c", "echo hi; sleep 1.5"}, 5), 1500);
  EXPECT_EQ(TaskDuration({"/usr/bin/sleep", "0.25"}, 5), 250);
  EXPECT_EQ(TaskDuration({"python3", "train.py"}, 7000), 7000);
  EXPECT_EQ(TaskDuration({"sleep", "x"}, 7), 7);
}

// A controller that acknowledges node "slow" only after 2 s, and counts each node's heartbeats
// and those that came before it had acknowledged that node.
class SlowToRegister final : public pb::AgentChannel::Service {
 public:
  grpc::Status Connect(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<pb::ControllerMessage, pb::AgentMessage>* stream) override {
    pb::AgentMessage m;
    std::string node;
    bool acked = false;
    while (stream->Read(&m)) {
      if (m.has_register_()) {
        node = m.register_().inventory().node();
        if (node == "slow") std::this_thread::sleep_for(std::chrono::seconds(2));
        pb::ControllerMessage r;
        r.mutable_registered()->set_heartbeat_interval_ms(100);
        stream->Write(r);
        acked = true;
      } else if (m.has_heartbeat()) {
        std::lock_guard<std::mutex> l(mu);
        beats[node]++;
        if (!acked) early++;
      }
    }
    return grpc::Status::OK;
  }
  std::mutex mu;
  std::map<std::string, int> beats;
  int early = 0;
};

// A real agent heartbeats from its own registration on. The swarm used to start every heartbeat
// only once all its agents had registered, so under a burst of 10,240 registrations longer than
// the controller's heartbeat timeout, the first to register were declared lost.
TEST(SwarmTest, AgentsHeartbeatFromTheirRegistrationWhileOthersStillRegister) {
  SlowToRegister service;
  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_GT(port, 0);
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 2, gpu_model: H100, gpu_memory: 80Gi, cpu: 16, memory: 64Gi}\n"
      "nodes: [{name: fast}, {name: slow}]\n",
      "c.yaml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  SwarmOptions o;
  o.controller = "127.0.0.1:" + std::to_string(port);
  o.heartbeat_interval = 100;
  o.channels = 1;
  std::atomic<bool> stop{false};
  {
    Swarm swarm(f->topology, o);
    std::thread beats([&] { swarm.Run(&stop); });  // before Start, as `hangar swarm` runs it
    const bool all = swarm.Start(10 * kSecond, &stop);
    std::map<std::string, int> during;
    {
      std::lock_guard<std::mutex> l(service.mu);
      during = service.beats;
    }
    stop = true;
    beats.join();
    ASSERT_TRUE(all);
    EXPECT_GE(during["fast"], 5) << "node fast sent no heartbeats while node slow registered";
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  std::lock_guard<std::mutex> l(service.mu);
  EXPECT_EQ(service.early, 0) << "a heartbeat came before its node was registered";
}

}  // namespace
}  // namespace hangar::swarm
