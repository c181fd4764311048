// ApiClient: the CLI's side of the REST API. Turns HTTP failures and the API's JSON errors back
// into Status values with the server's own message.
#pragma once

#include <httplib.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace hangar::cli {

class ApiClient {
 public:
  // `server` like "http://127.0.0.1:8080"; "" means $HANGAR_URL, else http://127.0.0.1:8080. With
  // several controllers, a comma-separated list: every call goes to the leader (a
  // standby's answer names it; an address that does not answer passes to the next).
  explicit ApiClient(std::string server);
  const std::string& server() const { return server_; }

  StatusOr<nlohmann::json> Get(const std::string& path);
  StatusOr<nlohmann::json> Post(const std::string& path, const std::string& body,
                                const std::string& content_type = "application/json");
  // With an Idempotency-Key, and sent once more when no answer came back (the connection dropped):
  // the server answers a repeated key with its first answer, so a retry never makes a second job.
  StatusOr<nlohmann::json> PostOnce(const std::string& path, const std::string& body,
                                    const std::string& content_type,
                                    const std::string& idempotency_key);
  StatusOr<nlohmann::json> Delete(const std::string& path);
  // Streams a text body to `sink` as it arrives (logs -f).
  Status Stream(const std::string& path, const std::function<bool(const char*, size_t)>& sink);

 private:
  StatusOr<nlohmann::json> Decode(int status, const std::string& body, const std::string& what);
  // Runs `call` against the leader, for up to 10 s while controllers hand over. `resend`: the call
  // may be sent again after a connection that broke mid-way (a GET, or a POST with a key).
  httplib::Result ToLeader(const std::function<httplib::Result(httplib::Client&)>& call,
                           bool resend);
  std::vector<std::string> servers_;
  size_t current_ = 0;
  std::string server_;  // the one answering now
};

// The token the CLI shows `server` ("" for none): $HANGAR_TOKEN, $HANGAR_TOKEN_FILE's, or for a
// loopback server the token of this account's `hangar dev` there.
std::string TokenFor(const std::string& server);
// The default server: $HANGAR_URL or http://127.0.0.1:8080.
std::string DefaultServer();
// 32 random hex digits, for an Idempotency-Key.
std::string NewIdempotencyKey();

}  // namespace hangar::cli
