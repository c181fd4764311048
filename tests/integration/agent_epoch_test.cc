// Issue 18: an agent refuses orders of a leadership epoch older than the newest it has seen. Two
// fake controllers on 127.0.0.1: A at epoch 2 launches a task and closes the stream; the agent
// moves on to B, a deposed leader at epoch 1, whose launch must not run.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "local_cluster.h"
#include "proto/agent.grpc.pb.h"

namespace hangar::testing {
namespace {

namespace pb = ::hangar::agent::v1;
namespace fs = std::filesystem;

// Answers Register with Registered, then sends one Launch that touches `marker`, all at `epoch`.
class FakeController final : public pb::AgentChannel::Service {
 public:
  FakeController(int64_t epoch, std::string marker) : epoch_(epoch), marker_(std::move(marker)) {}
  grpc::Status Connect(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<pb::ControllerMessage, pb::AgentMessage>* stream) override {
    pb::AgentMessage in;
    if (!stream->Read(&in) || !in.has_register_()) return grpc::Status::OK;
    pb::ControllerMessage reg;
    reg.mutable_registered()->set_heartbeat_interval_ms(1000);
    reg.set_epoch(epoch_);
    stream->Write(reg);
    pb::ControllerMessage launch;
    launch.set_epoch(epoch_);
    pb::Launch* l = launch.mutable_launch();
    l->set_task_id("job-" + std::to_string(epoch_) + "-0-0");
    l->set_job_id(static_cast<uint64_t>(epoch_));
    l->add_argv("/bin/sh");
    l->add_argv("-c");
    l->add_argv("touch " + marker_);
    l->add_gpu_indices(0);
    stream->Write(launch);
    // The leader at epoch 2 leaves after a while (as if it died); the deposed one keeps the stream.
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(epoch_ == 2 ? 1500 : 5000);
    while (!ctx->IsCancelled() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ++sessions_;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "gone");
  }
  std::atomic<int> sessions_{0};

 private:
  int64_t epoch_;
  std::string marker_;
};

std::unique_ptr<grpc::Server> Serve(FakeController* c, int* port) {
  grpc::ServerBuilder b;
  b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                       500);  // as the controller
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  b.RegisterService(c);
  return b.BuildAndStart();
}

TEST(AgentEpochTest, RefusesOrdersOfAnOlderEpoch) {
  char tmpl[] = "/tmp/hangar-epoch-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/cluster.yaml") << FourNodeTwoLeafCluster("epoch");
  FakeController a(2, dir + "/from-epoch-2"), b(1, dir + "/from-epoch-1");
  int pa = 0, pb_ = 0;
  auto sa = Serve(&a, &pa);
  auto sb = Serve(&b, &pb_);
  ASSERT_TRUE(sa && sb && pa > 0 && pb_ > 0);
  const pid_t agent = fork();
  if (agent == 0) {
    const int fd = open((dir + "/agent.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    const std::string list =
        "127.0.0.1:" + std::to_string(pa) + ",127.0.0.1:" + std::to_string(pb_);
    const std::string cluster = dir + "/cluster.yaml", state = dir + "/agent";
    execl(HANGAR_BINARY, "hangar", "agent", "--controller", list.c_str(), "--node", "node-1",
          "--cluster", cluster.c_str(), "--state-dir", state.c_str(), "--insecure",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Epoch 2's order runs; after its controller leaves, epoch 1's is refused.
  EXPECT_TRUE(
      LocalCluster::WaitFor([&] { return fs::exists(dir + "/from-epoch-2"); }, 10 * kSecond));
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] { return Contains(ReadFile(dir + "/agent.log"), "refused a message of epoch 1"); },
      10 * kSecond))
      << ReadFile(dir + "/agent.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(fs::exists(dir + "/from-epoch-1")) << "the deposed leader's launch ran";
  kill(agent, SIGKILL);
  waitpid(agent, nullptr, 0);
  sa->Shutdown(std::chrono::system_clock::now());
  sb->Shutdown(std::chrono::system_clock::now());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hangar::testing
