// The controller's Prometheus metrics (prometheus-cpp), exposed on /metrics by the HTTP API.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "controller/state/cluster_state.h"

namespace hangar::controller {

class ControllerMetrics {
 public:
  ControllerMetrics();
  // Owner thread, after a cycle: the cycle time, and (at most once a second) job, node and GPU
  // gauges from the state.
  void OnCycle(double seconds, const ClusterState& state, Time now) HANGAR_EXCLUDES(mu_);
  // Job, node and GPU gauges from a fresh count (the owner computes it for /metrics scrapes).
  void SetCounts(const ClusterState::Counts& counts) HANGAR_EXCLUDES(mu_);
  void CountSubmit() { submitted_->Increment(); }
  void SetAgents(double connected, double heartbeats_total) HANGAR_EXCLUDES(mu_);
  // Agent-channel messages refused (forged or foreign), by reason, as counted by the hub.
  void SetAgentRefusals(const std::vector<std::pair<std::string, int64_t>>& by_reason)
      HANGAR_EXCLUDES(mu_);
  // The text exposition format.
  std::string Render() HANGAR_EXCLUDES(mu_);
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
  // The series below are made by the constructor. mu_ serializes their updates (a counter raised
  // to a total counted elsewhere is read, then incremented); submitted_ is only incremented.
  Mutex mu_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>* jobs_ HANGAR_PT_GUARDED_BY(mu_);
  prometheus::Family<prometheus::Gauge>* nodes_ HANGAR_PT_GUARDED_BY(mu_);
  prometheus::Family<prometheus::Gauge>* gpus_ HANGAR_PT_GUARDED_BY(mu_);
  prometheus::Histogram* cycle_seconds_ HANGAR_PT_GUARDED_BY(mu_);
  prometheus::Counter* submitted_;
  prometheus::Counter* placements_ HANGAR_PT_GUARDED_BY(mu_);
  prometheus::Gauge* agents_ HANGAR_PT_GUARDED_BY(mu_);
  prometheus::Counter* heartbeats_ HANGAR_PT_GUARDED_BY(mu_);
  prometheus::Gauge* heartbeat_lag_ HANGAR_PT_GUARDED_BY(mu_);
  prometheus::Counter* nodes_lost_ HANGAR_PT_GUARDED_BY(mu_);
  prometheus::Family<prometheus::Counter>* refused_ HANGAR_PT_GUARDED_BY(mu_);
  // MIG reshapes: done and failed, their seconds, and those in flight.
  prometheus::Counter* mig_done_ HANGAR_PT_GUARDED_BY(mu_);
  prometheus::Counter* mig_failed_ HANGAR_PT_GUARDED_BY(mu_);
  prometheus::Counter* mig_seconds_ HANGAR_PT_GUARDED_BY(mu_);
  prometheus::Gauge* mig_in_flight_ HANGAR_PT_GUARDED_BY(mu_);
  // The store's scheduled checks that failed.
  prometheus::Counter* integrity_failures_ HANGAR_PT_GUARDED_BY(mu_);
  Time last_counts_ HANGAR_GUARDED_BY(mu_) = 0;
};

}  // namespace hangar::controller
