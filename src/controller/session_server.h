// The session port: Sessions.Open (session_service.h) on a gRPC server of its own, beside the
// agent channel's, because the agent port asks every client for a node certificate (mutual TLS)
// that people's CLIs do not have. TLS here is the API's: the controller's certificate, no client
// certificate, the token in the metadata. Connections are accepted by an AgentListener (it
// survives descriptor exhaustion and caps what it hands over).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "common/tls_files.h"
#include "controller/agent_listener.h"
#include "controller/session_service.h"

namespace hangar::controller {

class SessionServer {
 public:
  // Serves `service` on host:port (port 0: any free one); `tls` empty: plaintext.
  static StatusOr<std::unique_ptr<SessionServer>> Start(const std::string& host, int port,
                                                        const TlsFiles& tls,
                                                        SessionService* service,
                                                        int max_connections);
  ~SessionServer();  // stops
  int port() const { return listener_->port(); }
  void Stop();

 private:
  std::unique_ptr<AgentListener> listener_;
  std::unique_ptr<grpc::Server> server_;
  bool stopped_ = false;
};

}  // namespace hangar::controller
