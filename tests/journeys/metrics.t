/metrics as a Prometheus user reads it, on `hangar dev` with a job running: the default form passes
`promtool check metrics`; `?labels=dcgm` has dcgm-exporter's names, types and labels (its
etc/default-counters.csv), so its Grafana dashboards work unchanged; GPUs carry the job, queue and
user that hold them; a node's health state is a series an alert can watch.

  $ . "$TESTDIR/journey.sh"
  $ dev_start
  $ printf 'name: busy\ntasks:\n  - {name: main, gpus: 8, command: [sleep, "60"]}\n' > busy.yaml
  $ hangar submit busy.yaml
  submitted job 1 (busy)
  $ wait_job 1 running
  $ wait_for 20 'curl -sf $HANGAR_URL/metrics | grep -q "job=\"1\""'
  $ curl -sf $HANGAR_URL/metrics > metrics.txt && promtool check metrics < metrics.txt && echo clean
  clean
  $ grep -E '^hangar_node_state\{node="node-1",state="ready"\}' metrics.txt
  hangar_node_state{node="node-1",state="ready"} 1
  $ grep -E '^# TYPE hangar_(placements|agent_heartbeats)_total ' metrics.txt
  # TYPE hangar_placements_total counter
  # TYPE hangar_agent_heartbeats_total counter
  $ grep -c '^DCGM_FI_DEV_GPU_UTIL{.*job="1",queue="default",user="anonymous"' metrics.txt
  8
  $ curl -sf "$HANGAR_URL/metrics?labels=dcgm" > dcgm.txt
  $ grep '^# TYPE DCGM_FI_DEV_' dcgm.txt | sort | head -20
  # TYPE DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS counter
  # TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter
  # TYPE DCGM_FI_DEV_ECC_SBE_VOL_TOTAL counter
  # TYPE DCGM_FI_DEV_FB_FREE gauge
  # TYPE DCGM_FI_DEV_FB_USED gauge
  # TYPE DCGM_FI_DEV_GPU_TEMP gauge
  # TYPE DCGM_FI_DEV_GPU_UTIL gauge
  # TYPE DCGM_FI_DEV_MEMORY_TEMP gauge
  # TYPE DCGM_FI_DEV_MEM_CLOCK gauge
  # TYPE DCGM_FI_DEV_MEM_COPY_UTIL gauge
  # TYPE DCGM_FI_DEV_PCIE_LINK_GEN gauge
  # TYPE DCGM_FI_DEV_PCIE_LINK_WIDTH gauge
  # TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter
  # TYPE DCGM_FI_DEV_POWER_USAGE gauge
  # TYPE DCGM_FI_DEV_ROW_REMAP_FAILURE gauge
  # TYPE DCGM_FI_DEV_SM_CLOCK gauge
  # TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
  # TYPE DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS counter
  # TYPE DCGM_FI_DEV_XID_ERRORS gauge
  $ grep -m1 '^DCGM_FI_DEV_GPU_TEMP{' dcgm.txt | sed 's/} .*/}/'
  DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-fake-node-?-0",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="H100-SXM-80GB",Hostname="node-?",job="*",queue="*",user="*"} (glob)
  $ curl -s "$HANGAR_URL/metrics?labels=xml"; echo
  {"error":{"code":"INVALID_ARGUMENT","message":"labels must be dcgm (dcgm-exporter's names, types and labels) or clean (promtool-clean)"}}
  

A node quarantined for a hardware fault leaves `ready` in the state series (an alert on
state!="ready" fires):

  $ printf -- '- {gpu: 3, kind: xid, code: 79}\n' > hangar-dev/agents/node-4/x.yaml && mv hangar-dev/agents/node-4/x.yaml hangar-dev/agents/node-4/inject-faults.yaml
  $ wait_for 20 'curl -sf $HANGAR_URL/metrics | grep -q "hangar_node_state{node=\"node-4\",state=\"quarantined\"} 1"'
  $ curl -sf $HANGAR_URL/metrics | grep '^hangar_node_state{node="node-4"' | grep ' 1$'
  hangar_node_state{node="node-4",state="quarantined"} 1
  $ cleanup
