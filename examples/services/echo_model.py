#!/usr/bin/env python3
"""A stand-in for a model server: answers every GET with its replica id and revision.

Hangar gives each replica its port as HANGAR_PORT, and its identity as HANGAR_SERVICE,
HANGAR_REPLICA and HANGAR_REVISION. /healthz is the readiness probe's path: it answers 200 once
the "model" is loaded (after LOAD_SECONDS), or never when NEVER_READY is set (a broken revision).
/livez is a liveness path: 200 until GET /wedge wedges the "model" (it keeps answering other
requests, but /livez and /healthz answer 500 from then on, until the process is restarted).

`echo_model.py --check PATH` is a probe command (run inside a replica's task, where HANGAR_PORT is
the replica's own): it exits 0 when GET PATH answers 200, else 1, saying why. Standard library
only.
"""
import http.server
import os
import signal
import sys
import threading
import time

PORT = int(os.environ["HANGAR_PORT"])
REPLICA = os.environ.get("HANGAR_REPLICA", "?")
REVISION = os.environ.get("HANGAR_REVISION", "?")
VERSION = os.environ.get("MODEL_VERSION", "v1")
LOADED_AT = time.monotonic() + float(os.environ.get("LOAD_SECONDS", "0"))
NEVER_READY = os.environ.get("NEVER_READY", "") not in ("", "0")
WEDGED = threading.Event()


def check(path):
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{PORT}{path}", timeout=2) as r:
            return 0 if r.status == 200 else 1
    except Exception as e:  # noqa: BLE001 -- every failure is a failed probe
        print(f"GET {path}: {e}")
        return 1


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path == "/wedge":
            WEDGED.set()
            self.answer(200, f"replica {REPLICA} wedged\n")
            return
        if self.path in ("/healthz", "/livez") and WEDGED.is_set():
            self.answer(500, "wedged\n")
            return
        if self.path == "/livez":
            self.answer(200, "alive\n")
            return
        if self.path == "/healthz":
            ready = not NEVER_READY and time.monotonic() >= LOADED_AT
            self.answer(200 if ready else 503, "ready\n" if ready else "loading\n")
            return
        delay = float(os.environ.get("REPLY_DELAY", "0"))
        if delay:
            time.sleep(delay)
        self.answer(200, f"replica={REPLICA} revision={REVISION} version={VERSION}\n")

    def answer(self, code, text):
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default listen backlog is 5: a replica short of CPU then drops connections
    # (clients wait out SYN retries of 1, 3 and 7 s), and the load balancer's retries run out.
    request_queue_size = 1024


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2]))
    server = Server(("0.0.0.0", PORT), Handler)
    # SIGTERM (Hangar stops a replica only after the load balancer drained it): finish and exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # The checkpoint signal (preempted: Hangar drains the replica meanwhile): keep answering what
    # still arrives for DRAIN_SECONDS, then exit, so the GPU is given back well within the grace.
    drain = float(os.environ.get("DRAIN_SECONDS", "2"))
    signal.signal(signal.SIGUSR1, lambda *_: threading.Timer(drain, lambda: os._exit(0)).start())
    print(f"replica {REPLICA} (revision {REVISION}, {VERSION}) listening on {PORT}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
