#include "controller/metrics.h"

#include <prometheus/text_serializer.h>

#include <cstdio>

#include "controller/store/store_integrity.h"

namespace hangar::controller {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

ControllerMetrics::ControllerMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  jobs_ = &BuildGauge().Name("hangar_jobs").Help("Jobs by state").Register(*registry_);
  nodes_ = &BuildGauge().Name("hangar_nodes").Help("Nodes by state").Register(*registry_);
  gpus_ = &BuildGauge()
               .Name("hangar_gpus")
               .Help("GPUs by state (allocated counts fractions)")
               .Register(*registry_);
  cycle_seconds_ = &BuildHistogram()
                        .Name("hangar_scheduler_cycle_seconds")
                        .Help("Wall time of one scheduling cycle")
                        .Register(*registry_)
                        .Add({}, prometheus::Histogram::BucketBoundaries{
                                     0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5});
  submitted_ = &BuildCounter()
                    .Name("hangar_jobs_submitted_total")
                    .Help("Jobs accepted")
                    .Register(*registry_)
                    .Add({});
  placements_ = &BuildCounter()
                     .Name("hangar_placements_total")
                     .Help("Gangs placed since the controller started")
                     .Register(*registry_)
                     .Add({});
  agents_ = &BuildGauge()
                 .Name("hangar_agents_connected")
                 .Help("Agent streams open")
                 .Register(*registry_)
                 .Add({});
  nodes_lost_ = &BuildCounter()
                     .Name("hangar_nodes_lost_total")
                     .Help(
                         "Times a node was marked lost (silent past the heartbeat timeout) since "
                         "the controller started")
                     .Register(*registry_)
                     .Add({});
  heartbeat_lag_ = &BuildGauge()
                        .Name("hangar_heartbeat_lag_seconds")
                        .Help(
                            "How late heartbeats arrive (p90 over the last second); silent nodes "
                            "get this much longer than the timeout")
                        .Register(*registry_)
                        .Add({});
  refused_ =
      &BuildCounter()
           .Name("hangar_agent_messages_refused_total")
           .Help(
               "Agent-channel messages refused: before Register, a second Register, a report on a "
               "task placed on another node, unrequested log bytes, an agent of another store")
           .Register(*registry_);
  auto& mig = BuildCounter()
                  .Name("hangar_mig_reshapes_total")
                  .Help("MIG GPUs re-cut for the queue, by result (docs/mig.md)")
                  .Register(*registry_);
  mig_done_ = &mig.Add({{"result", "done"}});
  mig_failed_ = &mig.Add({{"result", "failed"}});
  mig_seconds_ =
      &BuildCounter()
           .Name("hangar_mig_reshape_seconds_total")
           .Help("Seconds from sending a MIG reshape to the agent's answer, summed over reshapes")
           .Register(*registry_)
           .Add({});
  mig_in_flight_ = &BuildGauge()
                        .Name("hangar_mig_reshapes_in_flight")
                        .Help("MIG reshapes sent and not yet answered")
                        .Register(*registry_)
                        .Add({});
  heartbeats_ = &BuildCounter()
                     .Name("hangar_agent_heartbeats_total")
                     .Help("Heartbeats received since the controller started")
                     .Register(*registry_)
                     .Add({});
  integrity_failures_ = &BuildCounter()
                             .Name("hangar_store_integrity_failures_total")
                             .Help(
                                 "Scheduled integrity checks of the store that failed (the "
                                 "controller then writes nothing more to it and stops; docs/ha.md)")
                             .Register(*registry_)
                             .Add({});
}

// A counter moves only up: to a total counted elsewhere, by the difference.
static void RaiseTo(prometheus::Counter* c, double total) {
  if (total > c->Value()) c->Increment(total - c->Value());
}

static void ClusterMetricsCounts(const ClusterState::Counts& c,
                                 prometheus::Family<prometheus::Gauge>* jobs,
                                 prometheus::Family<prometheus::Gauge>* nodes,
                                 prometheus::Family<prometheus::Gauge>* gpus,
                                 prometheus::Gauge* lag, prometheus::Counter* lost) {
  lag->Set(static_cast<double>(c.heartbeat_lag) / 1000.0);
  // A counter: it only moves up, by what the state counted since the last update.
  if (static_cast<double>(c.nodes_lost_total) > lost->Value())
    lost->Increment(static_cast<double>(c.nodes_lost_total) - lost->Value());
  for (const auto& [state, n] : c.jobs_by_state)
    jobs->Add({{"state", state}}).Set(static_cast<double>(n));
  // Every state `hangar nodes` can show, hardware faults included, so that an alert on
  // state!="ready" sees a quarantined node.
  for (const char* s :
       {"ready", "draining", "drained", "lost", "unknown", "disconnected", "recovering",
        "orphans-held", "suspect", "degraded", "pending_validation", "quarantined", "failed"}) {
    auto it = c.nodes_by_state.find(s);
    nodes->Add({{"state", s}})
        .Set(it == c.nodes_by_state.end() ? 0.0 : static_cast<double>(it->second));
  }
  for (const auto& [state, milli] : c.gpus_by_state)
    gpus->Add({{"state", state}}).Set(static_cast<double>(milli) / 1000.0);
}

