#!/usr/bin/env python3
"""A stand-in for a model server: answers every GET with its replica id and revision.

Hangar gives each replica its port as HANGAR_PORT, and its identity as HANGAR_SERVICE,
HANGAR_REPLICA and HANGAR_REVISION. /healthz is the readiness probe's path: it answers 200 once
the "model" is loaded (after LOAD_SECONDS), or never when NEVER_READY is set (a broken revision).
Standard library only.
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


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
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
