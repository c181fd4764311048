#!/usr/bin/python3
"""services_bench: what a service's endpoint costs and loses (docs/services.md).

On a `hangar dev` of its own (HAProxy on loopback), a service of 3 replicas of
examples/services/echo_model.py, and a load generator at RATE requests per second, each request on
a new connection:

  steady     p50/p99 latency through the endpoint against straight to one replica, the two sent in
             pairs at the same moments (order alternating), so that both see the same machine
             noise, for --steady seconds

Then every event below runs under the same paired load, the second address being the replica's
twin (the same echo_model.py, started by the bench outside the service, so that it stays up while
the service's replicas come and go): requests lost through the endpoint (goal 0), and what the
endpoint adds at p50 and p99 while the event goes on (goal: under 1 ms at p99).

  crash      kill -9 of one replica, --crashes times, with the example's restart back-off (1 s)
             and with none; and the time from the kill to the replacement being ready (back in
             rotation)
  rollout    a rolling update of the 3 replicas, and its duration
  scale      `scale` 3 -> 5, then 5 -> 3 (drained before they stop), and how long each took
  autoscale  a service of whole-node replicas (8 GPUs each) autoscaled 1 -> 4 by the load itself,
             until its replicas fill the 4 nodes
  reclaim    a guaranteed training job of 8 GPUs submitted into that full cluster: it reclaims an
             opportunistic replica's node (drained, preempted), runs 4 s, and the replica comes
             back; the time until the job has succeeded and 4 replicas are ready again

Usage: bench/services_bench.py [BUILD_DIR] [--rate N] [--crashes N] [--steady S] [--latency-only].
Prints one line per figure and a JSON object last.
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import pathlib
import shutil
import signal
import socket
import sys
import subprocess
import tempfile
import threading
import time
import urllib.request

SRC = pathlib.Path(__file__).resolve().parent.parent


def free_port(n):
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p + n < 65535 and all(_free(q) for q in range(p, p + n)):
            return p
    raise RuntimeError("no free ports")


def _free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def get(host, port):
    """One GET on a new connection: (ok, seconds, body)."""
    t = time.perf_counter()
    try:
        c = http.client.HTTPConnection(host, port, timeout=15)
        c.request("GET", "/")
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        return r.status == 200, time.perf_counter() - t, body
    except Exception as e:  # noqa: BLE001
        return False, time.perf_counter() - t, repr(e)


def paired_load(a_addr, b_addr, rate, seconds, during=None, after=1.0):
    """Pairs of requests at `rate`/s, one to each address, sent together (which goes first
    alternates), so that both measure the same moments. Without `during`: for `seconds`. With it:
    `during` runs in a thread meanwhile, and the load goes on until it has returned and `after`
    seconds more (at least `seconds` in all). Returns (outcomes at a, outcomes at b)."""
    outs, lock = ([], []), threading.Lock()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=64)
    failure = []

    def one(k, addr):
        r = get(addr[0], addr[1])
        with lock:
            outs[k].append(r)

    def side():
        try:
            during()
        except BaseException as e:  # noqa: BLE001 -- raised again below, after the load stops
            failure.append(e)

    thread = threading.Thread(target=side) if during else None
    if thread:
        thread.start()
    start = time.monotonic()
    until, ended_at, n = start + seconds, None, 0
    while True:
        now = time.monotonic()
        if thread and ended_at is None and not thread.is_alive():
            ended_at = now
            until = max(until, now + after)
        if now >= until and (not thread or ended_at is not None):
            break
        delay = start + n / rate - now
        if delay > 0:
            time.sleep(delay)
        for k in ((0, 1) if n % 2 == 0 else (1, 0)):
            pool.submit(one, k, (a_addr, b_addr)[k])
        n += 1
    pool.shutdown(wait=True)
    if thread:
        thread.join()
    if failure:
        raise failure[0]
    return outs


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p / 100))] if v else float("nan")


def summary(outcomes):
    lat = [o[1] * 1000 for o in outcomes if o[0]]
    errors = sorted({o[2][:120] for o in outcomes if not o[0]})
    return {"requests": len(outcomes), "lost": sum(1 for o in outcomes if not o[0]),
            "p50_ms": round(pct(lat, 50), 3), "p99_ms": round(pct(lat, 99), 3), "errors": errors[:3]}


class Dev:
    def __init__(self, hangar, tmp):
        self.hangar, self.tmp = hangar, tmp
        self.port = free_port(3)
        self.url = f"http://127.0.0.1:{self.port}"
        self.out = open(tmp / "dev.out", "w")
        self.proc = subprocess.Popen([hangar, "dev", "--dir", str(tmp / "dev"), "--port", str(self.port)],
                                     stdout=self.out, stderr=subprocess.STDOUT)
        try:
            self.until(lambda: "services" in (tmp / "dev.out").read_text(), 60)
            self.token = (tmp / "dev" / "dev-token").read_text().strip()
        except BaseException:
            self.stop()  # not left running
            raise

    def api(self, path, body=None):
        req = urllib.request.Request(self.url + path, data=body.encode() if body else None,
                                     headers={"Authorization": "Bearer " + self.token, "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def service(self, name="echo"):
        return self.api("/v1/services/" + name)

    @staticmethod
    def until(pred, secs, step=0.05):
        end = time.monotonic() + secs
        while time.monotonic() < end:
            try:
                if pred():
                    return time.monotonic()
            except Exception:  # noqa: BLE001 -- not up yet
                pass
            time.sleep(step)
        raise RuntimeError("timed out")

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        self.out.close()


def pid_of(replica, service="echo"):
    for p in pathlib.Path("/proc").iterdir():
        try:
            env = (p / "environ").read_bytes().split(b"\0")
            if f"HANGAR_SERVICE={service}".encode() in env and f"HANGAR_REPLICA={replica}".encode() in env and \
                    b"echo_model.py" in (p / "cmdline").read_bytes():
                return int(p.name)
        except (OSError, ValueError):
            continue
    return None


def spec(folder, version, backoff="1s"):
    text = (SRC / "examples/services/echo.yaml").read_text().replace("MODEL_VERSION: v1", f"MODEL_VERSION: {version}")
    text = text.replace("backoff: 1s,", f"backoff: {backoff},")
    return json.dumps({"spec": text, "base": str(folder)})


def big_spec(folder):
    """echo.yaml as `big`: a whole node (8 GPUs) per replica, autoscaled 1-4 by request rate, so
    that replicas above the first are opportunistic and fill the 4 nodes under the load."""
    text = (SRC / "examples/services/echo.yaml").read_text().replace("name: echo", "name: big")
    text = text.replace("  replicas: 3\n", "  autoscale: {min: 1, max: 4, rps_per_replica: 5, scale_down_after: 60s}\n")
    text = text.replace("    gpu_fraction: 0.25\n    gpu_memory: 10Gi\n", "    gpus: 8\n")
    assert "gpus: 8" in text and "autoscale" in text
    return json.dumps({"spec": text, "base": str(folder)})


def all_ready(dev, n=3, name="echo"):
    s = dev.service(name)
    return s["ready"] == n and s["rollout"] == "complete" and len(s["replicas"]) == n


class Twin:
    """A replica's twin outside the service: the same echo_model.py on a port of its own, started
    by the bench. The baseline of every paired figure, so that "added" is what the endpoint costs
    while the event (a kill, a rollout, a scale, a reclaim) goes on; the service's own replicas
    come and go during those events."""

    def __init__(self, folder):
        self.port = free_port(1)
        env = dict(os.environ, HANGAR_PORT=str(self.port), HANGAR_SERVICE="twin", MODEL_VERSION="v1")
        self.proc = subprocess.Popen([sys.executable, str(folder / "echo_model.py")], env=env, cwd=folder,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        Dev.until(lambda: get("127.0.0.1", self.port)[0], 20)
        self.addr = ("127.0.0.1", self.port)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def paired(endpoint, twin, rate, seconds, during=None):
    """One event's outcomes under the paired load: (through the endpoint, straight to the twin)."""
    return paired_load(endpoint, twin.addr, rate, seconds, during=during)


