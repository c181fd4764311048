#!/usr/bin/env bash
# step_latency: how long one `srun -N1 -n1 /bin/true` takes inside a running 2-node allocation,
# from srun's start to its exit -- the request through the node's agent socket to the controller,
# the step's layout and record, the exec beside the job's task on the chosen node, the exit back
# to srun. A real controller and two real agents on loopback, --auth none; a `hangar sbatch` job of
# two nodes runs RUNS steps (default 100), alternating its nodes, and times each; prints p50, p90,
# p99 and max in milliseconds.
#
#   bench/step_latency.sh [BUILD_DIR] [RUNS]
set -euo pipefail
build=${1:-build}
runs=${2:-100}
. "$(dirname "$0")/local_cluster.sh"
local_cluster_init "$build" step-bench

cat > "$root/cluster.yaml" <<'YAML'
name: step-bench
node_defaults: {gpus: 2, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 8, memory: 32Gi}
nodes: [{name: node-1}, {name: node-2}]
YAML
local_cluster_start node-1 node-2
for _ in $(seq 100); do
  [ "$("$hangar" nodes --server "$url" 2>/dev/null | grep -c ready)" = 2 ] && break
  sleep 0.1
done

mkdir -p "$root/work"
cat > "$root/work/steps.sbatch" <<EOF2
#!/bin/bash
#SBATCH -J step-bench -N 2 --gres=gpu:2 -c 1 --mem=1G -t 10 -o steps.out
srun /bin/true  # the first step warms nothing up on purpose: it is timed like the rest
for i in \$(seq $runs); do
  node=node-\$(( i % 2 + 1 ))
  t0=\$(date +%s%N)
  srun -N1 -n1 -w \$node /bin/true || echo "step \$i failed"
  t1=\$(date +%s%N)
  echo \$(( (t1 - t0) / 1000 )) >> times.us
done
EOF2
cd "$root/work"
id=$("$hangar" sbatch --parsable steps.sbatch --server "$url")
for _ in $(seq 1200); do
  state=$("$hangar" job "$id" -o json --server "$url" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
  case $state in succeeded | failed | cancelled | timed_out) break ;; esac
  sleep 0.5
done
[ "$state" = succeeded ] || { echo "the job ended $state:"; cat steps.out; exit 1; }
if grep -q failed steps.out; then cat steps.out; exit 1; fi
# STEP_LATENCY_KEEP=DIR keeps the times and the controller's step records (bench/step_latency_vs_slurm.sh).
if [ -n "${STEP_LATENCY_KEEP:-}" ]; then
  cp times.us "$STEP_LATENCY_KEEP/"
  curl -sf "$url/v1/jobs/$id/steps" > "$STEP_LATENCY_KEEP/steps.json"
fi
python3 - "$runs" times.us <<'PY'
import sys
runs = int(sys.argv[1])
times = sorted(int(l) / 1000 for l in open(sys.argv[2]))
q = lambda p: times[min(len(times) - 1, int(p * len(times)))]
print(f"srun -N1 -n1 /bin/true inside a running 2-node allocation, {len(times)} steps (loopback):")
print(f"  p50 {q(0.50):.1f} ms   p90 {q(0.90):.1f} ms   p99 {q(0.99):.1f} ms   max {times[-1]:.1f} ms")
PY
