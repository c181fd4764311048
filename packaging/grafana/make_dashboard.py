#!/usr/bin/env python3
# Writes hangar.json beside this script: the Grafana dashboard the .deb ships in
# /usr/share/hangar/grafana/. Edit here and run it again; tests/packaging/deb_test.sh checks that
# every series the dashboard names is one the controller serves (src/controller/metrics.cc).
import json
import os
HERE = os.path.dirname(os.path.abspath(__file__))
DS = {"type": "prometheus", "uid": "${datasource}"}
panels = []
pid = [0]
y = [0]
def nid():
    pid[0] += 1
    return pid[0]
def row(title):
    panels.append({"type": "row", "title": title, "id": nid(), "collapsed": False,
                   "gridPos": {"h": 1, "w": 24, "x": 0, "y": y[0]}, "panels": []})
    y[0] += 1
cur = {"x": 0, "h": 0}
def place(w, h):
    if cur["x"] + w > 24:
        y[0] += cur["h"]; cur["x"] = 0; cur["h"] = 0
    g = {"h": h, "w": w, "x": cur["x"], "y": y[0]}
    cur["x"] += w; cur["h"] = max(cur["h"], h)
    return g
def flush():
    y[0] += cur["h"]; cur["x"] = 0; cur["h"] = 0
def target(expr, legend="", ref="A", instant=False, fmt=None):
    t = {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref}
    if instant:
        t["instant"] = True; t["range"] = False
    if fmt:
        t["format"] = fmt
    return t
def ts(title, targets, unit="short", w=8, h=8, desc="", stack=False, mn=None, mx=None):
    fc = {"defaults": {"unit": unit, "custom": {"fillOpacity": 10, "lineWidth": 1,
          "stacking": {"mode": "normal" if stack else "none", "group": "A"}}}, "overrides": []}
    if mn is not None: fc["defaults"]["min"] = mn
    if mx is not None: fc["defaults"]["max"] = mx
    panels.append({"type": "timeseries", "title": title, "description": desc, "id": nid(), "datasource": DS,
                   "gridPos": place(w, h), "fieldConfig": fc,
                   "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                               "tooltip": {"mode": "multi", "sort": "desc"}},
                   "targets": [target(*t) if isinstance(t, tuple) else t for t in targets]})
def stat(title, expr, unit="short", w=4, h=4, desc="", thresholds=None):
    steps = thresholds or [{"color": "green", "value": None}]
    panels.append({"type": "stat", "title": title, "description": desc, "id": nid(), "datasource": DS,
                   "gridPos": place(w, h),
                   "fieldConfig": {"defaults": {"unit": unit, "thresholds": {"mode": "absolute", "steps": steps}},
                                   "overrides": []},
                   "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                               "colorMode": "value", "graphMode": "area", "textMode": "auto"},
                   "targets": [target(expr, "", "A", instant=True)]})
def table(title, expr, w=12, h=8, desc="", exclude=()):
    panels.append({"type": "table", "title": title, "description": desc, "id": nid(), "datasource": DS,
                   "gridPos": place(w, h), "fieldConfig": {"defaults": {}, "overrides": []},
                   "options": {"showHeader": True},
                   "transformations": [{"id": "organize", "options": {
                       "excludeByName": {k: True for k in ("Time", "__name__", "instance", "job") + tuple(exclude)}}}],
                   "targets": [target(expr, "", "A", instant=True, fmt="table")]})

def dcgm(metric, wrap=None):
    # The controller's clean form labels hostname/uuid/model_name; its dcgm form (and
    # dcgm-exporter) Hostname/UUID/modelName. Either matches the node filter.
    sel = lambda host: f'{metric}{{{host}=~"$node",queue=~"$queue"}}'
    if wrap:
        return f'{wrap.format(sel("hostname"))} or {wrap.format(sel("Hostname"))}'
    return f'{sel("hostname")} or {sel("Hostname")}'
GPU = "{{hostname}}{{Hostname}} GPU {{gpu}}"
red = [{"color": "green", "value": None}, {"color": "red", "value": 1}]

row("Cluster (the controller's series)")
stat("Agents connected", "hangar_agents_connected", desc="Agent streams open (hangar_agents_connected).")
stat("Nodes not ready", 'sum(hangar_nodes{state!="ready"})', thresholds=red,
     desc="Nodes in any state but ready: lost, draining, quarantined, ... (hangar_nodes).")