def endpoint_of(dev, name="echo"):
    host, port = dev.service(name)["endpoint"].rsplit(":", 1)
    return host, int(port)


def crash(dev, rate, twin):
    """Kills one ready replica under load; returns (figures, seconds until its replacement is ready)."""
    victim = dev.service()["replicas"][0]
    restarts = victim["restarts"]
    took = {}

    def kill():
        time.sleep(1.5)
        pid = pid_of(victim["id"])
        t = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        done = dev.until(lambda: any(r["id"] == victim["id"] and r["restarts"] > restarts and r["state"] == "ready"
                                     for r in dev.service()["replicas"]), 60, step=0.02)
        took["s"] = done - t

    return paired(endpoint_of(dev), twin, rate, 6, during=kill), took["s"]


def merge(runs):
    """One event's figures over its runs (each a pair of outcome lists), every request pooled:
    requests lost through the endpoint, both p50/p99, and what the endpoint adds."""
    via = [o for r in runs for o in r[0]]
    straight = [o for r in runs for o in r[1]]
    e, d = summary(via), summary(straight)
    return {"requests": e["requests"], "lost": e["lost"], "errors": e["errors"],
            "endpoint_p50_ms": e["p50_ms"], "endpoint_p99_ms": e["p99_ms"],
            "direct_p50_ms": d["p50_ms"], "direct_p99_ms": d["p99_ms"], "direct_lost": d["lost"],
            "added_p50_ms": round(e["p50_ms"] - d["p50_ms"], 3), "added_p99_ms": round(e["p99_ms"] - d["p99_ms"], 3)}


