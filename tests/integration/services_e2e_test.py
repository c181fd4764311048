#!/usr/bin/python3
"""Services end to end (docs/services.md): `hangar dev` with its HAProxy, a service of three
replicas of a stdlib HTTP server (examples/services/echo_model.py, which answers with its replica
id and revision), and a load generator sending GETs through the service's endpoint at a steady
rate for the whole test. While it runs:

  1. kill -9 one replica: it is restarted (and back in rotation), and no request fails;
  2. a rolling update of the 3 replicas: no request fails, and every request sent after the
     rollout completed is answered by the new revision;
  3. a revision that never becomes ready: the rollout stops with the old replicas serving, and
     `hangar service rollback` restores the last good revision; no request fails.

Load rises on a second, autoscaled service (min 1, max 3, 2 requests in flight per replica): it
scales out to 3; load falls: it scales back in to 1 after its window; no request fails.

A service whose probes are commands run inside its replicas' tasks (examples/services/watched.yaml):
its replicas join rotation once the readiness command passes; one replica wedged (it still runs,
but its liveness command fails) is drained, stopped and restarted after its back-off, with an event
saying why, while a load through its endpoint sees no request fail.

A guaranteed training job reclaims an opportunistic replica's GPUs (a service of whole-node
replicas scaled out over the whole cluster on its requests per second): the replica is drained and
requeued, and no request fails.

After the load: `hangar dev` stopped and started again on its store (a controller restart, and a
new HAProxy): the service is restored and its replicas serve through its endpoint again. And
HAProxy killed and started again (its servers all back in maintenance) serves the
ready replicas again once the controller has set its servers anew.

Then the service is deleted (its replicas drain and stop) and `hangar dev` stops, leaving no
process behind.

Before all that, the production configuration with TLS (`hangar service lb-config --tls-dir
--verify-clients`, on certificates from `hangar certs`) runs in a HAProxy of its own: a client
with a certificate of the cluster's CA reaches a replica through it over HTTPS, one without is
refused. Usage: services_e2e_test.py HANGAR_BINARY SOURCE_DIR
"""
import concurrent.futures
import http.client
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HANGAR, SRC = sys.argv[1], pathlib.Path(sys.argv[2])
RATE = 50  # requests per second through the endpoint


