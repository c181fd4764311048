#include "swarm/swarm_command.h"

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cluster/cluster_yaml.h"
#include "common/tls_files.h"
#include "swarm/swarm.h"

namespace hangar::swarm {
namespace {

struct Flags {
  std::string controller = "127.0.0.1:8081";
  std::string cluster;
  std::string heartbeat = "1s";
  std::string task_duration = "10s";
  int channels = 32;
  double silent_fraction = 0;
  std::string silent_after = "30s";
  std::string stats_file;
  std::string silence_file;
  std::string tls_dir;
};

std::atomic<bool> g_stop{false};

void WriteStats(const std::string& path, const Swarm& s) {
  const SwarmStats st = s.stats();
  nlohmann::json j = {{"registered", st.registered},      {"heartbeats_sent", st.heartbeats_sent},
                      {"launches", st.launches},          {"tasks_ended", st.tasks_ended},
                      {"silenced", st.silenced},          {"silenced_at_ms", st.silenced_at},
                      {"stream_errors", st.stream_errors}};
  if (st.silenced) {
    j["silent_nodes"] = s.silent_nodes();
    j["silent_last_heartbeat_ms"] = s.silent_last_heartbeats();
  }
  std::ofstream(path + ".tmp") << j.dump() << "\n";
  std::rename((path + ".tmp").c_str(), path.c_str());
}

Status Run(const Flags& f) {
  if (f.cluster.empty())
    return Status::InvalidArgument("--cluster cluster.yaml is required: the swarm plays its nodes");
  HANGAR_ASSIGN_OR_RETURN(auto file, cluster::LoadClusterFile(f.cluster));
  SwarmOptions o;
  o.controller = f.controller;
  HANGAR_ASSIGN_OR_RETURN(o.heartbeat_interval, ParseDuration(f.heartbeat));
  HANGAR_ASSIGN_OR_RETURN(o.default_task_duration, ParseDuration(f.task_duration));
  HANGAR_ASSIGN_OR_RETURN(o.silent_after, ParseDuration(f.silent_after));
  o.channels = f.channels;
  o.silent_fraction = f.silent_fraction;
  o.silence_file = f.silence_file;
  if (!f.tls_dir.empty()) {
    HANGAR_ASSIGN_OR_RETURN(o.tls.ca, ReadPem(f.tls_dir + "/ca.crt"));
    for (const auto& node : file.topology->nodes()) {
      const std::string stem = f.tls_dir + "/node-" + node.name;
      HANGAR_ASSIGN_OR_RETURN(std::string cert, ReadPem(stem + ".crt"));
      HANGAR_ASSIGN_OR_RETURN(std::string key, ReadPem(stem + ".key"));
      o.tls.certs.push_back(std::move(cert));
      o.tls.keys.push_back(std::move(key));
    }
  }
  Swarm swarm(file.topology, o);
  const size_t n = file.topology->nodes().size();
  std::printf("swarm: %zu agents connecting to %s over %zu %s connections\n", n,
              f.controller.c_str(), swarm.connections(),
              f.tls_dir.empty() ? "plaintext" : "mutual-TLS");
  signal(SIGINT, [](int) { g_stop = true; });
  signal(SIGTERM, [](int) { g_stop = true; });
  // Heartbeats from each agent's registration on, while the rest still register.
  std::thread beats([&] { swarm.Run(&g_stop); });
  if (!swarm.Start(120 * kSecond, &g_stop)) {
    if (g_stop) {
      beats.join();
      return Status::Ok();  // interrupted while registering
    }
    g_stop = true;
    beats.join();
    return Status::Unavailable("only " + std::to_string(swarm.stats().registered) + " of " +
                               std::to_string(n) +
                               " agents registered within 120 s; is the controller at " +
                               f.controller + " using " + f.cluster + "?");
  }
  std::printf("swarm: all %zu agents registered\n", n);
  std::fflush(stdout);
  std::thread stats([&] {
    while (!g_stop) {
      if (!f.stats_file.empty()) WriteStats(f.stats_file, swarm);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  beats.join();
  stats.join();
  if (!f.stats_file.empty()) WriteStats(f.stats_file, swarm);
  return Status::Ok();
}

}  // namespace

void RegisterSwarmCommand(CLI::App& app, int* rc) {
  auto f = std::make_shared<Flags>();
  CLI::App* c =
      app.add_subcommand("swarm", "Play many node agents in one process (load generator)");
  c->add_option("--controller", f->controller, "The controller's agent address")
      ->capture_default_str();
  c->add_option("--cluster", f->cluster, "cluster.yaml: one simulated agent per node")->required();
  c->add_option("--heartbeat", f->heartbeat, "Heartbeat interval per agent")->capture_default_str();
  c->add_option("--task-duration", f->task_duration,
                "How long a task runs when its command has no 'sleep N'")
      ->capture_default_str();
  c->add_option("--channels", f->channels,
                "Connections to spread the streams over (0: one per agent)")
      ->capture_default_str();
  c->add_option("--tls-dir", f->tls_dir,
                "Mutual TLS: DIR/ca.crt and each node's DIR/node-NAME.crt/.key (hangar certs issue "
                "--nodes-of); "
                "one connection per agent");
  c->add_option("--silent-fraction", f->silent_fraction, "Share of agents that go silent")
      ->capture_default_str();
  c->add_option("--silent-after", f->silent_after, "When they go silent, after all registered")
      ->capture_default_str();
  c->add_option("--silence-file", f->silence_file,
                "Go silent when this file appears (instead of --silent-after)");
  c->add_option("--stats-file", f->stats_file, "Write counters here as JSON, five times a second");
  c->callback([f, rc] {
    Status s = Run(*f);
    if (!s.ok()) {
      std::fprintf(stderr, "hangar swarm: %s\n", s.message().c_str());
      *rc = 2;
    }
  });
}

}  // namespace hangar::swarm
