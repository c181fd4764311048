// Swarm: one process that plays many node agents against a controller, in the spirit of
// Kubernetes' KWOK. Each simulated agent has its own real agent stream (gRPC callback API: no
// thread per agent), registers its inventory, heartbeats with telemetry at a set rate, and "runs"
// launched tasks without starting processes: it reports them running, then ended after their
// duration. A fraction of agents can be told to go silent, to test failure detection.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/topology.h"
#include "common/time.h"

namespace hangar::swarm {

struct SwarmOptions {
  std::string controller;  // host:port of the agent channel
  Duration heartbeat_interval = kSecond;
  Duration default_task_duration = 10 * kSecond;  // when a task's command names no `sleep N`
  int channels = 32;  // HTTP/2 connections the streams are spread over; 0: one per agent
  // Mutual TLS, as real agents speak it (when `ca` is set): the cluster CA, and each node's
  // certificate and key in the topology's node order; each agent then has a connection of its own.
  struct Tls {
    std::string ca;
    std::vector<std::string> certs, keys;
  } tls;
  double silent_fraction = 0;  // this share of the agents stops heartbeating ...
  Duration silent_after = 0;   // ... this long after all have registered
  std::string silence_file;    // or when this file appears (if set)
};

struct SwarmStats {
  int64_t registered = 0;
  int64_t heartbeats_sent = 0;
  int64_t launches = 0;
  int64_t tasks_ended = 0;
  int64_t silenced = 0;
  Time silenced_at = 0;  // when the silent agents' last heartbeat went out (ms, wall clock)
  int64_t stream_errors = 0;
};

class Swarm {
 public:
  Swarm(std::shared_ptr<const cluster::Topology> topology, SwarmOptions options);
  ~Swarm();
  // Opens every agent's stream and registers. Returns once all are registered or `timeout` passed.
  // Run may already be running: an agent heartbeats from its registration on, as a real one does
  // (a burst of 10,240 registrations takes longer than the controller's heartbeat timeout).
  bool Start(Duration timeout, const std::atomic<bool>* stop = nullptr);  // false also once *stop
  // Sends heartbeats (to the agents registered so far), ends tasks and silences agents until
  // *stop. May start before Start.
  void Run(const std::atomic<bool>* stop);
  SwarmStats stats() const;
  // The connections the agents' streams are spread over.
  size_t connections() const;
  // Names of the agents that went silent.
  std::vector<std::string> silent_nodes() const;
  // Each silent agent's last heartbeat (ms, wall clock).
  std::map<std::string, Time> silent_last_heartbeats() const;

 private:
  class Agent;
  std::shared_ptr<const cluster::Topology> topology_;
  SwarmOptions options_;
  std::vector<std::unique_ptr<Agent>> agents_;
  struct Shared;
  std::unique_ptr<Shared> shared_;
};

// The duration of a task from its argv: the number after `sleep` (e.g. ["sleep","2"] or
// ["/bin/sh","-c","sleep 1.5"]); `fallback` when there is none.
Duration TaskDuration(const std::vector<std::string>& argv, Duration fallback);

}  // namespace hangar::swarm
