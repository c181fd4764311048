#!/usr/bin/python3
"""chaos: a checkpointing training gang through injected failures, on real processes.

A real controller and four real agents (fake GPUs, one each) on loopback, SQLite in a temporary
folder. One gang of two ranks runs a training loop (tools/python's helper is not needed: each step
is a sleep of --step seconds and a `hangar progress` report); rank 0 writes a checkpoint every
--every steps ($HANGAR_CHECKPOINT_DIR/step, then `hangar checkpoint-done`) and on the checkpoint
signal; a restarted attempt resumes from the step in that file. Faults, in turn, each once the gang
has run --settle seconds since it last recovered:

  agent    kill -9 of the agent of a node the gang runs on (restarted once the gang has moved)
  hang     SIGSTOP of rank 0's process: found by the job's hang_timeout (--hang-timeout)
  xid      Xid 79 on the GPU of a node the gang runs on (fake GPU fault script); the node is
           reported repaired (`hangar remediate --remedy repair`) once the gang has moved (a third
           reboot for the same Xid would fail the node for good)
  slow     the GPU of a node the gang runs on slowed to 0.7x (fake GPU fault script, `kind: slow`,
           for 20 s); the rank there takes 1/0.7 of its step time, as its work would on that GPU
           (the task reads the factor from a file the bench writes beside the fault: nothing runs
           on a fake GPU). The job asks straggler detection (straggler_factor 1.2, 5 reports), so
           the rank is named a straggler (straggler_named_s: from the fault to the controller's
           event) and, with --spares, its node is replaced at the gang's next checkpoint

Per fault: seconds from the fault to the restarted attempt's first progress report (recover),
for a hang the seconds from SIGSTOP to the controller's `hung` event, the work the controller says
the fault lost (GET /v1/jobs/ID/goodput) and how it reckoned it. At the end: whether two attempts'
tasks ever ran at once (overlapping_attempts, from each task's start and end times), whether an
attempt ever resumed from a step older than the last checkpoint made durable before the fault
(checkpoints_lost), and the job's goodput as the controller accounts it.

With --spares N the cluster keeps N hot spares (cluster.yaml `spares: {per: leaf, count: N}`, the
highest-numbered nodes): a fault on a node of the gang then replaces that node in place (the gang
keeps its other node and restarts on a spare, docs/goodput.md) instead of requeueing it whole.
With --fill, a guaranteed job of its own (sleep) fills each node that is neither the gang's nor a
spare, so that a gang requeued whole finds no free node. With --spare-work, opportunistic jobs
(sleep, 2 s grace) run on the spares, which take opportunistic work only: each replacement evicts
the one on the spare it takes (spare_work_evicted counts them), and it runs again on the next
spare once the pool refills.

With --hold DURATION the gang's policy holds its healthy nodes when nothing can replace a failed
one (`on_node_failure: {wait_for_node: DURATION}`, docs/goodput.md): no spares, every other node
filled (--fill), and one more guaranteed job waiting for any GPU (the taker). Each fault (agent or
xid) takes a node out for --out seconds; then the node is brought back (agent restarted, Xid
repaired) and the gang restarts on it in place. healthy_released_while_holding counts the faults
after which the taker was seen running: it could only have run on a healthy node the gang was
holding (0 in a correct run).

With --swarm N, N more nodes (sw-1..sw-N, in leaves of 32) are played by one `hangar swarm`
process and kept busy by a stream of 20 s jobs (never on the four real nodes, which the gang
keeps to by exclude_nodes): the same faults on the real nodes, with the controller scheduling and
hearing a fleet of N + 4 nodes. --swarm 1020 is the 1,024-node run.

With --preflight every start and restart of the gang first runs the gang preflight (cluster.yaml
`preflight: {min_nodes: 2, budget: 30s, allreduce_mib: 16}`, docs/goodput.md): the recover times
then include it, and `preflight` in the JSON counts the passes and failures and gives their seconds.
Defaults: 20 faults, the four kinds in turn, one spare: `chaos --json` alone (build/bench/chaos, the
default build's wrapper) is the issue's run, about 7 minutes here.

Usage: bench/chaos.py [BUILD_DIR] [--faults N] [--kinds agent,hang,xid,slow] [--spares N]
                      [--remedy repair|reboot] [--fill] [--hold DURATION [--out S]] [--swarm N]
                      [--preflight] [--json]
Prints one line per fault and a JSON object last (only the JSON with --json).
"""
import argparse
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

