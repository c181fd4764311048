// The REST API (docs/api.md): JSON over HTTP with cpp-httplib. Handlers hand commands to the state
// owner and answer once what they changed is durable. Errors are JSON with a message that says
// what to fix; bodies over 1 MiB are refused before they are read.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "controller/agent_hub.h"
#include "controller/metrics.h"
#include "controller/state_owner.h"

namespace httplib {
class Server;
}

namespace hangar::controller {

class HttpApi {
 public:
  static constexpr size_t kMaxBody = 1 << 20;

  HttpApi(StateOwner* owner, AgentHub* hub, ControllerMetrics* metrics);
  ~HttpApi();
  // Binds host:port (port 0 picks a free one) and serves on a background thread. Returns the port.
  StatusOr<int> Start(const std::string& host, int port);
  void Stop();

 private:
  void Routes();
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  StateOwner* owner_;
  AgentHub* hub_;
  ControllerMetrics* metrics_;
};

}  // namespace hangar::controller
