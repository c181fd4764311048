#include "controller/metrics.h"

#include <prometheus/text_serializer.h>

namespace hangar::controller {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

ControllerMetrics::ControllerMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  jobs_ = &BuildGauge().Name("hangar_jobs").Help("Jobs by state").Register(*registry_);
  nodes_ = &BuildGauge().Name("hangar_nodes").Help("Nodes by state").Register(*registry_);
  gpus_ = &BuildGauge().Name("hangar_gpus").Help("GPUs by state (allocated counts fractions)").Register(*registry_);
  cycle_seconds_ = &BuildHistogram()
                        .Name("hangar_scheduler_cycle_seconds")
                        .Help("Wall time of one scheduling cycle")
                        .Register(*registry_)
                        .Add({}, prometheus::Histogram::BucketBoundaries{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5});
  submitted_ = &BuildCounter().Name("hangar_jobs_submitted_total").Help("Jobs accepted").Register(*registry_).Add({});
  placements_ = &BuildGauge().Name("hangar_placements").Help("Gangs placed since the controller started").Register(*registry_).Add({});
  agents_ = &BuildGauge().Name("hangar_agents_connected").Help("Agent streams open").Register(*registry_).Add({});
  heartbeats_ = &BuildGauge().Name("hangar_agent_heartbeats").Help("Heartbeats received since the controller started").Register(*registry_).Add({});
}

static void ClusterMetricsCounts(const ClusterState::Counts& c, prometheus::Family<prometheus::Gauge>* jobs,
                          prometheus::Family<prometheus::Gauge>* nodes,
                          prometheus::Family<prometheus::Gauge>* gpus) {
  for (const auto& [state, n] : c.jobs_by_state) jobs->Add({{"state", state}}).Set(static_cast<double>(n));
  for (const char* s : {"ready", "draining", "drained", "lost", "unknown", "disconnected", "recovering"}) {
    auto it = c.nodes_by_state.find(s);
    nodes->Add({{"state", s}}).Set(it == c.nodes_by_state.end() ? 0.0 : static_cast<double>(it->second));
  }
  const double allocated = static_cast<double>(c.gpus_allocated_milli) / 1000.0;
  gpus->Add({{"state", "allocated"}}).Set(allocated);
  gpus->Add({{"state", "idle"}}).Set(static_cast<double>(c.gpus_total) - allocated);
}

void ControllerMetrics::OnCycle(double seconds, const ClusterState& state, Time now) {
  std::lock_guard<std::mutex> l(mu_);
  cycle_seconds_->Observe(seconds);
  placements_->Set(static_cast<double>(state.placements_total()));  // O(1): kept fresh
  if (now - last_counts_ < kSecond) return;
  last_counts_ = now;
  const ClusterState::Counts c = state.GetCounts();
  ClusterMetricsCounts(c, jobs_, nodes_, gpus_);
}

void ControllerMetrics::SetCounts(const ClusterState::Counts& counts) {
  std::lock_guard<std::mutex> l(mu_);
  ClusterMetricsCounts(counts, jobs_, nodes_, gpus_);
}

void ControllerMetrics::SetAgents(double connected, double heartbeats_total) {
  std::lock_guard<std::mutex> l(mu_);
  agents_->Set(connected);
  heartbeats_->Set(heartbeats_total);
}

std::string ControllerMetrics::Render() {
  std::lock_guard<std::mutex> l(mu_);
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace hangar::controller
