#!/usr/bin/python3
"""services_bench: what a service's endpoint costs and loses (docs/services.md).

On a `hangar dev` of its own (HAProxy on loopback), a service of 3 replicas of
examples/services/echo_model.py, and a load generator at RATE requests per second, each request on
a new connection:

  steady     p50/p99 latency through the endpoint against straight to one replica, the two sent in
             pairs at the same moments (order alternating), so that both see the same machine
             noise, for --steady seconds
  crash      kill -9 of one replica under load: requests lost, p99 through the endpoint, and the
             time from the kill to the replacement being ready (back in rotation), with the
             example's restart back-off (1 s) and with none
  rollout    a rolling update of the 3 replicas under load: requests lost, p99, and its duration

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


def run_load(host, port, rate, seconds, during=None):
    """Requests at `rate`/s for `seconds`; `during` runs in the meantime. Returns the outcomes."""
    out, lock = [], threading.Lock()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=64)

    def one():
        r = get(host, port)
        with lock:
            out.append(r)

    side = threading.Thread(target=during) if during else None
    if side:
        side.start()
    start = time.monotonic()
    for n in range(int(rate * seconds)):
        delay = start + n / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        pool.submit(one)
    pool.shutdown(wait=True)
    if side:
        side.join()
    return out


def paired_load(a_addr, b_addr, rate, seconds):
    """Pairs of requests at `rate`/s, one to each address, sent together (which goes first
    alternates), so that both measure the same moments. Returns (outcomes at a, outcomes at b)."""
    outs, lock = ([], []), threading.Lock()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=64)

    def one(k, addr):
        r = get(addr[0], addr[1])
        with lock:
            outs[k].append(r)

    start = time.monotonic()
    for n in range(int(rate * seconds)):
        delay = start + n / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        for k in ((0, 1) if n % 2 == 0 else (1, 0)):
            pool.submit(one, k, (a_addr, b_addr)[k])
    pool.shutdown(wait=True)
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

    def service(self):
        return self.api("/v1/services/echo")

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


def pid_of(replica):
    for p in pathlib.Path("/proc").iterdir():
        try:
            env = (p / "environ").read_bytes().split(b"\0")
            if b"HANGAR_SERVICE=echo" in env and f"HANGAR_REPLICA={replica}".encode() in env and \
                    b"echo_model.py" in (p / "cmdline").read_bytes():
                return int(p.name)
        except (OSError, ValueError):
            continue
    return None


def spec(folder, version, backoff="1s"):
    text = (SRC / "examples/services/echo.yaml").read_text().replace("MODEL_VERSION: v1", f"MODEL_VERSION: {version}")
    text = text.replace("backoff: 1s,", f"backoff: {backoff},")
    return json.dumps({"spec": text, "base": str(folder)})


def all_ready(dev, n=3):
    s = dev.service()
    return s["ready"] == n and s["rollout"] == "complete"


def crash(dev, rate, backoff_label):
    """Kills one ready replica under load; returns (outcomes, seconds until its replacement is ready)."""
    victim = dev.service()["replicas"][0]
    restarts = victim["restarts"]
    ready_after = {}

    def kill():
        time.sleep(1.5)
        pid = pid_of(victim["id"])
        t = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        done = dev.until(lambda: any(r["id"] == victim["id"] and r["restarts"] > restarts and r["state"] == "ready"
                                     for r in dev.service()["replicas"]), 60, step=0.02)
        ready_after[backoff_label] = done - t

    host, port = dev.service()["endpoint"].rsplit(":", 1)
    out = run_load(host, int(port), rate, 6, during=kill)
    return out, ready_after[backoff_label]


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
    figures = {"rate": a.rate}
    try:
        dev.api("/v1/services", spec(folder, "v1"))
        dev.until(lambda: all_ready(dev), 60)
        host, port = dev.service()["endpoint"].rsplit(":", 1)
        direct = dev.api("/v1/services/echo/endpoints")["ready"][0]["address"].rsplit(":", 1)
        via, straight = paired_load((host, int(port)), (direct[0], int(direct[1])), a.rate, a.steady)
        figures["steady_endpoint"], figures["steady_direct"] = summary(via), summary(straight)
        figures["added_p50_ms"] = round(figures["steady_endpoint"]["p50_ms"] - figures["steady_direct"]["p50_ms"], 3)
        figures["added_p99_ms"] = round(figures["steady_endpoint"]["p99_ms"] - figures["steady_direct"]["p99_ms"], 3)
        for label, backoff in () if a.latency_only else (("backoff_1s", "1s"), ("backoff_0s", "0s")):
            if backoff != "1s":
                dev.api("/v1/services/echo/update", spec(folder, "v1", backoff))
                dev.until(lambda: all_ready(dev) and dev.service()["revision"] > 1, 60)
            outs, times = [], []
            for _ in range(a.crashes):
                out, ready = crash(dev, a.rate, label)
                outs += out
                times.append(round(ready, 3))
                dev.until(lambda: all_ready(dev), 60)
            figures[f"crash_{label}"] = dict(summary(outs), replacement_ready_s=times)
        start = time.monotonic()
        took = {}

        def update():
            time.sleep(1)
            t = time.monotonic()
            dev.api("/v1/services/echo/update", spec(folder, "v2", "0s"))
            took["s"] = dev.until(lambda: all_ready(dev) and dev.service()["revision"] == 3, 60, step=0.02) - t

        if not a.latency_only:
            figures["rollout"] = dict(summary(run_load(host, int(port), a.rate, 8, during=update)),
                                      duration_s=round(took["s"], 3))
        del start
    finally:
        dev.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    se, sd = figures["steady_endpoint"], figures["steady_direct"]
    print(f"steady {a.rate}/s, paired, {se['requests']} + {sd['requests']} requests: through the endpoint p50 "
          f"{se['p50_ms']} ms p99 {se['p99_ms']} ms; straight to a replica p50 {sd['p50_ms']} ms p99 {sd['p99_ms']} "
          f"ms; added at p50 {figures['added_p50_ms']} ms, at p99 {figures['added_p99_ms']} ms")
    if a.latency_only:
        print(json.dumps(figures))
        return
    for label in ("backoff_1s", "backoff_0s"):
        c = figures[f"crash_{label}"]
        print(f"kill -9 ({label}): {c['lost']} of {c['requests']} requests lost, p99 {c['p99_ms']} ms, replacement "
              f"ready after {c['replacement_ready_s']} s")
    r = figures["rollout"]
    print(f"rolling update of 3: {r['lost']} of {r['requests']} lost, p99 {r['p99_ms']} ms, done in {r['duration_s']} s")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
