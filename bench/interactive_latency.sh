#!/usr/bin/env bash
# interactive_latency: how long `hangar run -it -- true` takes from the command to its exit on an
# idle cluster -- submit, schedule, launch under a terminal on the node, attach through the
# controller's session port, the program's end and status -- RUNS times (default 50), each on a
# pseudo-terminal of its own (as a person's shell gives). A real controller and one real agent
# on loopback, --auth none; prints p50, p90, p99 and max in milliseconds.
#
#   bench/interactive_latency.sh [BUILD_DIR] [RUNS]
set -euo pipefail
build=${1:-build}
runs=${2:-50}
. "$(dirname "$0")/local_cluster.sh"
local_cluster_init "$build" interactive-bench

cat > "$root/cluster.yaml" <<'YAML'
name: interactive-bench
node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}
nodes: [{name: node-1}]
YAML
local_cluster_start node-1

python3 - "$hangar" "$url" "$runs" <<'PY'
import os, pty, sys, time
hangar, url, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
times = []
for i in range(runs):
    t0 = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(hangar, [hangar, "run", "--server", url, "-it", "--", "true"])
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
        sys.exit(f"run {i}: hangar run -it -- true exited {status}: {out.decode(errors='replace')}")
times.sort()
q = lambda p: times[min(len(times) - 1, int(p * len(times)))]
print(f"hangar run -it -- true, {runs} runs on an idle cluster (1 node, loopback):")
print(f"  p50 {q(0.50):.0f} ms   p90 {q(0.90):.0f} ms   p99 {q(0.99):.0f} ms   max {times[-1]:.0f} ms")
PY
