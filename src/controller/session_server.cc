#include "controller/session_server.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace hangar::controller {
namespace {

StatusOr<std::shared_ptr<grpc::ServerCredentials>> SessionCredentials(const TlsFiles& tls) {
  if (tls.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  HANGAR_ASSIGN_OR_RETURN(pair.private_key, ReadPem(tls.key));
  HANGAR_ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(tls.cert));
  o.pem_key_cert_pairs.push_back(pair);
  return grpc::SslServerCredentials(o);
}

}  // namespace

StatusOr<std::unique_ptr<SessionServer>> SessionServer::Start(const std::string& host, int port,
                                                              const TlsFiles& tls,
                                                              SessionService* service,
                                                              int max_connections) {
  auto out = std::unique_ptr<SessionServer>(new SessionServer());
  HANGAR_ASSIGN_OR_RETURN(out->listener_, AgentListener::Listen(host, port, {max_connections}));
  grpc::ServerBuilder builder;
  // A session's terminal is quiet for hours: keep-alive pings hold it through NATs, and a
  // connection that never finishes its handshake is closed.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 10 * 1000);
  HANGAR_ASSIGN_OR_RETURN(auto creds, SessionCredentials(tls));
  auto acceptor = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, creds);
  builder.RegisterService(service);
  out->server_ = builder.BuildAndStart();
  if (!out->server_) return Status::Unavailable("cannot start the session port; see the log above");
  out->listener_->Start(std::move(acceptor));
  return out;
}

SessionServer::~SessionServer() { Stop(); }

void SessionServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  listener_->Stop();  // first: what it would hand the server after its shutdown would leak
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

}  // namespace hangar::controller
