// The controller's Prometheus metrics (prometheus-cpp), exposed on /metrics by the HTTP API.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "controller/state/cluster_state.h"

namespace hangar::controller {

class ControllerMetrics {
 public:
  ControllerMetrics();
  // Owner thread, after a cycle: the cycle time, and (at most once a second) job, node and GPU
  // gauges from the state.
  void OnCycle(double seconds, const ClusterState& state, Time now);
  // Job, node and GPU gauges from a fresh count (the owner computes it for /metrics scrapes).
  void SetCounts(const ClusterState::Counts& counts);
  void CountSubmit() { submitted_->Increment(); }
  void SetAgents(double connected, double heartbeats_total);
  // Agent-channel messages refused (forged or foreign), by reason, as counted by the hub.
  void SetAgentRefusals(const std::vector<std::pair<std::string, int64_t>>& by_reason);
  // The text exposition format.
  std::string Render();
  // Per-GPU series under dcgm-exporter's metric names. Labels: gpu, uuid, pci_bus_id, device,
  // model_name, hostname -- dcgm-exporter's own, in the snake_case that `promtool check metrics`
  // insists on, all gauges; with `dcgm_spelling` exactly dcgm-exporter's: its label spelling
  // (UUID, modelName, Hostname), its metric types (counters for energy, PCIe replays, ECC and
  // remapped rows) and its help texts, for dashboards built on it.
  // Every GPU also carries job, queue and user labels (who holds it), and one
  // hangar_gpu_health_state series with its health state.
  static std::string RenderGpuSeries(const std::vector<ClusterState::GpuSeries>& gpus,
                                     bool dcgm_spelling);
  // hangar_node_state{node, state}: 1 per node, for the state it is in.
  static std::string RenderNodeStates(
      const std::vector<std::pair<std::string, std::string>>& nodes);
  prometheus::Registry& registry() { return *registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>* jobs_;
  prometheus::Family<prometheus::Gauge>* nodes_;
  prometheus::Family<prometheus::Gauge>* gpus_;
  prometheus::Histogram* cycle_seconds_;
  prometheus::Counter* submitted_;
  prometheus::Counter* placements_;
  prometheus::Gauge* agents_;
  prometheus::Counter* heartbeats_;
  prometheus::Gauge* heartbeat_lag_;
  prometheus::Counter* nodes_lost_;
  prometheus::Family<prometheus::Counter>* refused_;
  // MIG reshapes: done and failed, their seconds, and those in flight.
  prometheus::Counter* mig_done_;
  prometheus::Counter* mig_failed_;
  prometheus::Counter* mig_seconds_;
  prometheus::Gauge* mig_in_flight_;
  prometheus::Counter* integrity_failures_;  // the store's scheduled checks that failed
  std::mutex mu_;
  Time last_counts_ = 0;
};

}  // namespace hangar::controller