CLUSTER = """name: chaos
node_defaults: {gpus: 1, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 8, memory: 32Gi}
fabric:
  spines:
    - name: spine-0
      leaves:
        - {name: leaf-0, nodes: [{name: "node-[1-4]"}]}
"""
NODES = ["node-1", "node-2", "node-3", "node-4"]
SWARM_HEAD = """name: chaos-swarm
node_defaults: {gpus: 1, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 8, memory: 32Gi}
fabric:
  spines:
"""


def swarm_spine(count):
    """The swarm's nodes sw-1..sw-COUNT as a spine of leaves of 32, in cluster.yaml's form."""
    lines = ["    - name: spine-swarm", "      leaves:"]
    for k, first in enumerate(range(1, count + 1, 32)):
        last = min(count, first + 31)
        lines.append(f'        - {{name: leaf-sw-{k}, nodes: [{{name: "sw-[{first}-{last}]"}}]}}')
    return "\n".join(lines) + "\n"

# Each task: its pid to $OUT/pid.TASK_ID; "start|step|ckpt|end MS ATTEMPT RANK STEP" lines to
# $OUT/runs (a step line at every step: the last sign of life of a task killed without warning).
TASK = r"""#!/bin/sh
OUT='{out}'
now() {{ echo $(( $(date +%s%N) / 1000000 )); }}
A="$HANGAR_RESTART_COUNT"
CK="$HANGAR_CHECKPOINT_DIR/step"
mkdir -p "$HANGAR_CHECKPOINT_DIR"
step=0; [ -f "$CK" ] && step=$(cat "$CK")
echo $$ > "$OUT/pid.$HANGAR_TASK_ID"
echo "start $(now) $A $RANK $step" >> "$OUT/runs"
checkpoint() {{
  echo "$step" > "$CK.tmp" && mv "$CK.tmp" "$CK"
  hangar checkpoint-done --path "$CK" --step "$step" > /dev/null 2>&1
  echo "ckpt $(now) $A $RANK $step" >> "$OUT/runs"
}}
if [ "$RANK" = 0 ]; then trap 'checkpoint' USR1; else trap ':' USR1; fi
trap 'echo "end $(now) $A $RANK $step" >> "$OUT/runs"; exit 143' TERM
while :; do
  f=1; [ -f "$OUT/slow.$HANGAR_NODE" ] && f=$(cat "$OUT/slow.$HANGAR_NODE")
  st=$(awk -v s={step_s} -v f="$f" 'BEGIN {{ printf "%.3f", s / f }}')
  sleep "$st" & wait $!
  step=$((step + 1))
  echo "step $(now) $A $RANK $step" >> "$OUT/runs"
  hangar progress "$step" --step-time "$st" > /dev/null 2>&1
  [ "$RANK" = 0 ] && [ $((step % {every})) = 0 ] && checkpoint
done
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, hangar, root, spares=0, swarm=0, preflight=False):
        self.hangar, self.root = hangar, root
        self.api, self.agents = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.api}"
        self.procs = {}
        self.swarm = swarm  # nodes played by `hangar swarm` beside the four real agents
        spares_block = f"spares: {{per: leaf, count: {spares}}}\n" if spares else ""
        preflight_block = ("preflight: {min_nodes: 2, budget: 30s, allreduce_mib: 16}\n"
                           if preflight else "")
        (root / "cluster.yaml").write_text(CLUSTER + (swarm_spine(swarm) if swarm else "")
                                           + spares_block + preflight_block)
        if swarm:
            (root / "swarm.yaml").write_text(SWARM_HEAD + swarm_spine(swarm))

    def spawn(self, name, args):
        log = open(self.root / f"{name}.log", "a")
        self.procs[name] = subprocess.Popen([self.hangar] + args, stdout=log, stderr=log,
                                            start_new_session=True)

    def start(self):
        self.spawn("controller", ["controller", "--cluster", str(self.root / "cluster.yaml"),
                                  "--api", f"127.0.0.1:{self.api}",
                                  "--agents", f"127.0.0.1:{self.agents}",
                                  "--store", f"sqlite://{self.root}/state.db",
                                  "--checkpoint-root", str(self.root / "checkpoints"),
                                  "--auth", "none", "--insecure"])
        time.sleep(1)
        for n in NODES:
            self.start_agent(n)
        if self.swarm:
            self.spawn("swarm", ["swarm", "--controller", f"127.0.0.1:{self.agents}",
                                 "--cluster", str(self.root / "swarm.yaml")])
        wait_for(lambda: all(self.get(f"/v1/nodes/{n}").get("state") == "ready" for n in NODES),
                 60, "four ready nodes")
        if self.swarm:
            wait_for(lambda: self.ready_nodes() >= len(NODES) + self.swarm, 300,
                     f"{len(NODES) + self.swarm} ready nodes")

    def ready_nodes(self):
        nodes = self.get("/v1/nodes")
        nodes = nodes.get("nodes", []) if isinstance(nodes, dict) else nodes
        return sum(1 for n in nodes if n.get("state") == "ready")

    def start_agent(self, node):
        self.spawn(node, ["agent", "--controller", f"127.0.0.1:{self.agents}", "--node", node,
                          "--cluster", str(self.root / "cluster.yaml"),
                          "--state-dir", str(self.root / "agents" / node), "--insecure",
                          "--stop-tasks-on-exit"])

    def kill(self, name, sig):
        p = self.procs.get(name)
        if p and p.poll() is None:
            os.killpg(p.pid, sig)
            p.wait()

    def stop(self):
        for name in list(self.procs):
            self.kill(name, signal.SIGTERM)

    def request(self, method, path, body=None):
        data = body.encode() if isinstance(body, str) else body
        r = urllib.request.Request(self.url + path, data=data, method=method,
                                   headers={"Content-Type": "application/yaml"})
        try:
            with urllib.request.urlopen(r, timeout=10) as res:
                return json.loads(res.read() or b"null")
        except (OSError, ValueError):
            return {}

    def get(self, path):
        return self.request("GET", path) or {}

    def post(self, path, body):
        return self.request("POST", path, body) or {}


def preflight_figures(c, job):
    """The gang preflights of the job, from its events: passes (with their seconds) and nodes
    failed."""
    ev = c.get(f"/v1/events?subject=job/{job}&limit=1000").get("events", [])
    secs = []
    for e in ev:
        m = e.get("message", "")
        if m.startswith("gang preflight passed on "):
            secs.append(float(m.split(" in ", 1)[1].split(" s ", 1)[0]))
    secs.sort()
    return {"passed": len(secs),
            "failed": sum(1 for e in ev if " failed the gang preflight " in e.get("message", "")),
            "seconds_p50": secs[len(secs) // 2] if secs else None,
            "seconds_max": secs[-1] if secs else None}


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


def now_ms():
    return int(time.time() * 1000)


def runs(out):
    p = out / "runs"
    rows = []
    for line in p.read_text().splitlines() if p.exists() else []:
        f = line.split()
        # A task killed while it wrote leaves a torn line (kill -9 of a stopped one, the fence).
        if len(f) == 5 and all(x.isdigit() for x in f[1:]):
            rows.append((f[0], int(f[1]), int(f[2]), int(f[3]), int(f[4])))
    return rows


class Chaos:
    def __init__(self, c, job, out, args):
        self.c, self.job, self.out, self.args = c, job, out, args
        self.faults = []
        self.taker = None  # --hold: the job that would take a healthy node the gang released
        self.failed_nodes = 0  # Xid faults that failed their node for good

    def view(self):
        return self.c.get(f"/v1/jobs/{self.job}")

    def nodes_of_gang(self):
        return sorted({t["node"] for t in self.view().get("task_list", []) if t.get("node")})

    def recovered(self, attempt):
        """The ms of attempt `attempt`'s first progress report, once there is one."""
        g = self.c.get(f"/v1/jobs/{self.job}/goodput").get("goodput") or {}
        a = g.get("attempt") or {}
        if a.get("attempt") == attempt and a.get("productive_since_ms"):
            return a["productive_since_ms"]
        return None

    def inject(self, kind):
        v = self.view()
        attempt, nodes = v["attempt"], self.nodes_of_gang()
        node = nodes[-1]
        t0 = now_ms()
        if kind == "agent":
            self.c.kill(node, signal.SIGKILL)
        elif kind == "hang":
            pid = int((self.out / f"pid.{self.job}.{attempt}.0").read_text())
            os.kill(pid, signal.SIGSTOP)
            node = None
        elif kind == "xid":
            d = self.c.root / "agents" / node
            (d / "xid.tmp").write_text("- {gpu: 0, kind: xid, code: 79}\n")
            os.rename(d / "xid.tmp", d / "inject-faults.yaml")
        elif kind == "slow":
            d = self.c.root / "agents" / node
            # Long enough for the naming and the next checkpoint, short enough to be over before
            # the node is validated again (a slow GPU fails validation: degraded, no gangs).
            (d / "slow.tmp").write_text("- {gpu: 0, kind: slow, factor: 0.7, duration: 20s}\n")
            os.rename(d / "slow.tmp", d / "inject-faults.yaml")
            (self.out / f"slow.{node}").write_text("0.7\n")
        f = {"kind": kind, "node": node, "attempt": attempt, "at_ms": t0}
        if self.args.hold:
            return self.hold(f, nodes)
        if kind == "slow":
            named = wait_for(lambda: self.event_ms("straggler: ", t0, None), 120,
                             f"{node} to be named a straggler")
            f["named_s"] = (named - t0) / 1000
        if kind == "slow" and not self.args.spares:
            # Named, not replaced (no spare): it runs on, slow, until its GPU recovers.
            time.sleep(2)
            (self.out / f"slow.{node}").unlink()
            self.faults.append(f)
            return f
        # The gang runs again: its next attempt's first progress report. A straggler is replaced
        # only where a spare or free node can take its tasks; else it runs on (not an error).
        try:
            t1 = wait_for(lambda: self.recovered(attempt + 1), 40 if kind == "slow" else 180,
                          f"the gang to recover from {kind}")
        except RuntimeError:
            if kind != "slow":
                raise
            f["replaced"] = False
            self.repair(kind, node)
            self.faults.append(f)
            return f
        f["recover_s"] = (t1 - t0) / 1000
        if node:  # the gang runs on its other node again (in place, with spares)
            f["kept_other_node"] = bool(set(nodes) - {node} <= set(self.nodes_of_gang()))
        if kind == "hang":
            f["detect_s"] = (self.event_ms("hung: ", t0) - t0) / 1000
        self.repair(kind, node)
        self.faults.append(f)
        return f

    def taker_running(self):
        return self.taker is not None and self.c.get(f"/v1/jobs/{self.taker}")["state"] != "pending"

    def hold(self, f, nodes):
        """--hold: the node is out for --out seconds while the gang holds its healthy node; then it
        is back and the gang restarts on it."""
        kind, node, attempt, t0 = f["kind"], f["node"], f["attempt"], f["at_ms"]
        wait_for(lambda: self.event_ms("no spare or free node can replace node", t0, None), 60,
                 f"the gang to hold its healthy nodes after {kind}")
        time.sleep(self.args.out)
        f["taker_ran"] = self.taker_running()
        self.repair(kind, node)
        t1 = wait_for(lambda: self.recovered(attempt + 1), 180,
                      f"the gang to restart on {node} back in service")
        f["recover_s"] = (t1 - t0) / 1000
        f["kept_other_node"] = bool(set(nodes) - {node} <= set(self.nodes_of_gang()))
        f["back_on_failed_node"] = node in self.nodes_of_gang()
        f["taker_ran"] = f["taker_ran"] or self.taker_running()
        self.faults.append(f)
        return f

    def event_ms(self, text, after, otherwise=-1):
        ev = self.c.get(f"/v1/events?subject=job/{self.job}&limit=200").get("events", [])
        times = [e["time_ms"] for e in ev if e.get("message", "").startswith(text)
                 and e["time_ms"] >= after - 1000]
        return min(times) if times else (after if otherwise == -1 else otherwise)

    def repair(self, kind, node):
        if kind == "slow":  # its GPU is back to speed once the gang has left it
            (self.out / f"slow.{node}").unlink()
        if kind == "agent":
            self.c.start_agent(node)
        elif kind == "xid":
            state = wait_for(lambda: self.c.get(f"/v1/nodes/{node}").get("state") in
                             ("quarantined", "failed") and self.c.get(f"/v1/nodes/{node}")["state"],
                             60, f"{node} quarantined")
            # A node failed for good (the same Xid after two reboots) needs a repair.
            remedy = "repair" if state == "failed" else self.args.remedy
            if state == "failed":
                self.failed_nodes += 1
            subprocess.run([self.c.hangar, "remediate", node, "--remedy", remedy,
                            "--server", self.c.url], check=True, capture_output=True)
        if node and kind != "slow":  # a straggler's node stays suspect a while (docs/progress.md)
            wait_for(lambda: self.c.get(f"/v1/nodes/{node}").get("state") == "ready", 120,
                     f"{node} ready again")


