#!/usr/bin/env bash
# step_latency_vs_slurm: the launch latency of a one-task step inside a running 2-node allocation,
# Hangar against the real Slurm, in the same run. Slurm 22.05 (bench/peers/slurm/, 2 nodes x 8
# GPUs under a temporary folder, removed at the end) runs the same batch script as
# bench/step_latency.sh: RUNS times `srun -N1 -n1 -w NODE /bin/true`, alternating the two nodes,
# each timed from srun's start to its exit with `date +%s%N`; then bench/step_latency.sh runs
# Hangar's. Prints p50, p90, p99 and max of each, in milliseconds.
#
#   bench/step_latency_vs_slurm.sh [BUILD_DIR] [RUNS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
runs=${2:-100}
"$here/peers/slurm/install.sh" >/dev/null

dir=$(mktemp -d /tmp/slurm-step-bench.XXXXXX)
export SLURM_NODES=2 SLURM_CONF=$dir/slurm/etc/slurm.conf
cleanup() { "$here/peers/slurm/stop.sh" "$dir/slurm" --clean >/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
"$here/peers/slurm/configure.sh" "$dir/slurm" >/dev/null
"$here/peers/slurm/start.sh" "$dir/slurm" >/dev/null

mkdir -p "$dir/work"
cat > "$dir/work/steps.sbatch" <<EOF2
#!/bin/bash
#SBATCH -J step-bench -N 2 --gres=gpu:2 -c 1 --mem=1G -t 10 -o steps.out
srun /bin/true  # the first step warms nothing up on purpose: it is timed like the rest
for i in \$(seq $runs); do
  node=n00\$(( i % 2 + 1 ))
  t0=\$(date +%s%N)
  srun -N1 -n1 -w \$node /bin/true || echo "step \$i failed"
  t1=\$(date +%s%N)
  echo \$(( (t1 - t0) / 1000 )) >> times.us
done
EOF2
cd "$dir/work"
id=$(sbatch --parsable steps.sbatch)
for _ in $(seq 2400); do
  [[ -z $(squeue -h -j "$id" -o %T 2>/dev/null) ]] && break
  sleep 0.25
done
state=$(scontrol -o show job "$id" | grep -o 'JobState=[A-Z]*')
[[ $state == JobState=COMPLETED ]] || { echo "Slurm's job ended $state:"; cat steps.out; exit 1; }
if grep -q failed steps.out; then cat steps.out; exit 1; fi
echo "Slurm $(sinfo -V | awk '{print $2}'), 2 nodes (slurmd -N n001, n002 on this machine):"
python3 - "$runs" times.us <<'PY'
import sys
times = sorted(int(l) / 1000 for l in open(sys.argv[2]))
q = lambda p: times[min(len(times) - 1, int(p * len(times)))]
print(f"srun -N1 -n1 /bin/true inside a running 2-node allocation, {len(times)} steps (loopback):")
print(f"  p50 {q(0.50):.1f} ms   p90 {q(0.90):.1f} ms   p99 {q(0.99):.1f} ms   max {times[-1]:.1f} ms")
PY
cd "$here/.."
"$here/peers/slurm/stop.sh" "$dir/slurm" >/dev/null
echo "Hangar ($build/src/hangar), 2 agents on loopback:"
mkdir -p "$dir/hangar"
STEP_LATENCY_KEEP=$dir/hangar "$here/step_latency.sh" "$build" "$runs"

# Where Hangar's time goes: the controller's record of each timed step (laid out -> every task's
# exit reported) against srun's wall time, and the start of each client binary alone.
python3 - "$dir/hangar" "$build/src/hangar" <<'PY'
import json, subprocess, sys, time
d, hangar = sys.argv[1], sys.argv[2]
wall = [int(l) / 1000 for l in open(f"{d}/times.us")]
steps = sorted(json.load(open(f"{d}/steps.json"))["steps"], key=lambda s: s["step_id"])[1:]
inside = [s["end"] - s["start"] for s in steps]
rest = [w - i for w, i in zip(wall, inside)]
def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]
def line(name, xs):
    print(f"  {name:58s} p50 {q(xs, .5):6.1f} ms   p99 {q(xs, .99):6.1f} ms")
print("Where Hangar's step time goes:")
line("srun's wall time", wall)
line("controller: step laid out -> its task's exit recorded", inside)
line("the rest: srun's start, agent socket, the reply", rest)
for name, cmd in (("`hangar --version` (the binary's start)", [hangar, "--version"]),
                  ("Slurm's `srun --version` (the binary's start)", ["srun", "--version"])):
    ts = []
    for _ in range(100):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ts.append((time.perf_counter() - t0) * 1000)
    line(name, ts)
PY
