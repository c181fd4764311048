// Issue 16: every agent message is authenticated and authorised. A real controller with
// --auth tokens and one real agent; a hand-made gRPC client speaks the agent protocol as an
// attacker would: without registering, and registered as another node with that node's token.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <thread>

#include "local_cluster.h"
#include "proto/agent.grpc.pb.h"

namespace hangar::testing {
namespace {

namespace pb = ::hangar::agent::v1;

constexpr const char* kCluster =
    "node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: node-1}, {name: node-2}]\n";

// One agent stream opened by hand.
class RawAgent {
 public:
  RawAgent(int port, const std::string& token)
      : client_(pb::AgentChannel::NewStub(grpc::CreateChannel(
            "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()))) {
    if (!token.empty()) ctx_.AddMetadata("authorization", "Bearer " + token);
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    stream_ = client_->Connect(&ctx_);
  }
  bool Send(const pb::AgentMessage& m) { return stream_->Write(m); }
  bool Read(pb::ControllerMessage* m) { return stream_->Read(m); }
  // Ends our side and returns how the controller closed the stream.
  grpc::Status Close() {
    stream_->WritesDone();
    pb::ControllerMessage ignored;
    while (stream_->Read(&ignored)) {
    }
    return stream_->Finish();
  }
  static pb::AgentMessage Register(const std::string& node) {
    pb::AgentMessage m;
    auto* inv = m.mutable_register_()->mutable_inventory();
    inv->set_node(node);
    inv->set_address("127.0.0.1");
    inv->set_gpu_backend("fake");
    for (uint32_t i = 0; i < 8; ++i) inv->add_gpus()->set_index(i);
    return m;
  }
  static pb::AgentMessage Exited(const std::string& task) {
    pb::AgentMessage m;
    m.mutable_task_status()->set_task_id(task);
    m.mutable_task_status()->set_state(pb::TaskStatus::EXITED);
    m.mutable_task_status()->set_exit_code(0);
    return m;
  }

 private:
  std::unique_ptr<pb::AgentChannel::Stub> client_;  // gRPC's generated client
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::AgentMessage, pb::ControllerMessage>> stream_;
};

class AgentAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ =
        std::make_unique<LocalCluster>(kCluster, std::vector<std::string>{"--auth", "tokens"});
    cluster_->StartController();
    std::ifstream in(cluster_->dir() + "/admin.token");
    std::getline(in, admin_);
    node_token_["node-1"] = MakeNodeToken("node-1");
    node_token_["node-2"] = MakeNodeToken("node-2");
    const std::string file = cluster_->dir() + "/node-1.token";
    std::ofstream(file) << node_token_["node-1"] << "\n";
    cluster_->StartAgent("node-1", {"--token-file", file});
    ASSERT_TRUE(LocalCluster::WaitFor(
        [&] { return Api("GET", "/v1/nodes/node-1").value("state", "") == "ready"; }, 20 * kSecond))
        << Api("GET", "/v1/nodes/node-1").dump();
    // Job 1 holds all of node-1's GPUs (node-2 has no agent, so it can only go there). A user's,
    // whose token maps to an account its tasks run as (issue 16).
    user_ = Api("POST", "/v1/tokens",
                R"({"user": "vera", "role": "user", )" + TaskAccountFields() + "}")
                .value("token", "");
    ASSERT_FALSE(user_.empty());
    job_ =
        Api("POST", "/v1/jobs", "name: victim\ntasks: [{gpus: 8, command: [sleep, '60']}]\n", user_)
            .value("id", 0u);
    ASSERT_EQ(job_, 1u);
    ASSERT_TRUE(LocalCluster::WaitFor(
        [&] { return Api("GET", "/v1/jobs/1").value("state", "") == "running"; }, 20 * kSecond));
  }

