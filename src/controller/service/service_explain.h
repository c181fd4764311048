// Why a service has the replicas it has (`hangar explain SERVICE`, GET /v1/services/NAME/explain):
// the count it wants and why -- its file's count, or the autoscaler's targets, its inputs now and
// its last decision, within min and max -- how many are ready, and for each wanted replica that
// is not, why: the scheduler's reason for its pending job (quota, capacity, topology), its restart
// back-off, or its readiness probe's last failure. Pure: the daemon passes what it read.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "controller/service/haproxy_config.h"
#include "controller/service/service_book.h"

namespace hangar::controller::service {

// What the scheduler says of a replica's job.
struct JobWait {
  std::string state;
  std::string reason;  // why it waits ("" when it does not)
  std::string rule;    // the rejecting rule
  std::string queue;
};

// `traffic`: the service's slot as the load balancer last said (nullopt: not read yet). `jobs`: by
// job id, the replicas' jobs that are not running yet. `queue`: the replicas' queue as the fair
// share shows it (a row of GET /v1/share: guarantee_gpus, in_use_gpus, borrowed_gpus, ...), or
// null.
nlohmann::json ExplainService(const Service& s, const std::optional<SlotTraffic>& traffic,
                              const std::map<uint64_t, JobWait>& jobs, Time now,
                              const nlohmann::json& queue = nullptr);

// The explanation as lines for people (the CLI prints them).
std::string ExplainText(const nlohmann::json& explained);

}  // namespace hangar::controller::service