stat("GPUs allocated", 'sum(hangar_gpus{state="allocated"}) / sum(hangar_gpus)', unit="percentunit",
     desc="Allocated GPUs (fractions count) over all GPUs (hangar_gpus).")
stat("Jobs pending", 'sum(hangar_jobs{state="pending"})', desc="hangar_jobs{state=\"pending\"}.")
stat("Jobs running", 'sum(hangar_jobs{state=~"running|starting|preempting"})')
stat("Nodes lost (24h)", "increase(hangar_nodes_lost_total[24h])", thresholds=red,
     desc="Times a node went silent past the heartbeat timeout (hangar_nodes_lost_total).")
flush()
ts("Jobs by state", [("sum by (state) (hangar_jobs)", "{{state}}")], desc="hangar_jobs")
ts("Nodes by state", [("sum by (state) (hangar_nodes)", "{{state}}")], desc="hangar_nodes")
ts("GPUs by state", [("sum by (state) (hangar_gpus)", "{{state}}")], stack=True,
   desc="hangar_gpus: allocated, idle, fragmented (free on a partly used GPU), draining, failed, unavailable.")
ts("Jobs submitted and gangs placed", [("rate(hangar_jobs_submitted_total[$__rate_interval])", "submitted", "A"),
                                       ("rate(hangar_placements_total[$__rate_interval])", "placed", "B")],
   unit="ops", desc="hangar_jobs_submitted_total, hangar_placements_total")
ts("Scheduling cycle", [
    ("histogram_quantile(0.5, sum by (le) (rate(hangar_scheduler_cycle_seconds_bucket[$__rate_interval])))", "p50", "A"),
    ("histogram_quantile(0.99, sum by (le) (rate(hangar_scheduler_cycle_seconds_bucket[$__rate_interval])))", "p99", "B"),
    ("rate(hangar_scheduler_cycle_seconds_sum[$__rate_interval]) / rate(hangar_scheduler_cycle_seconds_count[$__rate_interval])", "mean", "C")],
   unit="s", desc="hangar_scheduler_cycle_seconds: wall time of one scheduling cycle.")
ts("Heartbeats", [("hangar_heartbeat_lag_seconds", "lag (p90)", "A"),
                  ("rate(hangar_agent_heartbeats_total[$__rate_interval])", "received per second", "B")],
   desc="hangar_heartbeat_lag_seconds (how late heartbeats arrive) and hangar_agent_heartbeats_total.")
ts("MIG reshapes", [("sum by (result) (rate(hangar_mig_reshapes_total[$__rate_interval]))", "{{result}}", "A"),
                    ("hangar_mig_reshapes_in_flight", "in flight", "B"),
                    ("rate(hangar_mig_reshape_seconds_total[$__rate_interval]) / clamp_min(sum(rate(hangar_mig_reshapes_total[$__rate_interval])), 1e-9)", "mean seconds", "C")],
   desc="MIG GPUs re-cut for the queue (hangar_mig_reshapes_total by result, hangar_mig_reshapes_in_flight) and their mean time, sent to answered (hangar_mig_reshape_seconds_total); docs/mig.md.")
ts("Agent messages refused", [("sum by (reason) (rate(hangar_agent_messages_refused_total[$__rate_interval]))", "{{reason}}")],
   unit="ops", desc="Forged or out-of-place agent messages (hangar_agent_messages_refused_total), by reason.")
ts("REST connections", [("hangar_http_connections_open", "open", "A"),
                        ("hangar_http_requests_in_flight", "requests in flight", "B"),
                        ("rate(hangar_http_connections_accepted_total[$__rate_interval])", "accepted per second", "C")],
   desc="hangar_http_connections_open, hangar_http_requests_in_flight, hangar_http_connections_accepted_total.")
ts("REST connections refused or cut", [
    ("sum by (reason) (rate(hangar_http_connections_refused_total[$__rate_interval]))", "refused: {{reason}}", "A"),
    ("sum by (reason) (rate(hangar_http_connections_cut_total[$__rate_interval]))", "cut: {{reason}}", "B"),
    ("rate(hangar_http_idle_connections_closed_total[$__rate_interval])", "idle closed", "C")],
   unit="ops", desc="Connections over the caps (hangar_http_connections_refused_total), cut for slow headers or "
                    "bodies (hangar_http_connections_cut_total), idle ones closed (hangar_http_idle_connections_closed_total).")
