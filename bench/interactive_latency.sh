#!/usr/bin/env bash
# interactive_latency: how long `hangar run -it -- true` takes from the command to its exit on an
# idle cluster -- submit, schedule, launch under a terminal on the node, attach through the
# controller's session port, the program's end and status -- RUNS times (default 50), each on a
# pseudo-terminal of its own (as a person's shell gives). A real controller and one real agent
# on loopback, --auth none; prints p50, p90, p99 and max in milliseconds.
#
# Then, in the same run, the same for Slurm's `srun --pty true` on the real Slurm 22.05 of
# bench/peers/slurm/ (one node, everything under a temporary folder; installed first with
# bench/peers/slurm/install.sh when missing). --no-slurm leaves it out.
#
#   bench/interactive_latency.sh [BUILD_DIR] [RUNS] [--no-slurm]
set -euo pipefail
build=${1:-build}
runs=${2:-50}
with_slurm=1
[[ ${3:-} == --no-slurm ]] && with_slurm=0
here=$(cd "$(dirname "$0")" && pwd)
. "$here/local_cluster.sh"
local_cluster_init "$build" interactive-bench

cat > "$root/cluster.yaml" <<'YAML'
name: interactive-bench
node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}
nodes: [{name: node-1}]
YAML
local_cluster_start node-1

# time_on_pty LABEL RUNS ARGV...: runs ARGV on a pseudo-terminal of its own RUNS times; prints
# the percentiles of command-to-exit.
time_on_pty() {
  python3 - "$@" <<'PY'
import os, pty, sys, time
label, runs, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
times = []
for i in range(runs):
    t0 = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    out = b""
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        out += data
    _, status = os.waitpid(pid, 0)
    times.append((time.monotonic() - t0) * 1000)
    os.close(fd)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"run {i}: {' '.join(argv)} exited {status}: {out.decode(errors='replace')}")
times.sort()
q = lambda p: times[min(len(times) - 1, int(p * len(times)))]
print(f"{label}, {runs} runs on an idle cluster (1 node, loopback):")
print(f"  p50 {q(0.50):.0f} ms   p90 {q(0.90):.0f} ms   p99 {q(0.99):.0f} ms   max {times[-1]:.0f} ms")
PY
}

time_on_pty "hangar run -it -- true" "$runs" "$hangar" run --server "$url" -it -- true
[[ $with_slurm -eq 1 ]] || exit 0

# The same on a real Slurm beside it (four nodes: configure.sh spreads them over four leaves; the
# step runs on one).
slurm="$here/peers/slurm"
command -v slurmctld >/dev/null 2>&1 || "$slurm/install.sh"
slurm_dir="$root/slurm"
slurm_cleanup() { "$slurm/stop.sh" "$slurm_dir" >/dev/null 2>&1 || true; local_cluster_cleanup; }
trap slurm_cleanup EXIT
SLURM_NODES=4 "$slurm/configure.sh" "$slurm_dir" >/dev/null
SLURM_NODES=4 "$slurm/start.sh" "$slurm_dir" >/dev/null
export SLURM_CONF=$slurm_dir/etc/slurm.conf
time_on_pty "srun --pty true (Slurm $(slurmctld -V | awk '{print $2}'))" "$runs" srun --pty true