def free_port(n):
    """A loopback port whose next n-1 ports are free too."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        ok = True
        for q in range(p, p + n):
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", q))
                except OSError:
                    ok = False
        if ok and p + n < 65535:
            return p
    raise RuntimeError("no free loopback ports")


def wait(pred, secs, what):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        try:
            if pred():
                return
        except (subprocess.CalledProcessError, KeyError, ValueError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out after {secs}s waiting for {what}")


class Load:
    """GET / through the endpoint at RATE per second, each request on its own connection."""

    def __init__(self, endpoint, rate=RATE):
        self.rate = rate
        self.host, self.port = endpoint.rsplit(":", 1)
        self.results = []  # (sent, ok, body or error)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=64)
        self.thread = threading.Thread(target=self.run, daemon=True)

    def one(self, sent):
        try:
            c = http.client.HTTPConnection(self.host, int(self.port), timeout=15)
            c.request("GET", "/")
            r = c.getresponse()
            body = r.read().decode()
            c.close()
            outcome = (sent, r.status == 200, body if r.status == 200 else f"HTTP {r.status}: {body}")
        except Exception as e:  # noqa: BLE001 -- every failure counts
            outcome = (sent, False, repr(e))
        with self.lock:
            self.results.append(outcome)

    def run(self):
        start = time.monotonic()
        n = 0
        while not self.stopping.is_set():
            due = start + n / self.rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.pool.submit(self.one, time.monotonic())
            n += 1

    def start(self):
        self.thread.start()

    def stop(self):
        self.stopping.set()
        self.thread.join()
        self.pool.shutdown(wait=True)

    def snapshot(self):
        with self.lock:
            return list(self.results)


class Dev:
    def __init__(self, tmp, run=1):
        self.dir = tmp / "dev"  # a later run restores the store an earlier one left
        self.port = free_port(3)
        self.env = dict(os.environ, HANGAR_URL=f"http://127.0.0.1:{self.port}")
        out = tmp / f"dev-{run}.out"
        self.out = open(out, "w")
        self.proc = subprocess.Popen([HANGAR, "dev", "--dir", str(self.dir), "--port", str(self.port)],
                                     stdout=self.out, stderr=subprocess.STDOUT, env=self.env)
        try:
            self.await_up(out)
        except BaseException:
            self.stop()  # a cluster that did not come up is not left running
            raise

    def await_up(self, out):
        wait(lambda: len(json.loads(self.cli("nodes", "-o", "json"))["nodes"]) == 4 and
             all(n["state"] == "ready" for n in json.loads(self.cli("nodes", "-o", "json"))["nodes"]),
             60, "hangar dev's nodes")
        # Its banner (printed once the agents are connected) says where the services' endpoints are.
        wait(lambda: "services" in out.read_text(), 30, "hangar dev's banner")
        text = out.read_text()
        assert "services: endpoints on 127.0.0.1:" in text, f"hangar dev started no load balancer:\n{text}"

    def cli(self, *args):
        return subprocess.run([HANGAR, *args], env=self.env, check=True, capture_output=True, text=True).stdout

    def service(self, name="echo"):
        return json.loads(self.cli("service", "get", name, "-o", "json"))

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)
        self.out.close()


def replica_pids(service):
    """Processes of the service's replicas, by their environment: {replica id: [pid]}."""
    out = {}
    for p in pathlib.Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            env = dict(kv.split("=", 1) for kv in (p / "environ").read_bytes().decode(errors="replace").split("\0") if "=" in kv)
            cmd = (p / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        # (a probe command runs echo_model.py --check in the replica's environment: not a replica)
        if env.get("HANGAR_SERVICE") == service and "echo_model.py" in cmd and "--check" not in cmd:
            out.setdefault(int(env["HANGAR_REPLICA"]), []).append(int(p.name))
    return out


def haproxy_pids(cfg):
    out = []
    for p in pathlib.Path("/proc").iterdir():
        try:
            if p.name.isdigit() and cfg in (p / "cmdline").read_bytes().decode(errors="replace"):
                out.append(int(p.name))
        except OSError:
            continue
    return out


def answers(host, port):
    try:
        c = http.client.HTTPConnection(host, port, timeout=2)
        c.request("GET", "/")
        ok = c.getresponse().status == 200
        c.close()
        return ok
    except OSError:
        return False


def write_versions(folder):
    """echo.yaml as the example has it (v1), a v2, and a v3 that never becomes ready."""
    shutil.copy(SRC / "examples/services/echo_model.py", folder)
    base = (SRC / "examples/services/echo.yaml").read_text()
    (folder / "v1.yaml").write_text(base)
    (folder / "v2.yaml").write_text(base.replace("MODEL_VERSION: v1", "MODEL_VERSION: v2"))
    broken = base.replace("MODEL_VERSION: v1", 'MODEL_VERSION: v3, NEVER_READY: "1"')
    (folder / "v3.yaml").write_text(broken.replace("progress_deadline: 30s", "progress_deadline: 4s"))
    busy = base.replace("name: echo", "name: busy").replace("MODEL_VERSION: v1", 'MODEL_VERSION: v1, REPLY_DELAY: "0.3"')
    busy = busy.replace("  replicas: 3\n", "  autoscale: {min: 1, max: 3, in_flight_per_replica: 2, scale_down_after: 3s}\n")
    assert "autoscale" in busy
    (folder / "busy.yaml").write_text(busy)
    big = busy.replace("name: busy", "name: big").replace("max: 3, in_flight_per_replica: 2", "max: 4, rps_per_replica: 5")
    big = big.replace("    gpu_fraction: 0.25\n    gpu_memory: 10Gi\n", "    gpus: 8\n")
    assert "gpus: 8" in big and "max: 4" in big
    (folder / "big.yaml").write_text(big)
    shutil.copy(SRC / "examples/services/watched.yaml", folder)
    # The same watched from outside: readiness a TCP connection to its port, liveness an HTTP GET of
    # /livez, both made by the controller.
    watched = (SRC / "examples/services/watched.yaml").read_text()
    probes = ("  readiness: {tcp: HANGAR_PORT, interval: 1s, timeout: 2s}\n"
              "  liveness: {http: /livez, interval: 1s, timeout: 2s, failure_threshold: 2, initial_delay: 3s}\n")
    http_watched = re.sub(r"  readiness: .*\n  liveness: .*\n", probes, watched).replace("name: watched", "name: watched-http")
    assert "{http: /livez" in http_watched and "command: [python3, echo_model.py, --check" not in http_watched
    (folder / "watched-http.yaml").write_text(http_watched)
    (folder / "train.yaml").write_text("name: train\ntasks:\n  - {name: w, gpus: 8, cpu: 1, command: [sleep, '4']}\n")


def ready(dev, n, revision=None, name="echo"):
    s = dev.service(name)
    reps = [r for r in s["replicas"] if r["state"] == "ready" and (revision is None or r["revision"] == revision)]
    return s["ready"] == n and len(reps) == n


def replies_after(load, t):
    return [r for r in load.snapshot() if r[0] > t]


def wedge_one(dev, name="watched"):
    """Wedges the first replica of `name` (its /livez answers 500 from now on); its id."""
    r = dev.service(name)["replicas"][0]
    host, port = r["address"].rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=5)
    c.request("GET", "/wedge")
    assert c.getresponse().status == 200
    c.close()
    return r["id"]


