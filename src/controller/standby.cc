#include "controller/standby.h"

#include "common/net.h"

namespace hangar::controller {
namespace {

// Refuses an agent's stream at once: this controller does not lead.
class Refusal final : public grpc::ServerBidiReactor<pb::AgentMessage, pb::ControllerMessage> {
 public:
  explicit Refusal(const std::string& why) {
    Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, why));
  }
  void OnDone() override { delete this; }
};

std::string LeaderSentence(const LeaderInfo& l) {
  if (l.name.empty() || l.left <= 0) {
    return "no controller leads right now (the lease is free or expiring); retry in a moment";
  }
  return "the leader is " + l.name + " at " + l.api + " (epoch " + std::to_string(l.epoch) + ")";
}

}  // namespace

nlohmann::json StandbyError(const std::string& self, const LeaderInfo& leader) {
  return {{"error",
           {{"code", "Unavailable"},
            {"message", "this controller (" + self + ") is a standby; " + LeaderSentence(leader) +
                            ": send API calls to the leader"}}},
          {"leader", leader.ToJson()}};
}

StandbyServers::StandbyServers(std::string name, const TlsFiles& tls, const HttpLimits& limits)
    : name_(std::move(name)), http_(MakeHttpServer(tls, limits)) {
  http_.server->set_socket_options(ExclusiveServerSocketOptions);
  http_.server->set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) {
        Answer(req, res);
        return httplib::Server::HandlerResponse::Handled;
      });
}

StandbyServers::~StandbyServers() { Stop(); }

void StandbyServers::Answer(const httplib::Request& req, httplib::Response& res) const {
  const auto [name, l] = NameAndLeader();
  if (req.method == "GET" && req.path == "/v1/leader") {
    res.status = 200;
    nlohmann::json body{{"role", "standby"}, {"name", name}, {"leader", l.ToJson()}};
    if (following_) body["following"] = following_();
    res.set_content(body.dump(), "application/json");
    return;
  }
  res.status = 503;
  res.set_header("X-Hangar-Role", "standby");
  if (!l.name.empty() && l.left > 0) res.set_header("X-Hangar-Leader", l.api);
  res.set_content(StandbyError(name, l).dump(), "application/json");
}

StatusOr<std::pair<int, int>> StandbyServers::Start(
    const std::pair<std::string, int>& api, const std::pair<std::string, int>& agents,
    std::shared_ptr<grpc::ServerCredentials> creds) {
  const int api_port = http_.control->Bind(api.first, api.second, /*backlog=*/4096);
  if (api_port <= 0) {
    return Status::Unavailable(
        "cannot listen on " + api.first + ":" + std::to_string(api.second) +
        " for the API; is another process using it? Choose another with --api");
  }
  http_thread_ = std::thread([this] { http_.server->listen_after_bind(); });
  for (int i = 0; i < 2000 && !http_.server->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::string host = agents.first;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  auto listener = AgentListener::Listen(host, agents.second, {});
  if (!listener.ok()) return listener.status();
  listener_ = std::move(*listener);
  grpc::ServerBuilder builder;
  // A socket that says nothing for 10 s is closed (an agent is told where the leader is at once).
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 10'000);
  auto acceptor = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, creds);
  builder.RegisterService(this);
  grpc_ = builder.BuildAndStart();
  if (!grpc_)
    return Status::Unavailable("cannot start the standby's agent channel; see the log above");
  listener_->Start(std::move(acceptor));
  return std::make_pair(api_port, listener_->port());
}

void StandbyServers::SetLeader(const LeaderInfo& l) {
  MutexLock lock(mu_);
  leader_ = l;
}

void StandbyServers::SetName(const std::string& name) {
  MutexLock lock(mu_);
  name_ = name;
}

std::pair<std::string, LeaderInfo> StandbyServers::NameAndLeader() const {
  MutexLock lock(mu_);
  return {name_, leader_};
}

void StandbyServers::Stop() {
  if (listener_) listener_->Stop();
  if (grpc_) {
    grpc_->Shutdown(std::chrono::system_clock::now());
    grpc_->Wait();
    grpc_.reset();
  }
  if (http_.server) http_.server->stop();
  if (http_thread_.joinable()) http_thread_.join();
}

grpc::ServerBidiReactor<pb::AgentMessage, pb::ControllerMessage>* StandbyServers::Connect(
    grpc::CallbackServerContext*) {
  const auto [name, leader] = NameAndLeader();
  return new Refusal("controller " + name + " is a standby; " + LeaderSentence(leader));
}

}  // namespace hangar::controller