ts("Nodes lost", [("increase(hangar_nodes_lost_total[$__rate_interval])", "lost")],
   desc="hangar_nodes_lost_total")
ts("Agents connected", [("hangar_agents_connected", "streams")], desc="hangar_agents_connected")
ts("API streams", [("hangar_http_streams_open", "open", "A"),
                  ("sum by (reason) (rate(hangar_http_streams_refused_total[$__rate_interval]))", "refused: {{reason}}", "B")],
   desc="hangar_http_streams_open: live feeds and log follows held by the stream pump; "
        "hangar_http_streams_refused_total: refused over a cap or dropped as a slow reader.")
ts("Store integrity failures", [("hangar_store_integrity_failures_total", "failures")],
   desc="hangar_store_integrity_failures_total: integrity checks of the store that failed (the controller "
        "then refuses every write and stops).")
flush()
table("Nodes not ready", 'hangar_node_state{state!="ready"} == 1', exclude=("Value",),
      desc="hangar_node_state: each node whose state is not ready, as `hangar nodes` shows it.")
table("GPUs not healthy", 'hangar_gpu_health_state{state!="healthy"} == 1', exclude=("Value",),
      desc="hangar_gpu_health_state: each GPU that is suspect, degraded, draining, quarantined, ... (docs/health.md).")
flush()

row("Goodput (docs/goodput.md, \"In the controller\")")
stat("ETTR", "hangar_goodput_ettr", unit="percentunit", w=4, h=8,
     desc="hangar_goodput_ettr: productive GPU time over all GPU time of the jobs the controller holds.")
ts("Where the GPU time went", [("hangar_goodput_gpu_seconds / 3600", "{{part}}")], w=10, stack=True,
   desc="hangar_goodput_gpu_seconds by part (productive, setup, restart, lost_work, requeue_wait), in GPU-hours.")
ts("Interruptions by cause", [("hangar_goodput_interruptions", "{{cause}}")], w=10,
   desc="hangar_goodput_interruptions: of the jobs held, by cause (hang, health, node_lost, preemption, ...).")
flush()
table("Jobs with the lowest ETTR", "bottomk(10, hangar_job_ettr)", w=24, h=6,
      desc="hangar_job_ettr: each started, unfinished job's effective training time ratio so far; `hangar goodput JOB` says why.")
flush()

row("GPUs (DCGM fields: the controller's /metrics, or dcgm-exporter)")
ts("GPU utilization", [(dcgm("DCGM_FI_DEV_GPU_UTIL"), GPU)], unit="percent", w=12, mn=0, mx=100,
   desc="DCGM_FI_DEV_GPU_UTIL")
ts("GPU utilization by queue", [(dcgm("DCGM_FI_DEV_GPU_UTIL", "avg by (queue) ({})"), "{{queue}}")], unit="percent",
   w=12, mn=0, mx=100, desc="DCGM_FI_DEV_GPU_UTIL averaged over the GPUs each queue holds (queue=\"\": idle GPUs).")
ts("Memory copy utilization", [(dcgm("DCGM_FI_DEV_MEM_COPY_UTIL"), GPU)], unit="percent", mn=0, mx=100,
   desc="DCGM_FI_DEV_MEM_COPY_UTIL")
ts("Framebuffer used", [(f'100 * ({dcgm("DCGM_FI_DEV_FB_USED")}) / (({dcgm("DCGM_FI_DEV_FB_USED")}) + ({dcgm("DCGM_FI_DEV_FB_FREE")}))', GPU)],
   unit="percent", mn=0, mx=100, desc="DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)")