def check_watched(dev, folder, name="watched", why="the command exited with 1: GET /livez"):
    """One replica of service `name` wedged: restarted for failing its liveness probe (the event
    says `why`), while a load through the endpoint sees no request fail."""
    print(dev.cli("service", "create", "-f", str(folder / f"{name}.yaml")), end="")
    wait(lambda: ready(dev, 2, name=name), 60, f"{name}'s replicas, ready by their readiness probe")
    load = Load(dev.service(name)["endpoint"], rate=20)
    load.start()
    try:
        time.sleep(1)
        victim = wedge_one(dev, name)
        pids = replica_pids(name)[victim]
        print(f"wedged replica {victim} of {name}")
        wait(lambda: any(r["id"] == victim and r["restarts"] == 1 and r["state"] == "ready"
                         for r in dev.service(name)["replicas"]) and dev.service(name)["ready"] == 2,
             60, f"replica {victim} to be restarted for failing liveness, and ready again")
        assert replica_pids(name)[victim] != pids
        events = json.loads(dev.cli("events", f"service/{name}", "-o", "json"))["events"]
        said = [e["message"] for e in events if "liveness" in e["message"]]
        assert said and f"liveness failed 2 times in a row ({why}" in said[0], said or events[:5]
        print("liveness:", said[0])
        time.sleep(1)
    finally:
        load.stop()
    failed = [r for r in load.snapshot() if not r[1]]
    assert not failed, failed[:10]
    dev.cli("service", "delete", name)
    wait(lambda: not replica_pids(name), 60, f"{name}'s processes to end")


def runtime_api(sock, command):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(sock))
        s.sendall(command.encode() + b"\n")
        return s.recv(65536).decode()


