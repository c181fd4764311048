// ServiceSpec: what a service file asks for (docs/services.md). A service file is a job file with a
// `service:` block; its single task group is the template of one replica, and the block says how
// many replicas to keep, how to restart them, how to tell that one is ready, and how to roll out a
// new revision.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "job/job_spec.h"

namespace hangar::controller::service {

// How the controller tells that a replica can take requests (readiness), or that it still works
// at all (liveness). The port probed is the replica's HANGAR_PORT unless `port` names another; a
// command runs inside the replica's task (as `hangar exec` would run it), and passes when it
// exits 0.
struct ProbeSpec {
  enum class Kind { kHttp, kTcp, kCommand };
  Kind kind = Kind::kTcp;
  std::string path;                  // kHttp: the path a GET must answer 2xx or 3xx on
  int port = 0;                      // 0: HANGAR_PORT
  std::vector<std::string> command;  // kCommand: the program and its arguments
  Duration interval = 1 * kSecond;
  Duration timeout = 1 * kSecond;
  int success_threshold = 1;  // readiness: passes in a row before a replica joins rotation
  // Failures in a row before a ready replica leaves rotation (readiness), or before the replica
  // is drained, stopped and restarted (liveness).
  int failure_threshold = 3;
  // Liveness: probing starts once the replica's process has passed readiness, or this long after
  // it started if that comes first (a model still loading is not restarted for being slow).
  Duration initial_delay = 5 * kMinute;
};

// Back-off for a replica whose process ended: the first restart waits `backoff`, each crash in a
// row doubles the wait up to `max_backoff`; a replica that became ready starts again from
// `backoff`.
struct RestartSpec {
  Duration backoff = 1 * kSecond;
  Duration max_backoff = 30 * kSecond;
};

// A rolling update keeps at most `replicas + max_surge` replicas and at least
// `replicas - max_unavailable` ready ones. A new replica that is not ready `progress_deadline`
// after its process started (or crashes 3 times in a row before it ever was) stops the rollout.
struct UpdateSpec {
  int max_surge = 1;
  int max_unavailable = 0;
  Duration progress_deadline = 60 * kSecond;
};

// Autoscaling: the replica count follows the requests in flight at the load balancer, aiming at
// `in_flight_per_replica` each, and/or its requests per second, aiming at `rps_per_replica` each
// (with both, the larger count wins), between `min` and `max`; it goes down only once every
// recommendation of the last `scale_down_after` was lower (a stabilisation window against
// flapping). Replicas up to `min` run in the template's tier; those above it are opportunistic,
// so that guaranteed work may reclaim their GPUs (they are drained first, during their grace).
struct AutoscaleSpec {
  bool on = false;
  int min = 1, max = 1;
  int in_flight_per_replica = 1;  // 0: not a target (rps_per_replica alone)
  int rps_per_replica = 0;        // 0: not a target
  Duration scale_down_after = 30 * kSecond;
};

struct ServiceOptions {
  int replicas = 1;  // with autoscaling: min
  RestartSpec restart;
  ProbeSpec readiness;
  std::optional<ProbeSpec> liveness;  // none: a replica is restarted only when its process ends
  UpdateSpec update;
  AutoscaleSpec autoscale;
  // How long a replica leaving rotation may finish its requests before it is stopped.
  Duration drain_grace = 10 * kSecond;
};

struct ServiceSpec {
  std::string name;
  ServiceOptions options;
  job::JobSpec replica;  // one task group with one replica: what each replica runs
};

// The most replicas a service may keep (the load balancer holds this many servers per service,
// with room for a rollout's surge).
inline constexpr int kMaxReplicas = 24;
inline constexpr int kMaxSurge = 8;

// Parses a service file (YAML, or JSON). `source_name` is what errors call it; errors about the
// job part keep the file's own line numbers.
StatusOr<ServiceSpec> ParseServiceSpec(std::string_view text, const std::string& source_name);
// Whether `name` may name a service: 1-40 lowercase letters, digits and '-', starting with a
// letter.
Status CheckServiceName(const std::string& name);

nlohmann::json ServiceOptionsToJson(const ServiceOptions& o);
StatusOr<ServiceOptions> ServiceOptionsFromJson(const nlohmann::json& j);

}  // namespace hangar::controller::service