void ControllerMetrics::OnCycle(double seconds, const ClusterState& state, Time now) {
  MutexLock l(mu_);
  cycle_seconds_->Observe(seconds);
  RaiseTo(placements_, static_cast<double>(state.placements_total()));  // O(1): kept fresh
  const ClusterState::MigReshapeStats mig = state.mig_reshape_stats();
  RaiseTo(mig_done_, static_cast<double>(mig.done));
  RaiseTo(mig_failed_, static_cast<double>(mig.failed));
  RaiseTo(mig_seconds_, mig.seconds_sum);
  mig_in_flight_->Set(static_cast<double>(mig.in_flight));
  if (now - last_counts_ < kSecond) return;
  last_counts_ = now;
  const ClusterState::Counts c = state.GetCounts();
  ClusterMetricsCounts(c, jobs_, nodes_, gpus_, heartbeat_lag_, nodes_lost_);
}

void ControllerMetrics::SetCounts(const ClusterState::Counts& counts) {
  MutexLock l(mu_);
  ClusterMetricsCounts(counts, jobs_, nodes_, gpus_, heartbeat_lag_, nodes_lost_);
}

void ControllerMetrics::SetAgents(double connected, double heartbeats_total) {
  MutexLock l(mu_);
  agents_->Set(connected);
  RaiseTo(heartbeats_, heartbeats_total);
  RaiseTo(integrity_failures_,
          static_cast<double>(StoreIntegrityFailures()));  // also read at each scrape
}

void ControllerMetrics::SetAgentRefusals(
    const std::vector<std::pair<std::string, int64_t>>& by_reason) {
  MutexLock l(mu_);
  for (const auto& [reason, n] : by_reason) {
    prometheus::Counter& c = refused_->Add({{"reason", reason}});
    if (static_cast<double>(n) > c.Value()) c.Increment(static_cast<double>(n) - c.Value());
  }
}

namespace {

std::string Escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '\\' || ch == '"') o += '\\';
    if (ch == '\n') {
      o += "\\n";
      continue;
    }
    o += ch;
  }
  return o;
}

std::string Number(double v) {
  char value[64];
  std::snprintf(value, sizeof value, "%.17g", v);
  return value;
}

}  // namespace

