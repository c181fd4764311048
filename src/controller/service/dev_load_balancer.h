// `hangar dev`'s load balancer for services: HAProxy on free loopback ports, configured by
// HaproxyConfig, its runtime API on a Unix socket in the dev folder, stopped with `hangar dev`.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/status.h"
#include "controller/service/haproxy_config.h"

namespace hangar::controller::service {

struct DevLoadBalancer {
  pid_t pid = 0;  // 0: none (haproxy is not installed)
  LbLayout layout;
  std::string note;  // why there is none
};

// Starts HAProxy with `slots` endpoints; its log goes to DIR/logs/haproxy.log. When haproxy is not
// installed, returns no process and a note saying how to get it.
StatusOr<DevLoadBalancer> StartDevLoadBalancer(const std::string& dir, int slots);

}  // namespace hangar::controller::service
