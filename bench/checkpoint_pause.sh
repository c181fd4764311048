#!/usr/bin/env bash
# checkpoint_pause: how long a task is paused by a checkpoint of SIZE_MB (default 256), with and
# without the agent's --scratch-dir (issue 19, item 5). A real controller and one real agent on
# loopback; each job writes SIZE_MB to $HANGAR_CHECKPOINT_DIR (dd conv=fsync: a careful task
# syncs its checkpoint), then runs `hangar checkpoint-done`, and records both times. With
# --scratch-dir the drain to the store runs after the report, in the agent: its time is read from
# the agent's log ("checkpoint durable ... N ms").
#
#   bench/checkpoint_pause.sh [BUILD_DIR] [SIZE_MB] [RUNS]
#
# Scratch and store are folders of this machine's one disk here: on a cluster the store is shared
# storage, the task's write without --scratch-dir goes at its speed, and the drain takes that long
# in the background instead.
set -euo pipefail
build=${1:-build}
size_mb=${2:-256}
runs=${3:-3}
hangar=$(realpath "$build/src/hangar")
root=$(mktemp -d /tmp/hangar-ckpt-bench-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT

cat > "$root/cluster.yaml" <<'EOF'
name: ckpt-bench
node_defaults: {gpus: 1, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 8, memory: 64Gi}
fabric:
  spines:
    - name: spine-0
      leaves:
        - {name: leaf-0, nodes: [{name: node-1}]}
EOF

cat > "$root/task.sh" <<EOF
#!/bin/sh
now() { echo \$(( \$(date +%s%N) / 1000000 )); }
t0=\$(now)
dd if=/dev/zero of="\$HANGAR_CHECKPOINT_DIR/weights" bs=1M count=$size_mb conv=fsync 2>/dev/null
t1=\$(now)
hangar checkpoint-done --path "\$HANGAR_CHECKPOINT_DIR/weights" --step 1 2>/dev/null
t2=\$(now)
echo "\$(( t1 - t0 )) \$(( t2 - t1 ))" > "\$OUT_FILE"
EOF

run_mode() {  # $1: scratch or shared
  local mode=$1 dir="$root/$1" port=$((20000 + RANDOM % 20000))
  mkdir -p "$dir/out"
  "$hangar" controller --cluster "$root/cluster.yaml" --api "127.0.0.1:$port" --agents "127.0.0.1:$((port + 1))" \
    --store "sqlite://$dir/state.db" --checkpoint-root "$dir/store" --auth none --insecure \
    > "$dir/controller.log" 2>&1 &
  pids+=($!)
  local extra=()
  [[ $mode == scratch ]] && extra=(--scratch-dir "$dir/scratch")
  sleep 1
  "$hangar" agent --controller "127.0.0.1:$((port + 1))" --node node-1 --cluster "$root/cluster.yaml" \
    --state-dir "$dir/agent" --insecure --stop-tasks-on-exit "${extra[@]}" > "$dir/agent.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$port/v1/nodes/node-1" 2>/dev/null | grep -q '"state":"ready"' && break
    sleep 0.2
  done
  for i in $(seq "$runs"); do
    cat > "$dir/job.yaml" <<EOF
name: ckpt-$i
tasks:
  - gpus: 1
    command: ["/bin/sh", "$root/task.sh"]
    env: {OUT_FILE: "$dir/out/$i"}
EOF
    "$hangar" submit --server "http://127.0.0.1:$port" "$dir/job.yaml" > /dev/null
    for _ in $(seq 600); do [[ -s $dir/out/$i ]] && break; sleep 0.1; done
    read -r write_ms report_ms < "$dir/out/$i"
    local drain_ms="-"
    if [[ $mode == scratch ]]; then
      for _ in $(seq 600); do
        [[ $(grep -c "checkpoint durable" "$dir/agent.log") -ge $i ]] && break
        sleep 0.1
      done
      drain_ms=$(grep "checkpoint durable" "$dir/agent.log" | sed -n "${i}p" | sed -E 's/.*; ([0-9]+) ms\)$/\1/')
    fi
    echo "mode=$mode run=$i size_mb=$size_mb write_ms=$write_ms checkpoint_done_ms=$report_ms pause_ms=$((write_ms + report_ms)) background_drain_ms=$drain_ms"
  done
}

run_mode shared
run_mode scratch