std::string ControllerMetrics::RenderGpuSeries(const std::vector<ClusterState::GpuSeries>& gpus,
                                               bool dcgm_spelling) {
  const char* uuid = dcgm_spelling ? "UUID" : "uuid";
  const char* model = dcgm_spelling ? "modelName" : "model_name";
  const char* host = dcgm_spelling ? "Hostname" : "hostname";
  // `dcgm_type` and `dcgm_help` are dcgm-exporter's own (etc/default-counters.csv; the ECC fields
  // are there commented out, as counters), so its Grafana dashboards work unchanged. The default
  // form is `promtool check metrics`-clean: gauges, and no name ending in _COUNTER.
  struct Field {
    const char* name;
    const char* help;
    const char* dcgm_type;
    const char* dcgm_help;
    double (*value)(const GpuTelemetry&);
  };
  static const Field kFields[] = {
      {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "gauge", nullptr,
       [](const GpuTelemetry& t) { return double(t.util_pct); }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", "gauge", nullptr,
       [](const GpuTelemetry& t) { return double(t.mem_util_pct); }},
      {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "gauge", nullptr,
       [](const GpuTelemetry& t) { return double(t.fb_free_mib); }},
      {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "gauge", nullptr,
       [](const GpuTelemetry& t) { return double(t.fb_used_mib); }},
      {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "gauge", nullptr,
       [](const GpuTelemetry& t) { return double(t.temperature_c); }},
      {"DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", "gauge", nullptr,
       [](const GpuTelemetry& t) { return double(t.memory_temperature_c); }},
      {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "gauge", nullptr,
       [](const GpuTelemetry& t) { return t.power_mw / 1000.0; }},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).",
       "counter", nullptr, [](const GpuTelemetry& t) { return double(t.energy_mj); }},
      {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "gauge", nullptr,
       [](const GpuTelemetry& t) { return double(t.sm_clock_mhz); }},
      {"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", "gauge", nullptr,
       [](const GpuTelemetry& t) { return double(t.mem_clock_mhz); }},
      {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.", "counter", nullptr,
       [](const GpuTelemetry& t) { return double(t.pcie_replays); }},
      {"DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", "gauge", nullptr,
       [](const GpuTelemetry& t) { return double(t.last_xid); }},
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.",
       "counter", nullptr, [](const GpuTelemetry& t) { return double(t.ecc_sbe); }},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.",
       "counter", nullptr, [](const GpuTelemetry& t) { return double(t.ecc_dbe); }},
      {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
       "Number of remapped rows for uncorrectable errors.", "counter",
       "Number of remapped rows for uncorrectable errors",
       [](const GpuTelemetry& t) { return double(t.remapped_unc); }},
      {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for correctable errors.",
       "counter", "Number of remapped rows for correctable errors",
       [](const GpuTelemetry& t) { return double(t.remapped_corr); }},
      {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed.", "gauge",
       "Whether remapping of rows has failed",
       [](const GpuTelemetry& t) { return t.remap_failure ? 1.0 : 0.0; }},
      {"DCGM_FI_DEV_PCIE_LINK_GEN", "PCIe current link generation.", "gauge", nullptr,
       [](const GpuTelemetry& t) { return double(t.pcie_gen); }},
      {"DCGM_FI_DEV_PCIE_LINK_WIDTH", "PCIe current link width.", "gauge", nullptr,
       [](const GpuTelemetry& t) { return double(t.pcie_width); }},
  };
  // The labels of one GPU, the same for every field: dcgm-exporter's, then who holds the GPU
  // (dcgm-exporter adds the pod's; Hangar the job's, its queue and user).
  std::vector<std::string> labels;
  labels.reserve(gpus.size());
  for (const auto& g : gpus) {
    labels.push_back("{gpu=\"" + std::to_string(g.index) + "\"," + uuid + "=\"" + Escape(g.t.uuid) +
                     "\",pci_bus_id=\"" + Escape(g.t.pci_bus_id) + "\",device=\"nvidia" +
                     std::to_string(g.index) + "\"," + model + "=\"" + Escape(g.model) + "\"," +
                     host + "=\"" + Escape(g.node) + "\",job=\"" + Escape(g.job) + "\",queue=\"" +
                     Escape(g.queue) + "\",user=\"" + Escape(g.user) + "\"}");
  }
  std::string out;
  for (const Field& f : kFields) {
    // promtool also refuses a metric named "..._COUNTER"; the lint-clean spelling drops it.
    std::string name = f.name;
    if (!dcgm_spelling && name == "DCGM_FI_DEV_PCIE_REPLAY_COUNTER")
      name = "DCGM_FI_DEV_PCIE_REPLAYS";
    const char* help = dcgm_spelling && f.dcgm_help ? f.dcgm_help : f.help;
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " +
           (dcgm_spelling ? f.dcgm_type : "gauge") + "\n";
    for (size_t i = 0; i < gpus.size(); ++i)
      out += name + labels[i] + " " + Number(f.value(gpus[i].t)) + "\n";
  }
  // Health, per GPU: one series with the state it is in (an alert on state!="healthy" fires for
  // a GPU quarantined for an Xid while its node still serves other work).
  out +=
      "# HELP hangar_gpu_health_state A GPU's health state (healthy, suspect, degraded, "
      "pending_validation, draining, "
      "quarantined, failed): 1 for the state it is in.\n# TYPE hangar_gpu_health_state gauge\n";
  for (const auto& g : gpus) {
    out += "hangar_gpu_health_state{gpu=\"" + std::to_string(g.index) + "\",uuid=\"" +
           Escape(g.t.uuid) + "\",hostname=\"" + Escape(g.node) + "\",state=\"" + Escape(g.health) +
           "\"} 1\n";
  }
  return out;
}

std::string ControllerMetrics::RenderNodeStates(
    const std::vector<std::pair<std::string, std::string>>& nodes) {
  std::string out =
      "# HELP hangar_node_state A node's state as `hangar nodes` shows it: 1 for the state it is "
      "in.\n"
      "# TYPE hangar_node_state gauge\n";
  for (const auto& [node, state] : nodes) {
    out += "hangar_node_state{node=\"" + Escape(node) + "\",state=\"" + Escape(state) + "\"} 1\n";
  }
  return out;
}

std::string ControllerMetrics::Render() {
  MutexLock l(mu_);
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace hangar::controller
