#!/usr/bin/env bash
# keystroke_latency: a terminal's round trip through Hangar -- a key typed at `hangar run -it`
# travels CLI -> controller's session port -> agent -> the task's pseudo-terminal, where a program
# in raw mode answers it with its upper case, which comes back the same way (so what is timed is
# the program's answer, never a terminal's local echo) -- KEYS times (default 500), one key at a
# time, each from its write to its answer on the person's side. A real controller and one real
# agent on loopback, --auth none; prints p50, p90, p99 and max in milliseconds (goal: p99 < 20 ms).
#
#   bench/keystroke_latency.sh [BUILD_DIR] [KEYS]
set -euo pipefail
build=${1:-build}
keys=${2:-500}
. "$(dirname "$0")/local_cluster.sh"
local_cluster_init "$build" keystroke-bench

cat > "$root/cluster.yaml" <<'YAML'
name: keystroke-bench
node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}
nodes: [{name: node-1}]
YAML
local_cluster_start node-1

python3 - "$hangar" "$url" "$keys" <<'PY'
import os, pty, select, sys, time
hangar, url, keys = sys.argv[1], sys.argv[2], int(sys.argv[3])
pid, fd = pty.fork()
if pid == 0:
    # On the node: a raw terminal that answers each key with its upper case, so the answer is
    # the program's, never a terminal's echo on either side.
    upper = ("import os, tty\ntty.setraw(0)\nwhile True:\n"
             "    c = os.read(0, 1)\n    os.write(1, c.upper())\n    if c == b'q': break\n")
    os.execv(hangar, [hangar, "run", "--server", url, "-it", "--", "python3", "-c", upper])
seen = b""

def read_until(want, timeout):
    global seen
    end = time.monotonic() + timeout
    while want not in seen:
        left = end - time.monotonic()
        if left <= 0:
            sys.exit(f"no {want!r} within {timeout} s; the terminal showed: {seen[-400:]!r}")
        r, _, _ = select.select([fd], [], [], left)
        if r:
            seen += os.read(fd, 4096)
    seen = seen[seen.index(want) + len(want):]

read_until(b"submitted interactive job", 60)
# Attached once a key comes back: until then what is typed waits in the queue or is not yet read.
for _ in range(600):
    os.write(fd, b"z")
    r, _, _ = select.select([fd], [], [], 0.1)
    if r:
        seen += os.read(fd, 4096)
        if b"Z" in seen:
            break
else:
    sys.exit(f"the session never echoed a key; the terminal showed: {seen[-400:]!r}")
time.sleep(0.5)
r, _, _ = select.select([fd], [], [], 0.1)
while r:  # what is still in flight from the probing
    os.read(fd, 4096)
    r, _, _ = select.select([fd], [], [], 0.2)
seen = b""
times = []
for i in range(keys):
    key = bytes([ord("a") + i % 16])  # never q
    t0 = time.monotonic()
    os.write(fd, key)
    read_until(key.upper(), 10)
    times.append((time.monotonic() - t0) * 1000)
os.write(fd, b"q")  # the program ends, and so does hangar run
os.waitpid(pid, 0)
times.sort()
q = lambda p: times[min(len(times) - 1, int(p * len(times)))]
print(f"a key typed at hangar run -it, answered by the program on the node, {keys} keys (1 node, loopback):")
print(f"  p50 {q(0.50):.1f} ms   p90 {q(0.90):.1f} ms   p99 {q(0.99):.1f} ms   max {times[-1]:.1f} ms")
PY
