// What a standby controller serves while another leads. Its REST API answers every call
// with 503 and the leader's address (header X-Hangar-Leader and the JSON body's "leader"), except
// GET /v1/leader, which says who leads; it never acts. Its agent channel refuses every stream, so
// an agent moves on to the next controller of its list. On takeover both stop, and the leader's
// own servers bind the same ports.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "common/mutex.h"
#include "common/tls_files.h"
#include "controller/agent_listener.h"
#include "controller/http_server.h"
#include "controller/leadership.h"
#include "proto/agent.grpc.pb.h"

namespace hangar::controller {

namespace pb = ::hangar::agent::v1;

// The standby's reply to an API call that only the leader may answer.
nlohmann::json StandbyError(const std::string& self, const LeaderInfo& leader);

class StandbyServers final : public pb::AgentChannel::CallbackService {
 public:
  StandbyServers(std::string name, const TlsFiles& tls, const HttpLimits& limits);
  ~StandbyServers() override;
  // Binds the API and the agent channel (port 0: any free one); the ports bound.
  StatusOr<std::pair<int, int>> Start(const std::pair<std::string, int>& api,
                                      const std::pair<std::string, int>& agents,
                                      std::shared_ptr<grpc::ServerCredentials> creds);
  void SetLeader(const LeaderInfo& l) HANGAR_EXCLUDES(mu_);
  void SetName(const std::string& name) HANGAR_EXCLUDES(mu_);
  // What `GET /v1/leader` says of the standby's copy of the store ("following"); set before Start.
  void SetFollowing(std::function<nlohmann::json()> following) {
    following_ = std::move(following);
  }
  void Stop();

  grpc::ServerBidiReactor<pb::AgentMessage, pb::ControllerMessage>* Connect(
      grpc::CallbackServerContext* context) override;

 private:
  std::pair<std::string, LeaderInfo> NameAndLeader() const HANGAR_EXCLUDES(mu_);
  void Answer(const httplib::Request& req, httplib::Response& res) const;

  mutable Mutex mu_;
  std::string name_ HANGAR_GUARDED_BY(mu_);
  HttpServer http_;
  std::thread http_thread_;
  // The agent port is accepted as the leader's is (agent_listener.h): a flood that used up the
  // standby's descriptors must not leave it deaf to agents once it has ended.
  std::unique_ptr<AgentListener> listener_;
  std::unique_ptr<grpc::Server> grpc_;
  LeaderInfo leader_ HANGAR_GUARDED_BY(mu_);
  std::function<nlohmann::json()> following_;
};

}  // namespace hangar::controller