def overlaps(rows):
    """Pairs of attempts whose tasks ran at once: an attempt's first start before an earlier
    attempt's last sign of life."""
    first, last = {}, {}
    for kind, ms, attempt, _, _ in rows:
        if kind == "start":
            first[attempt] = min(first.get(attempt, ms), ms)
        last[attempt] = max(last.get(attempt, ms), ms)
    return sum(1 for a in first for b in last if b < a and first[a] < last[b])


def lost_checkpoints(rows, faults):
    """Attempts that resumed from a step older than the last checkpoint rank 0 had reported done
    before their fault."""
    lost = 0
    for f in faults:
        done = [s for k, ms, a, r, s in rows if k == "ckpt" and ms <= f["at_ms"]]
        resumed = [s for k, ms, a, r, s in rows if k == "start" and a == f["attempt"] + 1]
        if done and resumed and min(resumed) < max(done):
            lost += 1
    return lost


def churn(c, swarm, stop):
    """--swarm: half the swarm's GPUs' worth of 20 s jobs every 10 s (about all of them busy),
    never on the four real nodes."""
    spec = ("name: background\nexclude_nodes: \"node-[1-4]\"\n"
            "tasks: [{gpus: 1, command: [sleep, '20']}]\n")
    while not stop.is_set():
        c.post(f"/v1/jobs?count={max(1, swarm // 2)}", spec)
        stop.wait(10)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--faults", type=int, default=20)
    ap.add_argument("--kinds", default="agent,hang,xid,slow")
    ap.add_argument("--step", type=float, default=0.2, help="seconds a training step takes")
    ap.add_argument("--every", type=int, default=25, help="steps between checkpoints")
    ap.add_argument("--hang-timeout", default="5s")
    ap.add_argument("--settle", type=float, default=8, help="seconds of running between faults")
    ap.add_argument("--remedy", default="repair", choices=["repair", "reboot"],
                    help="how an Xid's node is remediated (reboot: the third Xid 79 on one node "
                         "fails it for good; it is then repaired)")
    ap.add_argument("--spares", type=int, default=1,
                    help="hot spares in the leaf (replace a failed node in place; 0: none)")
    ap.add_argument("--fill", action="store_true",
                    help="fill every node that is neither the gang's nor a spare with other work")
    ap.add_argument("--spare-work", action="store_true",
                    help="run opportunistic work on the spares (a replacement evicts it)")
    ap.add_argument("--hold", default="",
                    help="the gang holds its healthy nodes this long for a replacement "
                         "(on_node_failure.wait_for_node, such as 2m); implies --spares 0 --fill "
                         "and agent,xid faults")
    ap.add_argument("--out", type=float, default=5,
                    help="with --hold: seconds a failed node stays out before it is back")
    ap.add_argument("--swarm", type=int, default=0,
                    help="add this many nodes played by `hangar swarm` (in leaves of 32), kept "
                         "busy by a stream of 20 s jobs, so that recovery runs on a controller "
                         "of that size: --swarm 1020 is the 1,024-node run")
    ap.add_argument("--preflight", action="store_true",
                    help="check the gang's nodes together before each start (docs/goodput.md)")
    ap.add_argument("--json", action="store_true", help="print the JSON object only")
    ap.add_argument("--keep", action="store_true", help="keep the run's folder (logs, store)")
    args = ap.parse_args()
    if args.hold:
        args.spares, args.fill = 0, True
        if args.kinds == ap.get_default("kinds"):
            args.kinds = "agent,xid"
        if set(args.kinds.split(",")) - {"agent", "xid"}:
            ap.error("--hold takes agent and xid faults only (a hang or straggler frees no node)")
    hangar = str(pathlib.Path(args.build, "src", "hangar").resolve())
    root = pathlib.Path(tempfile.mkdtemp(prefix="hangar-chaos-"))
    out = root / "out"
    out.mkdir()
    env_path = str(pathlib.Path(hangar).parent) + os.pathsep + os.environ.get("PATH", "")
    os.environ["PATH"] = env_path  # the tasks call `hangar progress` and `checkpoint-done`
    c = Cluster(hangar, root, args.spares, args.swarm, args.preflight)
    stop_churn = threading.Event()
    say = (lambda *a: None) if args.json else print
    try:
        c.start()
        (root / "task.sh").write_text(TASK.format(out=out, step_s=args.step, every=args.every))
        spec = (f"name: chaos-train\nprogress: {{hang_timeout: {args.hang_timeout}, on_hang: restart, "
                "straggler_factor: 1.2, straggler_reports: 5}\n"
                "checkpoint: {signal: SIGUSR1, grace: 3s}\n"
                + (f"on_node_failure: {{wait_for_node: {args.hold}}}\n" if args.hold else "")
                + (f"exclude_nodes: \"sw-[1-{args.swarm}]\"\n" if args.swarm else "") +
                f"tasks:\n  - replicas: 2\n    gpus: 1\n    command: [/bin/sh, \"{root}/task.sh\"]\n")
        job = c.post("/v1/jobs", spec)["id"]
        chaos = Chaos(c, job, out, args)
        wait_for(lambda: chaos.recovered(0), 60, "the gang's first progress report")
        if args.fill:
            fillers = [c.post("/v1/jobs", "name: filler\ntasks: [{gpus: 1, command: [sleep, "
                              "'100000']}]\n")["id"] for _ in range(len(NODES) - 2 - args.spares)]
            wait_for(lambda: all(c.get(f"/v1/jobs/{f}").get("state") == "running"
                                 for f in fillers), 60, "the other work running")
        if args.swarm:  # the swarm's nodes busy with short jobs, arriving all along
            threading.Thread(target=churn, args=(c, args.swarm, stop_churn), daemon=True).start()
        if args.hold:  # waits for any GPU: it can only get one the gang should be holding
            chaos.taker = c.post("/v1/jobs", "name: taker\ntasks: [{gpus: 1, command: [sleep, "
                                 "'100000']}]\n")["id"]
        spare_work = []
        if args.spare_work:  # opportunistic work, which only the spares (and free nodes) take
            spare_work = [c.post("/v1/jobs", "name: spare-work\ntier: opportunistic\n"
                                 "checkpoint: {signal: SIGTERM, grace: 2s}\n"
                                 "tasks: [{gpus: 1, command: [sleep, '100000']}]\n")["id"]
                          for _ in range(args.spares)]
            wait_for(lambda: all(c.get(f"/v1/jobs/{w}").get("state") == "running"
                                 for w in spare_work), 60, "the work on the spares running")
        kinds = args.kinds.split(",")
        for i in range(args.faults):
            time.sleep(args.settle)
            f = chaos.inject(kinds[i % len(kinds)])
            say(f"fault {i + 1}: {f['kind']:5} on {f['node'] or 'rank 0'}: "
                + (f"running again from its checkpoint after {f['recover_s']:.1f} s"
                   if "recover_s" in f else "not replaced (no spare, or none that could take it): it ran on")
                + (f" (hang found after {f['detect_s']:.1f} s)" if "detect_s" in f else "")
                + (f" (named a straggler after {f['named_s']:.1f} s)" if "named_s" in f else ""))
        time.sleep(args.settle)
        g = c.get(f"/v1/jobs/{job}/goodput")["goodput"]
        # The controller keeps the latest 20 interruptions: matched from the end.
        # A straggler not replaced (no spare) is no interruption.
        stops = [f for f in chaos.faults if "recover_s" in f]
        recent = g["recent"][-len(stops):] if stops else []
        for f, i in zip(stops[len(stops) - len(recent):], recent):
            f["lost_work_s"], f["lost_basis"], f["cause"] = (i["lost_work_ms"] / 1000,
                                                              i["lost_basis"], i["cause"])
        rows = runs(out)
        rec = sorted(f["recover_s"] for f in chaos.faults if "recover_s" in f)
        hangs = [f["detect_s"] for f in chaos.faults if "detect_s" in f]
        named = [f["named_s"] for f in chaos.faults if "named_s" in f]
        result = {
            "faults": len(chaos.faults),
            "recover_p50_s": rec[len(rec) // 2] if rec else None,
            "recover_p99_s": rec[min(len(rec) - 1, int(len(rec) * 0.99))] if rec else None,
            "recover_s_by_kind": {k: [f["recover_s"] for f in chaos.faults
                                      if f["kind"] == k and "recover_s" in f] for k in kinds},
            "hang_detect_s": max(hangs) if hangs else None,
            "straggler_named_s": max(named) if named else None,
            "hang_timeout": args.hang_timeout,
            "overlapping_attempts": overlaps(rows),
            "checkpoints_lost": lost_checkpoints(rows, stops),
            "ettr": g["ettr"],
            "wall_s": g["wall_ms"] / 1000,
            "parts_s": {k: v["ms"] / 1000 for k, v in g["parts"].items()},
            "by_cause": g["by_cause"],
            "fault_list": chaos.faults,
            "settings": {"step_s": args.step, "checkpoint_every_steps": args.every,
                         "settle_s": args.settle, "spares": args.spares, "remedy": args.remedy,
                         "fill": args.fill, "spare_work": args.spare_work,
                         "hold": args.hold or None, "swarm_nodes": args.swarm, "preflight": args.preflight, "out_s": args.out if args.hold else None},
            "nodes_failed": chaos.failed_nodes,
            "spare_work_evicted": sum(
                1 for w in spare_work for e in c.get(f"/v1/events?subject=job/{w}&limit=200")
                .get("events", []) if e.get("message", "").startswith("preempted for job")
                and "its hot spare" in e.get("message", "")),
            "kept_other_node": sum(1 for f in chaos.faults if f.get("kept_other_node")),
            "healthy_released_while_holding": sum(1 for f in chaos.faults if f.get("taker_ran")),
            "back_on_failed_node": sum(1 for f in chaos.faults if f.get("back_on_failed_node")),
            "stragglers_not_replaced": sum(1 for f in chaos.faults
                                           if f["kind"] == "slow" and "recover_s" not in f),
        }
        if args.preflight:
            result["preflight"] = preflight_figures(c, job)
        say(f"ETTR {100 * g['ettr']:.1f}% over {g['wall_ms'] / 1000:.0f} s; lost work "
            f"{g['parts']['lost_work']['ms'] / 1000:.1f} s, restart "
            f"{g['parts']['restart']['ms'] / 1000:.1f} s, waiting "
            f"{g['parts']['requeue_wait']['ms'] / 1000:.1f} s; overlapping attempts "
            f"{result['overlapping_attempts']}, checkpoints lost {result['checkpoints_lost']}")
        print(json.dumps(result, indent=None if args.json else 2))
    finally:
        stop_churn.set()
        c.stop()
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
