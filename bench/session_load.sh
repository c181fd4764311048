#!/usr/bin/env bash
# session_load: does the API stay quick while many interactive sessions stream? A real controller
# and one real agent on loopback (--auth none); one running job; SESSIONS (default 50) concurrent
# `hangar exec` sessions beside its task, each printing 4 KiB every 10 ms (~400 KiB/s, all of it
# carried agent -> controller -> CLI); meanwhile GET /healthz every 50 ms. Prints /healthz p50,
# p99 and max before the sessions (baseline) and while they stream, and the bytes the CLIs got.
#
#   bench/session_load.sh [BUILD_DIR] [SESSIONS] [SECONDS]
set -euo pipefail
build=${1:-build}
sessions=${2:-50}
seconds=${3:-20}
. "$(dirname "$0")/local_cluster.sh"
local_cluster_init "$build" session-load

cat > "$root/cluster.yaml" <<'YAML'
name: session-load
node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}
nodes: [{name: node-1}]
YAML
local_cluster_start node-1
python3 - "$hangar" "$url" "$sessions" "$seconds" "$root" <<'PY'
import json, os, subprocess, sys, time, urllib.request
hangar, url, sessions, seconds, root = sys.argv[1:6]
sessions, seconds = int(sessions), float(seconds)

def healthz(duration):
    times, failed, end = [], 0, time.monotonic() + duration
    while time.monotonic() < end:
        t0 = time.monotonic()
        try:
            urllib.request.urlopen(url + "/healthz", timeout=5).read()
            times.append((time.monotonic() - t0) * 1000)
        except Exception:
            failed += 1
        time.sleep(max(0, 0.05 - (time.monotonic() - t0)))
    times.sort()
    q = lambda p: times[min(len(times) - 1, int(p * len(times)))] if times else float("nan")
    return f"p50 {q(0.5):.1f} ms  p99 {q(0.99):.1f} ms  max {times[-1] if times else 0:.1f} ms  ({len(times)} ok, {failed} failed)"

stream = ("import sys, time\n"
          "line = 'x' * 4095 + '\\n'\n"
          f"end = time.monotonic() + {seconds + 5}\n"
          "while time.monotonic() < end:\n"
          "    sys.stdout.write(line); sys.stdout.flush(); time.sleep(0.01)\n")
spec = b"name: holder\ntasks: [{gpus: 1, command: [sleep, '3600']}]\n"
req = urllib.request.Request(url + "/v1/jobs", data=spec, headers={"Content-Type": "application/yaml"})
job = str(json.load(urllib.request.urlopen(req))["id"])
for _ in range(200):
    if json.load(urllib.request.urlopen(f"{url}/v1/jobs/{job}")).get("state") == "running":
        break
    time.sleep(0.1)
print(f"/healthz with no session:        {healthz(min(seconds, 10))}")
outs = [open(os.path.join(root, f"s{i}.out"), "wb") for i in range(sessions)]
procs = [subprocess.Popen([hangar, "exec", "--server", url, job, "--", "python3", "-c", stream],
                          stdout=outs[i], stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
         for i in range(sessions)]
time.sleep(2)  # all open and streaming
during = healthz(seconds)
for p in procs:
    p.wait()
got = sum(os.path.getsize(o.name) for o in outs)
bad = sum(1 for p in procs if p.returncode != 0)
print(f"/healthz while {sessions} sessions stream: {during}")
print(f"  the {sessions} CLIs got {got / 2**20:.0f} MiB in all; {bad} sessions failed")
PY
