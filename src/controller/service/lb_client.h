// The controller's side of HAProxy's runtime API (haproxy_config.h): one command per connection,
// over a Unix socket or TCP. Thread-compatible: one caller at a time.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "controller/service/replica.h"

namespace hangar::controller::service {

class LbClient {
 public:
  // `admin`: unix:/path/admin.sock or host:port.
  explicit LbClient(std::string admin) : admin_(std::move(admin)) {}
  // Sends one command and returns HAProxy's answer; Unavailable when it cannot be reached, and
  // FailedPrecondition with HAProxy's words when it refused the command.
  StatusOr<std::string> Run(const std::string& command) const;
  // Carries out a change (HaproxyCommands); a node name is resolved to an address first.
  Status Apply(const LbChange& change) const;
  const std::string& admin() const { return admin_; }

 private:
  std::string admin_;
};

// The numeric address of `host` (itself when it is one), or "" when it cannot be resolved.
std::string NumericAddress(const std::string& host);

}  // namespace hangar::controller::service