def check_tls_endpoint(tmp):
    certs = tmp / "certs dir"  # a path with a space, as a home folder may have
    hangar = lambda *a: subprocess.run([HANGAR, *a], check=True, capture_output=True, text=True).stdout
    hangar("certs", "init", "--dir", str(certs))
    hangar("certs", "issue", "--controller", "--dir", str(certs))  # names 127.0.0.1 among others
    hangar("certs", "issue", "--node", "client", "--dir", str(certs))
    port, sock = free_port(1), tmp / "tls-admin.sock"
    cfg = tmp / "tls-haproxy.cfg"
    cfg.write_text(hangar("service", "lb-config", f"unix:{sock}@127.0.0.1:{port}+1", "--tls-dir", str(certs),
                          "--verify-clients"))
    assert "ssl crt" in cfg.read_text()
    backend_port = free_port(1)
    backend = subprocess.Popen([sys.executable, "-m", "http.server", str(backend_port), "--bind", "127.0.0.1",
                                "--directory", str(tmp)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lb = subprocess.Popen(["haproxy", "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait(lambda: sock.exists(), 10, "the TLS HAProxy's runtime API")
        runtime_api(sock, f"set server svc0/r1 addr 127.0.0.1 port {backend_port}")
        runtime_api(sock, "set server svc0/r1 state ready")
        url = f"https://127.0.0.1:{port}/"
        curl = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", str(certs / "ca.crt"), url]
        client = ["--cert", str(certs / "node-client.crt"), "--key", str(certs / "node-client.key")]
        wait(lambda: subprocess.run(curl + client, capture_output=True, text=True).stdout == "200", 20,
             "an HTTPS request with a client certificate through the TLS endpoint")
        refused = subprocess.run(curl, capture_output=True, text=True)
        assert refused.stdout != "200", "a client without a certificate was let in"
        print("TLS endpoint: HTTPS with a client certificate of the cluster's CA reaches the replica; without, refused")
    finally:
        for p in (lb, backend):
            p.kill()
            p.wait()


def main():
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="hangar-services-"))
    check_tls_endpoint(tmp)
    folder = tmp / "svc"
    folder.mkdir()
    write_versions(folder)
    dev = Dev(tmp)
    load = None
    try:
        print(dev.cli("service", "create", "-f", str(folder / "v1.yaml")), end="")
        wait(lambda: ready(dev, 3, 1) and dev.service()["rollout"] == "complete", 60, "3 ready replicas")
        endpoint = dev.service()["endpoint"]
        endpoints = json.loads(subprocess.run(
            ["curl", "-sf", "-H", "Authorization: Bearer " + (dev.dir / "dev-token").read_text().strip(),
             dev.env["HANGAR_URL"] + "/v1/services/echo/endpoints"], check=True, capture_output=True, text=True).stdout)
        assert len(endpoints["ready"]) == 3 and endpoints["endpoint"] == endpoint, endpoints
        load = Load(endpoint)
        load.start()
        time.sleep(2)
        metrics = subprocess.run(
            ["curl", "-sf", "-H", "Authorization: Bearer " + (dev.dir / "dev-token").read_text().strip(),
             dev.env["HANGAR_URL"] + "/metrics?gpus=0&nodes=0"], check=True, capture_output=True, text=True).stdout
        assert 'hangar_service_replicas{service="echo",kind="ready"} 3' in metrics, metrics[-2000:]
        assert 'hangar_service_requests_total{service="echo"} ' in metrics
        check = subprocess.run(["promtool", "check", "metrics"], input=metrics, capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr

        # 1. kill -9 one replica.
        victim = dev.service()["replicas"][1]["id"]
        pids = replica_pids("echo")[victim]
        os.kill(pids[0], signal.SIGKILL)
        print(f"killed replica {victim} (pid {pids[0]})")
        wait(lambda: any(r["id"] == victim and r["restarts"] == 1 and r["state"] == "ready"
                         for r in dev.service()["replicas"]) and ready(dev, 3), 60, f"replica {victim} restarted and ready")
        assert replica_pids("echo")[victim][0] != pids[0]
        time.sleep(1)

        # 2. A rolling update of the three replicas.
        print(dev.cli("service", "update", "echo", "-f", str(folder / "v2.yaml")), end="")
        wait(lambda: dev.service()["rollout"] == "complete" and ready(dev, 3, 2), 60, "revision 2 rolled out")
        done = time.monotonic()
        time.sleep(2)
        after = replies_after(load, done)
        assert after and all("version=v2" in r[2] for r in after), [r for r in after if "version=v2" not in r[2]][:5]
        print(f"rolled out revision 2; {len(after)} requests since, all answered by it")

        # 3. A revision that never becomes ready, then rollback.
        print(dev.cli("service", "update", "echo", "-f", str(folder / "v3.yaml")), end="")
        wait(lambda: dev.service()["rollout"] == "failed", 60, "revision 3's rollout to stop")
        s = dev.service()
        assert "not ready" in s["message"], s["message"]
        assert ready(dev, 3, 2), s["replicas"]
        print("revision 3 stopped:", s["message"])
        print(dev.cli("service", "rollback", "echo"), end="")
        wait(lambda: dev.service()["rollout"] == "complete" and ready(dev, 3), 60, "the rollback")
        done = time.monotonic()
        time.sleep(2)
        after = replies_after(load, done)
        assert after and all("version=v2" in r[2] for r in after)
        revisions = [(r["revision"], r["state"]) for r in dev.service()["revisions"]]
        assert revisions == [(1, "superseded"), (2, "superseded"), (3, "failed"), (4, "complete")], revisions

        # 4. Autoscaling: a second service whose replies take 0.3 s; 20 requests/s keep about 6 in
        # flight, 3 replicas' worth; 2 requests/s want 1.
        print(dev.cli("service", "create", "-f", str(folder / "busy.yaml")), end="")
        wait(lambda: dev.service("busy")["ready"] == 1, 60, "busy's first replica")
        heavy = Load(dev.service("busy")["endpoint"], rate=20)
        heavy.start()
        try:
            wait(lambda: dev.service("busy")["desired"] == 3 and dev.service("busy")["ready"] == 3, 60, "busy to scale out")
            print("busy scaled out:", dev.service("busy")["scale"])
            tiers = sorted(r["tier"] for r in dev.service("busy")["replicas"])
            assert tiers == ["guaranteed", "opportunistic", "opportunistic"], tiers
        finally:
            heavy.stop()
        light = Load(dev.service("busy")["endpoint"], rate=2)
        light.start()
        try:
            wait(lambda: dev.service("busy")["desired"] == 1 and len(dev.service("busy")["replicas"]) == 1, 60,
                 "busy to scale in")
            print("busy scaled in:", dev.service("busy")["scale"])
            time.sleep(1)
        finally:
            light.stop()
        busy_failed = [r for r in heavy.snapshot() + light.snapshot() if not r[1]]
        assert not busy_failed, busy_failed[:10]
        dev.cli("service", "delete", "busy")

        # 5. Command probes and liveness: one replica of `watched` wedged; then the same with the
        # controller's own probes (tcp readiness, http liveness).
        check_watched(dev, folder)
        check_watched(dev, folder, "watched-http", "HTTP 500 on /livez")

        load.stop()
        results = load.snapshot()
        failed = [r for r in results if not r[1]]
        print(f"{len(results)} requests through the endpoint, {len(failed)} failed")
        assert len(results) > 5 * RATE, len(results)  # the load ran throughout
        assert not failed, failed[:10]

        # A controller restart (hangar dev again on the same store, with a new HAProxy): the
        # service is restored from the store and its replicas serve again.
        dev.stop()
        dev = Dev(tmp, run=2)
        wait(lambda: ready(dev, 3) and dev.service()["revision"] == 4, 60, "the restored service's replicas")
        endpoint = dev.service()["endpoint"]
        host, port = endpoint.rsplit(":", 1)
        # Ready in the book comes a round before the new HAProxy has the servers enabled.
        wait(lambda: answers(host, int(port)), 30, "the restored service to answer through its endpoint")
        print(f"restored after a restart: {dev.service()['ready']} ready at {endpoint}")

        # Deleted: its replicas drain and stop, and it is gone.
        dev.cli("service", "delete", "echo")
        wait(lambda: not json.loads(dev.cli("service", "list", "-o", "json"))["services"], 60, "the service to go")
        wait(lambda: not replica_pids("echo"), 30, "the replicas' processes to end")
        print("deleted; no replica runs")

        # 6. A guaranteed training job reclaims an opportunistic replica's node.
        print(dev.cli("service", "create", "-f", str(folder / "big.yaml")), end="")
        wait(lambda: dev.service("big")["ready"] == 1, 60, "big's first replica")
        heavy = Load(dev.service("big")["endpoint"], rate=25)
        heavy.start()
        try:
            # Full: every node holds one of big's four replicas and nothing else (echo's ended jobs
            # have given their GPUs back), so the training job can start only on a replica's node.
            # With a node partly free the training job could take it unopposed (a CI run saw that).
            wait(lambda: dev.service("big")["desired"] == 4 and dev.service("big")["ready"] == 4 and
                 all(n["gpus_free"] == 0 for n in json.loads(dev.cli("nodes", "-o", "json"))["nodes"]),
                 90, "big to fill the cluster")
            train = dev.cli("submit", str(folder / "train.yaml")).split()[2]
            seen = set()

            def trained():
                seen.update(r["why"] for r in dev.service("big")["replicas"])
                return json.loads(dev.cli("job", train, "-o", "json"))["state"] == "succeeded"

            wait(trained, 60, "the training job")
            assert {"preempted: draining", "its job was requeued"} & seen, seen
            reps = dev.service("big")["replicas"]
            print("training reclaimed a replica's node:", [(r["id"], r["tier"], r["state"], r["why"]) for r in reps])
        finally:
            heavy.stop()
        big_failed = [r for r in heavy.snapshot() if not r[1]]
        assert not big_failed, big_failed[:10]

        # HAProxy restarted: the controller sets its servers again.
        cfg = str(dev.dir / "lb" / "haproxy.cfg")
        for pid in haproxy_pids(cfg):
            os.kill(pid, signal.SIGKILL)
        wait(lambda: not haproxy_pids(cfg), 10, "the killed haproxy to go")
        restarted = subprocess.Popen(["haproxy", "-db", "-f", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            host, port = dev.service("big")["endpoint"].rsplit(":", 1)
            wait(lambda: answers(host, int(port)), 30, "the restarted HAProxy to serve the replicas")
            print("HAProxy restarted: the replicas are in rotation again")
        finally:
            restarted.kill()
            restarted.wait()

        dev.cli("service", "delete", "big")
        wait(lambda: not json.loads(dev.cli("service", "list", "-o", "json"))["services"], 60, "big to go")
        wait(lambda: not replica_pids("big"), 30, "big's processes to end")
    finally:
        if load and not load.stopping.is_set():
            load.stop()
        dev.stop()
    left = haproxy_pids(str(dev.dir / "lb" / "haproxy.cfg"))
    assert not left, f"haproxy still runs: {left}"
    shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        for log in sorted(pathlib.Path(tempfile.gettempdir()).glob("hangar-services-*/dev-*.out"))[-1:]:
            print(f"--- {log}:\n" + log.read_text()[-3000:], file=sys.stderr)
        raise