  std::string MakeNodeToken(const std::string& node) {
    auto r = Api("POST", "/v1/tokens", R"({"role": "node", "node": ")" + node + R"("})");
    return r.value("token", "");
  }
  nlohmann::json Api(const std::string& method, const std::string& path,
                     const std::string& body = "", const std::string& token = "") {
    httplib::Client c("127.0.0.1", cluster_->api_port());
    httplib::Headers h{{"Authorization", "Bearer " + (token.empty() ? admin_ : token)}};
    httplib::Result r = method == "GET"    ? c.Get(path, h)
                        : method == "POST" ? c.Post(path, h, body, "application/yaml")
                                           : c.Delete(path, h);
    if (!r) return nlohmann::json::object();
    return nlohmann::json::parse(r->body, nullptr, false);
  }
  std::string Metrics() {
    httplib::Client c("127.0.0.1", cluster_->api_port());
    auto r = c.Get("/metrics?gpus=0", httplib::Headers{{"Authorization", "Bearer " + admin_}});
    return r ? r->body : "";
  }
  std::string ControllerLog() { return ReadFile(cluster_->dir() + "/controller.log"); }
  // The job is still running, on node-1, whose GPUs it still holds.
  void ExpectVictimUntouched() {
    EXPECT_EQ(Api("GET", "/v1/jobs/1").value("state", ""), "running")
        << Api("GET", "/v1/jobs/1").dump();
    EXPECT_EQ(Api("GET", "/v1/nodes/node-1").value("gpus_free", -1), 0);
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::string admin_, user_;
  std::map<std::string, std::string> node_token_;
  uint64_t job_ = 0;
};

TEST_F(AgentAuthTest, NothingButRegisterBeforeRegister) {
  // A valid node token, but the stream never registered: its "task 1.0.0 exited 0" is refused
  // and the stream closed.
  RawAgent forger(cluster_->agent_port(), node_token_["node-1"]);
  forger.Send(RawAgent::Exited("1.0.0"));
  grpc::Status st = forger.Close();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("send Register first"), std::string::npos)
      << st.error_message();
  // No token at all: the same.
  RawAgent anonymous(cluster_->agent_port(), "");
  anonymous.Send(RawAgent::Exited("1.0.0"));
  EXPECT_EQ(anonymous.Close().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ExpectVictimUntouched();
  EXPECT_TRUE(Contains(Metrics(), "hangar_agent_messages_refused_total{reason=\"unregistered\"} 2"))
      << Metrics();
  EXPECT_TRUE(Contains(ControllerLog(), "refused unregistered from an unregistered stream"));
}

TEST_F(AgentAuthTest, ANodeCannotReportOnAnotherNodesTasks) {
  // node-2's own token, registered as node-2: it may speak for node-2 only.
  RawAgent forger(cluster_->agent_port(), node_token_["node-2"]);
  ASSERT_TRUE(forger.Send(RawAgent::Register("node-2")));
  pb::ControllerMessage reply;
  ASSERT_TRUE(forger.Read(&reply));
  ASSERT_TRUE(reply.has_registered());
  forger.Send(RawAgent::Exited("1.0.0"));  // job 1's task, on node-1
  pb::AgentMessage ckpt;
  ckpt.mutable_checkpoint_done()->set_task_id("1.0.0");
  forger.Send(ckpt);
  // Log bytes for requests it was never sent (a `logs -f` of job 1 asks node-1, not node-2).
  for (uint64_t id = 1; id <= 3; ++id) {
    pb::AgentMessage log;
    log.mutable_log_chunk()->set_request_id(id);
    log.mutable_log_chunk()->set_data("forged\n");
    forger.Send(log);
  }
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        return Contains(Metrics(),
                        "hangar_agent_messages_refused_total{reason=\"foreign_task\"} 2");
      },
      5 * kSecond))
      << Metrics();
  ExpectVictimUntouched();
  EXPECT_TRUE(
      Contains(ControllerLog(), "node node-2 reported task 1.0.0, which was placed on node-1"));
  // The next 8-GPU job is not put on node-1's GPUs, which job 1's processes still use.
  const uint64_t next =
      Api("POST", "/v1/jobs", "name: next\ntasks: [{gpus: 8, command: [sleep, '1']}]\n")
          .value("id", 0u);
  ASSERT_EQ(next, 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto j2 = Api("GET", "/v1/jobs/2");
  for (const auto& t : j2.value("task_list", nlohmann::json::array()))
    EXPECT_NE(t.value("node", ""), "node-1") << j2.dump();
  // Job 1's real logs still come from node-1 alone.
  std::string logs;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        httplib::Client c("127.0.0.1", cluster_->api_port());
        auto r = c.Get("/v1/jobs/1/logs?task=0",
                       httplib::Headers{{"Authorization", "Bearer " + admin_}});
        logs = r ? r->body : "";
        return r && r->status == 200;
      },
      5 * kSecond))
      << logs;
  EXPECT_FALSE(Contains(logs, "forged"));
  // A second Register on the same stream, as node-1, closes it.
  forger.Send(RawAgent::Register("node-1"));
  grpc::Status st = forger.Close();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(Contains(st.error_message(), "cannot speak for another node")) << st.error_message();
  ExpectVictimUntouched();
}

TEST_F(AgentAuthTest, RevokingANodeTokenCutsItsAgentOffAtOnce) {
  const std::string token = node_token_["node-1"];
  const std::string id = token.substr(4, token.find('_', 4) - 4);  // hgr_<id>_<secret>
  EXPECT_EQ(Api("DELETE", "/v1/tokens/" + id).value("revoked", false), true);
  EXPECT_TRUE(LocalCluster::WaitFor(
      [&] { return Api("GET", "/v1/nodes/node-1").value("state", "") != "ready"; }, 2 * kSecond))
      << Api("GET", "/v1/nodes/node-1").dump();
  EXPECT_TRUE(Contains(ControllerLog(), "revoked: closed 1 agent stream(s)"));
  // Its reconnections are refused: nothing new is sent to it.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_NE(Api("GET", "/v1/nodes/node-1").value("state", ""), "ready");
}

}  // namespace
}  // namespace hangar::testing