def timed(dev, action, done, secs=90, lead=1.0):
    """A `during` function: `action()` after `lead` seconds of load, then waits for `done()`; the
    seconds it took land in the returned dict."""
    took = {}

    def run():
        time.sleep(lead)
        t = time.monotonic()
        action()
        took["s"] = round(dev.until(done, secs, step=0.02) - t, 3)

    return run, took


def reclaim(dev, folder, rate, twin):
    """A guaranteed training job of a whole node reclaims an opportunistic replica of `big`, which
    fills the cluster. Returns ((outcomes, seconds) of the autoscale out, (outcomes, seconds,
    whether a replica was preempted) of the reclaim)."""
    dev.api("/v1/services", big_spec(folder))
    dev.until(lambda: dev.service("big")["ready"] >= 1, 60)

    def full():
        nodes = dev.api("/v1/nodes")["nodes"]
        return all_ready(dev, 4, "big") and all(n["gpus_free"] == 0 for n in nodes)

    grow, grew = timed(dev, lambda: None, full, lead=0)  # the load itself scales it out
    out = paired(endpoint_of(dev, "big"), twin, rate, 8, during=grow)
    job = {}

    def submitted():
        r = dev.api("/v1/jobs", json.dumps({"name": "train", "tasks": [
            {"name": "w", "gpus": 8, "cpu": 1, "command": ["sleep", "4"]}]}))
        job["id"] = r["id"]

    def trained():
        seen.update(r["why"] for r in dev.service("big")["replicas"])
        j = dev.api(f"/v1/jobs/{job['id']}")
        return j["state"] == "succeeded" and all_ready(dev, 4, "big")

    seen = set()
    take, took = timed(dev, submitted, trained, 120)
    back = paired(endpoint_of(dev, "big"), twin, rate, 8, during=take)
    preempted = "preempted: draining" in seen or "its job was requeued" in seen
    return (out, grew["s"]), (back, took["s"], preempted)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--crashes", type=int, default=3)
    ap.add_argument("--steady", type=float, default=10, help="seconds of the paired steady load")
    ap.add_argument("--latency-only", action="store_true", help="the steady figures only")
    a = ap.parse_args()
    hangar = str(pathlib.Path(a.build).resolve() / "src" / "hangar")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="hangar-services-bench-"))
    folder = tmp / "svc"
    folder.mkdir()
    shutil.copy(SRC / "examples/services/echo_model.py", folder)
    dev = Dev(hangar, tmp)
    twin = None
    figures = {"rate": a.rate}
    try:
        dev.api("/v1/services", spec(folder, "v1"))
        dev.until(lambda: all_ready(dev), 60)
        ep = endpoint_of(dev)
        direct = dev.api("/v1/services/echo/endpoints")["ready"][0]["address"].rsplit(":", 1)
        via, straight = paired_load(ep, (direct[0], int(direct[1])), a.rate, a.steady)
        figures["steady_endpoint"], figures["steady_direct"] = summary(via), summary(straight)
        figures["added_p50_ms"] = round(figures["steady_endpoint"]["p50_ms"] - figures["steady_direct"]["p50_ms"], 3)
        figures["added_p99_ms"] = round(figures["steady_endpoint"]["p99_ms"] - figures["steady_direct"]["p99_ms"], 3)
        if a.latency_only:
            return
        twin = Twin(folder)
        for label, backoff in (("backoff_1s", "1s"), ("backoff_0s", "0s")):
            if backoff != "1s":
                dev.api("/v1/services/echo/update", spec(folder, "v1", backoff))
                dev.until(lambda: all_ready(dev) and dev.service()["revision"] > 1, 60)
            runs, times = [], []
            for _ in range(a.crashes):
                f, ready = crash(dev, a.rate, twin)
                runs.append(f)
                times.append(round(ready, 3))
                dev.until(lambda: all_ready(dev), 60)
            figures[f"crash_{label}"] = dict(merge(runs), replacement_ready_s=times)
        update, took = timed(dev, lambda: dev.api("/v1/services/echo/update", spec(folder, "v2", "0s")),
                             lambda: all_ready(dev) and dev.service()["revision"] == 3)
        figures["rollout"] = dict(merge([paired(ep, twin, a.rate, 8, during=update)]), duration_s=took["s"])
        for label, n in (("scale_out", 5), ("scale_in", 3)):
            grow, took = timed(dev, lambda n=n: dev.api("/v1/services/echo/scale", json.dumps({"replicas": n})),
                               lambda n=n: all_ready(dev, n))
            figures[label] = dict(merge([paired(ep, twin, a.rate, 8, during=grow)]), duration_s=took["s"])
        req = urllib.request.Request(dev.url + "/v1/services/echo", method="DELETE",
                                     headers={"Authorization": "Bearer " + dev.token})
        urllib.request.urlopen(req, timeout=10).close()
        dev.until(lambda: not dev.api("/v1/services")["services"], 60)
        dev.until(lambda: all(n["gpus_free"] == 8 for n in dev.api("/v1/nodes")["nodes"]), 60)
        grow, back = reclaim(dev, folder, a.rate, twin)
        figures["autoscale_out"] = dict(merge([grow[0]]), duration_s=grow[1])
        figures["reclaim"] = dict(merge([back[0]]), duration_s=back[1], replica_preempted=back[2])
    finally:
        if twin:
            twin.stop()
        dev.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    se, sd = figures["steady_endpoint"], figures["steady_direct"]
    print(f"steady {a.rate}/s, paired, {se['requests']} + {sd['requests']} requests: through the endpoint p50 "
          f"{se['p50_ms']} ms p99 {se['p99_ms']} ms; straight to a replica p50 {sd['p50_ms']} ms p99 {sd['p99_ms']} "
          f"ms; added at p50 {figures['added_p50_ms']} ms, at p99 {figures['added_p99_ms']} ms")
    if a.latency_only:
        print(json.dumps(figures))
        return
    print("during each event, paired with the twin (see the docstring):")
    for label, what in (("crash_backoff_1s", "kill -9 x%d, 1 s back-off" % a.crashes),
                        ("crash_backoff_0s", "kill -9 x%d, no back-off" % a.crashes),
                        ("rollout", "rolling update of 3"), ("scale_out", "scale 3 -> 5"), ("scale_in", "scale 5 -> 3"),
                        ("autoscale_out", "autoscale 1 -> 4 (whole-node replicas)"),
                        ("reclaim", "a training job reclaims a replica's node")):
        f = figures[label]
        took = f.get("replacement_ready_s", f.get("duration_s"))
        print(f"  {what}: {f['lost']} of {f['requests']} lost; endpoint p99 {f['endpoint_p99_ms']} ms, twin p99 "
              f"{f['direct_p99_ms']} ms, added p50 {f['added_p50_ms']} ms, p99 {f['added_p99_ms']} ms; took {took} s")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
