"""Report training progress to Hangar from inside a task, with the standard library only.

    from hangar_progress import report
    for step in range(start, steps):
        t0 = time.monotonic()
        train_step()
        report(step, time.monotonic() - t0)

Each call sends one line to the node's agent over $HANGAR_AGENT_SOCKET (docs/progress.md):
{"op": "progress", "task_id": ..., "step": N, "step_time": S}. Outside a Hangar task (no
HANGAR_TASK_ID) it does nothing and returns False; it never raises on a missing agent, so that
a training loop does not die because its node's agent restarted.
"""

import json
import os
import socket

__all__ = ["report"]


def report(step, step_time=None, timeout=2.0):
    """Tells the agent `step` was reached (and `step_time`, seconds the last step took).

    Returns True when the agent took it, False otherwise (not in a task, no agent, refused).
    """
    task_id = os.environ.get("HANGAR_TASK_ID")
    path = os.environ.get("HANGAR_AGENT_SOCKET")
    if not task_id or not path:
        return False
    request = {"op": "progress", "task_id": task_id, "step": int(step)}
    if step_time is not None:
        request["step_time"] = float(step_time)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            s.sendall((json.dumps(request) + "\n").encode())
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                answer += chunk
        return bool(json.loads(answer or b"{}").get("ok"))
    except (OSError, ValueError):
        return False