ts("Power", [(dcgm("DCGM_FI_DEV_POWER_USAGE"), GPU)], unit="watt", desc="DCGM_FI_DEV_POWER_USAGE")
ts("GPU temperature", [(dcgm("DCGM_FI_DEV_GPU_TEMP"), GPU)], unit="celsius", desc="DCGM_FI_DEV_GPU_TEMP")
ts("Memory temperature", [(dcgm("DCGM_FI_DEV_MEMORY_TEMP"), GPU)], unit="celsius", desc="DCGM_FI_DEV_MEMORY_TEMP")
ts("Energy", [(dcgm("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "rate({}[$__rate_interval]) / 1000"), GPU)], unit="watt",
   desc="DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ since boot) as average power.")
ts("SM clock", [(dcgm("DCGM_FI_DEV_SM_CLOCK"), GPU)], unit="rotmhz", desc="DCGM_FI_DEV_SM_CLOCK")
ts("Memory clock", [(dcgm("DCGM_FI_DEV_MEM_CLOCK"), GPU)], unit="rotmhz", desc="DCGM_FI_DEV_MEM_CLOCK")
ts("PCIe replays", [(dcgm("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "rate({}[$__rate_interval])") + " or " +
                     dcgm("DCGM_FI_DEV_PCIE_REPLAYS", "rate({}[$__rate_interval])"), GPU)], unit="ops",
   desc="DCGM_FI_DEV_PCIE_REPLAY_COUNTER (dcgm form, dcgm-exporter), DCGM_FI_DEV_PCIE_REPLAYS (the controller's promtool-clean form).")
ts("ECC errors", [(dcgm("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "increase({}[$__rate_interval])"), "SBE " + GPU, "A"),
                  (dcgm("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "increase({}[$__rate_interval])"), "DBE " + GPU, "B")],
   desc="DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, DCGM_FI_DEV_ECC_DBE_VOL_TOTAL (volatile single- and double-bit)")
ts("Remapped rows", [(dcgm("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"), "uncorrectable " + GPU, "A"),
                     (dcgm("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"), "correctable " + GPU, "B"),
                     (dcgm("DCGM_FI_DEV_ROW_REMAP_FAILURE"), "remap failed " + GPU, "C")],
   desc="DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS, DCGM_FI_DEV_ROW_REMAP_FAILURE")
ts("PCIe link", [(dcgm("DCGM_FI_DEV_PCIE_LINK_GEN"), "gen " + GPU, "A"),
                 (dcgm("DCGM_FI_DEV_PCIE_LINK_WIDTH"), "width " + GPU, "B")],
   desc="DCGM_FI_DEV_PCIE_LINK_GEN, DCGM_FI_DEV_PCIE_LINK_WIDTH: a downgraded link shows here first.")
flush()
table("Last Xid per GPU", dcgm("DCGM_FI_DEV_XID_ERRORS", "{} != 0"), w=24,
      desc="DCGM_FI_DEV_XID_ERRORS: the last Xid each GPU reported (0: none).")
flush()

dash = {
    "__inputs": [], "__requires": [
        {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "9.0.0"},
        {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"}],
    "uid": "hangar", "title": "Hangar", "description":
        "Hangar's controller (/metrics: hangar_* series) and its GPUs (DCGM_FI_DEV_* series, in the controller's "
        "clean or dcgm form, or from dcgm-exporter). Shipped in /usr/share/hangar/grafana/hangar.json.",
    "tags": ["hangar", "gpu", "dcgm"], "editable": True, "graphTooltip": 1, "schemaVersion": 38, "version": 1,
    "refresh": "30s", "time": {"from": "now-6h", "to": "now"}, "timezone": "",
    "annotations": {"list": []}, "links": [],
    "templating": {"list": [
        {"type": "datasource", "name": "datasource", "label": "Prometheus", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []},
        {"type": "query", "name": "node", "label": "Node", "datasource": DS,
         "definition": "label_values(hangar_node_state, node)",
         "query": {"query": "label_values(hangar_node_state, node)", "refId": "node"},
         "includeAll": True, "allValue": ".*", "multi": True, "current": {}, "refresh": 2, "sort": 1,
         "hide": 0, "regex": "", "options": []},
        {"type": "query", "name": "queue", "label": "Queue", "datasource": DS,
         "definition": "label_values(DCGM_FI_DEV_GPU_UTIL, queue)",
         "query": {"query": "label_values(DCGM_FI_DEV_GPU_UTIL, queue)", "refId": "queue"},
         "includeAll": True, "allValue": ".*", "multi": True, "current": {}, "refresh": 2, "sort": 1,
         "hide": 0, "regex": "", "options": []}]},
    "panels": panels,
}
json.dump(dash, open(os.path.join(HERE, "hangar.json"), "w"), indent=2)
open(os.path.join(HERE, "hangar.json"), "a").write("\n")
print(len(panels), "panels")
