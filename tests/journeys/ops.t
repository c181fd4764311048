An operator's commands, each as a person runs it: a controller and a node agent started by hand,
`hangar status`, the safety valve, a backup refused while the SQLite store's controller runs and
taken once it stops, a restore into a new store that a controller starts on; the GPUs as the
agent sees them, a fractional task under MPS, a swarm of simulated agents, and the simulators on
the traces shipped in data/traces.

  $ . "$TESTDIR/journey.sh"
  $ cp -r "$HANGAR_SRC/examples" .
  $ P=$(free_port 2); export HANGAR_URL=http://127.0.0.1:$P
  $ hangar controller --cluster examples/clusters/dev-4x8.yaml --store sqlite://$PWD/hangar-dev/state.db --api 127.0.0.1:$P --agents 127.0.0.1:$((P + 1)) --auth none --insecure > controller.out 2>&1 &
  $ CTL=$!; wait_for 30 'curl -sf $HANGAR_URL/healthz'
  $ hangar agent --controller 127.0.0.1:$((P + 1)) --node node-1 --cluster examples/clusters/dev-4x8.yaml --state-dir $PWD/hangar-dev/agents/node-1 --stop-tasks-on-exit --insecure > agent.out 2>&1 &
  $ AGENT=$!; wait_ready 1
  $ hangar nodes | head -2
  NAME    STATE    LEAF    MODEL          GPUS  FREE  CPU FREE  MEM FREE  JOBS  REASON
  node-1  ready    leaf-0  H100-SXM-80GB  8     8     64        512Gi     0
  $ hangar status | sed "s/:$P /:PORT /"
  controller  http://127.0.0.1:PORT (single)
  leader      this one: its store has a single owner (no leader election)
  $ hangar reset-safety-valve
  safety valve reset: health rules may drain nodes again
  $ hangar submit examples/jobs/notebook.yaml
  submitted job 1 (notebook-alice)
  $ wait_job 1 succeeded 30

A SQLite store has one owner: the backup waits for its controller to stop.

  $ hangar backup --store sqlite://$PWD/hangar-dev/state.db --out backup.jsonl 2>&1 | sed "s|$PWD|.|g; s/pid [0-9]*/pid N/"
  hangar backup: the store ./hangar-dev/state.db is in use by another controller (pid N); a SQLite store has one owner: stop that controller, then back up (a PostgreSQL store can be backed up while its controllers run)
  $ kill -INT $AGENT; kill -TERM $CTL; wait
  $ hangar backup --store sqlite://$PWD/hangar-dev/state.db --out backup.jsonl | sed "s|$PWD|.|g; s/ [0-9]* values, [0-9]* events, [0-9]* audit records\(, [0-9]* history rows*\)*/ .../"
  backed up sqlite://./hangar-dev/state.db to backup.jsonl: 1 jobs, 1 nodes, ...
  $ hangar restore --store sqlite://$PWD/back/state.db --in backup.jsonl | sed "s|$PWD|.|g; s/ [0-9]* values, [0-9]* events, [0-9]* audit records\(, [0-9]* history rows*\)*/ .../"
  restored backup.jsonl into sqlite://./back/state.db: 1 jobs, 1 nodes, ...
  $ hangar restore --store sqlite://$PWD/back/state.db --in backup.jsonl 2>&1 | sed "s|$PWD|.|g"
  hangar restore: the store sqlite://./back/state.db is not empty; restore into an empty store, or add --force to erase everything in it and replace it with the backup
  $ hangar controller --cluster examples/clusters/dev-4x8.yaml --store sqlite://$PWD/back/state.db --secrets-key $PWD/hangar-dev/state.db.key --api 127.0.0.1:$P --agents 127.0.0.1:$((P + 1)) --auth none --insecure > restored.out 2>&1 &
  $ CTL=$!; wait_for 30 'curl -sf $HANGAR_URL/healthz'
  $ hangar jobs -o json | /usr/bin/python3 -c 'import json,sys; print([(j["id"], j["name"], j["state"]) for j in json.load(sys.stdin)["jobs"]])'
  [(1, 'notebook-alice', 'succeeded')]

A swarm of 4 simulated agents registers the cluster's nodes over real streams.

  $ hangar swarm --controller 127.0.0.1:$((P + 1)) --cluster examples/clusters/dev-4x8.yaml > swarm.out 2>&1 &
  $ SWARM=$!; wait_ready 4
  $ hangar nodes | awk '{print $1, $2}'
  NAME STATE
  node-1 ready
  node-2 ready
  node-3 ready
  node-4 ready
  $ kill -INT $SWARM $CTL; wait

The GPUs as an agent sees them (fake backend here; NVML on a GPU node), and a task's command under
its GPU's MPS daemon with the limits a quarter of the GPU gets:

  $ hangar gpu-check --fake-gpus 2 | head -3
  backend fake, driver fake-570.00, CUDA 13.0, 2 GPUs
  
  GPU  MODEL                        MEMORY  PCI BUS ID        NUMA  MIG       MINOR   NVLINK PEERS    UUID
  $ hangar mps-check --fake-gpus 1 --fraction 0.25 --state-dir $PWD/mps -- sh -c 'echo threads $CUDA_MPS_ACTIVE_THREAD_PERCENTAGE% memory $CUDA_MPS_PINNED_DEVICE_MEM_LIMIT' 2>&1 | grep threads
  threads 25% memory 0=20480M

The simulators on the shipped openb traces (data/traces):

  $ O=$HANGAR_SRC/data/traces/openb
  $ hangar sim fgd --nodes $O/openb_node_list_gpu_node.csv --pods $O/openb_pod_list_default.csv --policy fgd --seeds 42 --json fgd.json > fgd.out 2>&1; echo "exit $?"
  exit 0
  $ /usr/bin/python3 -c 'import json; r=json.load(open("fgd.json")); print(sorted(r)[:4])'
  ['alloc_at_100', 'alloc_at_130', 'cpu_scale', 'curves']
  $ hangar sim replay --format openb --trace $O/openb_pod_list_default.csv --policy fifo-backfill --json replay.json > replay.out 2>&1; echo "exit $?"
  exit 0
  $ /usr/bin/python3 -c 'import json; r=json.load(open("replay.json")); print(sorted(r)[:4])'
  ['asked_within', 'avg_jct_s', 'avg_queue_s', 'avg_runtime_s']
  $ cleanup
