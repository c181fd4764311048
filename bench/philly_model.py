#!/usr/bin/env python3
"""An independent model of `hangar sim replay --format philly --philly-vcs ...` (issue 14).

Standard library only. It replays Microsoft Philly's philly.csv on the virtual clusters of
philly_vc_nodes.csv -- each VC its own partition of N nodes x 8 GPUs -- under one of two
policies, and prints the figures `hangar sim replay` prints (and, with --json, writes its keys):

  fifo           strict first-come-first-served: the cycle stops at the first job that does
                 not fit (jobs that can never fit their VC are skipped, and stay pending).
  fifo-backfill  EASY backfill: the first job that does not fit reserves the nodes it would
                 get when enough running jobs have ended (each job's time limit is its true run
                 time); later jobs start if they fit elsewhere, or on the reserved nodes if
                 they surely end before the reservation.

What it models, taken from the C++ (docs/trace-format.md, src/sim/replay/, src/sim/engine/,
src/sched/):

  * Trace: header `timestamp,duration,num_gpus,gpu_time,cluster`; blank and `#` lines skipped;
    any bad row stops the read with `file:line: what`. Times are UTC, kept in milliseconds;
    duration seconds -> ms rounded half up. A job of g <= 8 GPUs is one task of g GPUs; a job
    of g > 8 GPUs is ceil(g/8) tasks of 8 whole GPUs (a 12-GPU job holds 16 GPUs).
  * Jobs are sorted by (submit, CSV line); with --load L each submit becomes
    t0 + trunc((submit - t0) / L), t0 the first submit. Jobs of a VC not listed count as
    no_partition. A gang needing more nodes than its VC has can never fit: it stays pending
    and is counted as `never`.
  * Each VC runs alone. Event loop: at each time t, the jobs that end at t finish, then the
    jobs submitted by t arrive, then one scheduling cycle runs if anything is pending (a job
    that never fits keeps the cycles coming; they are counted in `cycles`).
  * Placement: a one-task job goes to the node with the fewest free GPUs that still holds it
    (best fit; ties: the lowest node), a gang to the lowest-numbered wholly free nodes.
  * EASY reservation: releases of the running jobs (and of the jobs started earlier in this
    cycle) at start + time limit, in order of (end, job); after each distinct end time the
    blocked job is placed on that future cluster, and the reservation is that time and the
    node(s) it got. A later job may use those nodes only if now + its time limit <= the
    reservation's time. A job's time limit is max(run time, 1 ms).

The data structures are this model's own: per VC, the nodes bucketed by free GPUs (sorted
lists, bisect); running jobs in a list sorted by expected end; ends in a heap; and for the
backfill scan, per task shape the waiting jobs in FIFO order with a min-segment-tree of their
time limits, so a cycle visits, merged in FIFO order by a heap, only the jobs that may still
start (a shape that failed once this cycle fails for every later job of that shape, because a
cycle only ever takes GPUs).

Usage:
  python3 bench/philly_model.py --trace ../shared/traces/philly/philly.csv \
      --philly-vcs ../shared/traces/philly/philly_vc_nodes.csv --policy fifo-backfill --load 4 \
      [--json out.json] [--jobs-csv jobs.csv]
"""

import argparse
import bisect
import heapq
import json
import math
import sys
import time
from datetime import date

GPUS_PER_NODE = 8
SECOND = 1000  # the model's clock is in milliseconds, as the C++'s
EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
GONE = 1 << 62  # the time limit of a slot whose job has started
ANY = GONE - 1


class TraceError(Exception):
    pass


# ----------------------------------------------------------------------------------------------
# Input


def parse_utc(text, where):
    """'YYYY-MM-DD HH:MM:SS' (or 'T' between, or a bare date) as ms since the Unix epoch."""
    day, sep, clock = text.replace("T", " ", 1).partition(" ")
    try:
        y, m, d = (int(x) for x in day.split("-"))
        h = mi = s = 0
        if sep:
            h, mi, s = (int(x) for x in clock.strip().split(":"))
        if h > 23 or mi > 59 or s > 60:
            raise ValueError
        days = date(y, m, d).toordinal() - EPOCH_ORDINAL
    except ValueError:
        raise TraceError(f"{where}: timestamp: '{text}' is not a valid date and time") from None
    return ((days * 24 + h) * 60 + mi) * 60 * SECOND + s * SECOND


def parse_seconds(text):
    """Seconds (a decimal number >= 0) to ms, rounded half up; None when not one."""
    if not text or text[0] in "+-" or "_" in text:
        return None
    try:
        v = float(text)
    except ValueError:
        return None
    if not math.isfinite(v) or v < 0:
        return None
    return int(v * 1000 + 0.5)


def csv_lines(path):
    """(line number, fields) of each non-blank, non-comment line."""
    try:
        f = open(path, newline="")
    except OSError:
        raise TraceError(f"{path}: cannot open the trace; check the path") from None
    with f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n").replace("\r", "")
            if not line.strip(" \t") or line[0] == "#":
                continue
            yield number, line.split(",")


def read_philly_trace(path):
    """Jobs as tuples (submit_ms, row, runtime_ms, replicas, gpus_per_replica, vc)."""
    lines = csv_lines(path)
    first = next(lines, None)
    if first is None or len(first[1]) != 5 or first[1][0].strip(" \t") != "timestamp":
        raise TraceError(f"{path}:{first[0] if first else 0}: a Philly trace starts with the header "
                         "timestamp,duration,num_gpus,gpu_time,cluster")
    jobs = []
    day_cache = {}
    for number, v in lines:
        where = f"{path}:{number}"
        if len(v) != 5:
            raise TraceError(f"{where}: expected 5 columns, found {len(v)}")
        stamp = v[0].strip(" \t")
        submit = day_cache.get(stamp)
        if submit is None:
            submit = day_cache[stamp] = parse_utc(stamp, where)
        runtime = parse_seconds(v[1].strip(" \t"))
        if runtime is None:
            raise TraceError(f"{where}: duration '{v[1]}' must be seconds >= 0")
        g = v[2].strip(" \t")
        if not (g.isascii() and g.isdigit()) or int(g) < 1:
            raise TraceError(f"{where}: num_gpus '{v[2]}' must be a whole number >= 1")
        g = int(g)
        if g <= GPUS_PER_NODE:
            replicas, per = 1, g
        else:
            replicas, per = (g + GPUS_PER_NODE - 1) // GPUS_PER_NODE, GPUS_PER_NODE
        jobs.append((submit, number, runtime, replicas, per, v[4].strip(" \t")))
    return jobs


def read_vcs(path):
    """[(vc, nodes)] in file order."""
    lines = csv_lines(path)
    first = next(lines, None)
    if first is None or len(first[1]) != 2:
        raise TraceError(f"{path}:{first[0] if first else 0}: expected the header vc,node num")
    out = []
    for number, v in lines:
        name = v[0].strip(" \t") if len(v) == 2 else ""
        nodes = v[1].strip(" \t") if len(v) == 2 else ""
        if not name or not (nodes.isascii() and nodes.isdigit()) or int(nodes) < 1:
            raise TraceError(f"{path}:{number}: expected a row 'vc,nodes' with nodes >= 1")
        out.append((name, int(nodes)))
    if not out:
        raise TraceError(f"{path}: no virtual clusters listed")
    return out


# ----------------------------------------------------------------------------------------------
# One virtual cluster


class MinTree:
    """Time limits of one shape's waiting jobs, by arrival slot; finds the first slot >= lo
    whose limit is <= x (GONE marks a started job)."""

    def __init__(self, capacity):
        size = 1
        while size < max(1, capacity):
            size *= 2
        self.size = size
        self.t = [GONE] * (2 * size)

    def set(self, pos, value):
        t = self.t
        i = pos + self.size
        t[i] = value
        i >>= 1
        while i:
            m = t[2 * i] if t[2 * i] < t[2 * i + 1] else t[2 * i + 1]
            if t[i] == m:
                break
            t[i] = m
            i >>= 1

    def first_at_most(self, lo, x):
        t, size = self.t, self.size
        if lo >= size:
            return -1
        i = lo + size
        while t[i] > x:
            while i & 1:  # a right child: its parent's right neighbour comes next
                i >>= 1
            if i == 0:
                return -1
            i += 1
        while i < size:  # leftmost leaf <= x under i
            i *= 2
            if t[i] > x:
                i += 1
        return i - size


class VirtualCluster:
    def __init__(self, nodes, jobs, policy):
        self.nodes = nodes
        self.jobs = jobs  # (submit, row, runtime, replicas, per) in FIFO order
        self.backfill = policy == "fifo-backfill"
        self.free = [GPUS_PER_NODE] * nodes
        # buckets[f]: the nodes with f free GPUs, sorted.
        self.buckets = [[] for _ in range(GPUS_PER_NODE + 1)]
        self.buckets[GPUS_PER_NODE] = list(range(nodes))
        n = len(jobs)
        self.start = [None] * n
        self.end = [None] * n
        self.held = [None] * n  # nodes a running job holds
        self.running = []  # (expected end, job), sorted
        self.ends = []  # heap of (end, job)
        self.never = 0  # pending jobs that never fit
        self.cycles = 0
        # Shapes: (replicas, gpus per replica).
        self.limit = [max(j[2], 1) for j in jobs]
        if self.backfill:
            counts = {}
            for j in jobs:
                counts[(j[3], j[4])] = counts.get((j[3], j[4]), 0) + 1
            self.shapes = {s: ([], MinTree(c)) for s, c in counts.items()}  # slots, tree
        else:
            self.queue = []  # FIFO: waiting jobs in order
            self.head = 0

    # -- GPUs --------------------------------------------------------------------------------

    def _set_free(self, node, free):
        old = self.buckets[self.free[node]]
        del old[bisect.bisect_left(old, node)]
        bisect.insort(self.buckets[free], node)
        self.free[node] = free

    def find(self, replicas, per, excluded):
        """Nodes for the gang now (best fit), avoiding `excluded`; None if it does not fit."""
        if replicas == 1:
            for f in range(per, GPUS_PER_NODE + 1):
                for node in self.buckets[f]:
                    if node not in excluded:
                        return (node,)
            return None
        got = []
        for node in self.buckets[GPUS_PER_NODE]:
            if node not in excluded:
                got.append(node)
                if len(got) == replicas:
                    return got
        return None

    def run(self, k, nodes, now):
        per = self.jobs[k][4]
        for node in nodes:
            self._set_free(node, self.free[node] - per)
        self.held[k] = nodes
        self.start[k] = now
        end = now + self.jobs[k][2]
        self.end[k] = end
        heapq.heappush(self.ends, (end, k))
        bisect.insort(self.running, (now + self.limit[k], k))

    def finish(self, k):
        per = self.jobs[k][4]
        for node in self.held[k]:
            self._set_free(node, self.free[node] + per)
        self.held[k] = None
        entry = (self.start[k] + self.limit[k], k)
        del self.running[bisect.bisect_left(self.running, entry)]

    # -- EASY reservation ----------------------------------------------------------------------

    def reserve(self, k):
        """(time, nodes) at which blocked job k could start if the running jobs end at their time
        limits. Nothing fits k now, so only nodes whose jobs end can take it."""
        replicas, per = self.jobs[k][3], self.jobs[k][4]
        running, free, jobs, held = self.running, self.free, self.jobs, self.held
        future = {}
        whole = []  # nodes that become wholly free, for a gang
        i, n = 0, len(running)
        while i < n:
            at = running[i][0]
            touched = []
            while i < n and running[i][0] == at:
                j = running[i][1]
                jp = jobs[j][4]
                for node in held[j]:
                    f = future[node] = future.get(node, free[node]) + jp
                    touched.append(node)
                    if f == GPUS_PER_NODE:
                        whole.append(node)
                i += 1
            if replicas == 1:
                # Nodes untouched so far have too few GPUs, or k would have fit: the new
                # candidates are those freed at `at`.
                fits = [(future[node], node) for node in touched if future[node] >= per]
                if fits:
                    return at, frozenset((min(fits)[1],))
            elif len(self.buckets[GPUS_PER_NODE]) + len(whole) >= replicas:
                return at, frozenset(sorted(self.buckets[GPUS_PER_NODE] + whole)[:replicas])
        raise AssertionError("a job that fits an empty VC found no reservation")

    # -- Cycles --------------------------------------------------------------------------------

    def arrive(self, k):
        replicas = self.jobs[k][3]
        if replicas > self.nodes:
            self.never += 1
            return
        if self.backfill:
            slots, tree = self.shapes[(replicas, self.jobs[k][4])]
            tree.set(len(slots), self.limit[k])
            slots.append(k)
        else:
            self.queue.append(k)

    def cycle_fifo(self, now):
        q = self.queue
        while self.head < len(q):
            k = q[self.head]
            nodes = self.find(self.jobs[k][3], self.jobs[k][4], ())
            if nodes is None:
                break
            self.run(k, nodes, now)
            self.head += 1
        if self.head > 4096 and self.head * 2 > len(q):
            del q[: self.head]
            self.head = 0

    def cycle_backfill(self, now):
        # Candidates merged in FIFO order: (job, shape, slot). Per shape, `bound` is the largest
        # time limit that may still start: ANY, then (once the shape failed off the reserved
        # nodes) the time left before the reservation, then none.
        heap = []
        bound = {}
        for shape, (slots, tree) in self.shapes.items():
            pos = tree.first_at_most(0, ANY)
            if pos >= 0:
                heap.append((slots[pos], shape, pos))
                bound[shape] = ANY
        heapq.heapify(heap)
        reserved, res_at, excluded_nodes = False, 0, frozenset()
        while heap:
            k, shape, pos = heapq.heappop(heap)
            slots, tree = self.shapes[shape]
            short = not reserved or now + self.limit[k] <= res_at
            nodes = self.find(shape[0], shape[1], () if short else excluded_nodes)
            if nodes is not None:
                self.run(k, nodes, now)
                tree.set(pos, GONE)
            else:
                if not reserved:
                    reserved = True
                    res_at, excluded_nodes = self.reserve(k)
                if short:
                    continue  # no nodes at all: the shape is done this cycle
                bound[shape] = res_at - now
            nxt = tree.first_at_most(pos + 1, bound[shape])
            if nxt >= 0:
                heapq.heappush(heap, (slots[nxt], shape, nxt))

    def replay(self):
        jobs, n = self.jobs, len(self.jobs)
        cycle = self.cycle_backfill if self.backfill else self.cycle_fifo
        ends = self.ends
        nxt = 0
        waiting = 0  # arrived and not started, never-fitting ones included
        while nxt < n or ends:
            t = jobs[nxt][0] if nxt < n else ends[0][0]
            if ends and ends[0][0] < t:
                t = ends[0][0]
            while ends and ends[0][0] <= t:
                self.finish(heapq.heappop(ends)[1])
            while nxt < n and jobs[nxt][0] <= t:
                self.arrive(nxt)
                nxt += 1
                waiting += 1
            if waiting:
                self.cycles += 1
                before = len(ends)
                cycle(t)
                waiting -= len(ends) - before


# ----------------------------------------------------------------------------------------------
# The replay and its figures


def replay(trace, vcs, policy, load, first_day=None, last_day=None):
    """Replays the trace's jobs submitted from first_day (ms, included) to last_day (ms, the
    whole day included) on the VCs; returns (t0, no_partition, [(vc, nodes, VirtualCluster)])."""
    if load <= 0:
        raise TraceError("--load must be above 0")
    day = 24 * 3600 * SECOND
    jobs = sorted(j for j in trace  # (submit, row, ...): the submission order, ties by CSV line
                  if (first_day is None or j[0] >= first_day) and (last_day is None or j[0] < last_day + day))
    if not jobs:
        raise TraceError("no job in the trace was submitted in the selected days")
    t0 = jobs[0][0]
    if load != 1:
        # Compressed submits can tie where the original ones did not: the queue then orders by
        # (compressed submit, CSV line), as the simulator's arrivals and its FIFO key do.
        jobs = sorted((t0 + int((j[0] - t0) / load),) + j[1:] for j in jobs)
    index = {name: i for i, (name, _) in enumerate(vcs)}
    per_vc = [[] for _ in vcs]
    no_partition = 0
    for j in jobs:
        i = index.get(j[5])
        if i is None:
            no_partition += 1
        else:
            per_vc[i].append(j[:5])
    runs = []
    for (name, nodes), vc_jobs in zip(vcs, per_vc):
        vc = VirtualCluster(nodes, vc_jobs, policy)
        vc.replay()
        runs.append((name, nodes, vc))
    return t0, no_partition, runs


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    rank = math.ceil(p * len(sorted_values))
    return sorted_values[min(max(rank, 1), len(sorted_values)) - 1]


def metrics(t0, no_partition, runs):
    jct_ms, queue_ms, runtime_ms = [], [], []
    slowdown = []
    never = cycles = busy_ms = gpus = 0
    last_end = t0
    queues = []
    for name, nodes, vc in runs:
        gpus += nodes * GPUS_PER_NODE
        never += vc.never
        cycles += vc.cycles
        q_jct = q_wait = q_jobs = 0
        for k, (submit, _, runtime, replicas, per) in enumerate(vc.jobs):
            if vc.end[k] is None:
                continue
            jct_ms.append(vc.end[k] - submit)
            queue_ms.append(vc.start[k] - submit)
            runtime_ms.append(runtime)
            slowdown.append((vc.end[k] - submit) / max(runtime, SECOND))
            busy_ms += replicas * per * runtime
            last_end = max(last_end, vc.end[k])
            q_jobs += 1
            q_jct += vc.end[k] - submit
            q_wait += vc.start[k] - submit
        queues.append({"name": name, "guarantee_gpus": float(nodes * GPUS_PER_NODE), "jobs": q_jobs,
                       "avg_jct_s": q_jct / SECOND / max(1, q_jobs),
                       "avg_queue_s": q_wait / SECOND / max(1, q_jobs)})
    n = len(jct_ms)
    mean = (lambda total: total / SECOND / n) if n else (lambda total: 0.0)
    jct_sorted = sorted(jct_ms)
    makespan = (last_end - t0) / SECOND
    return {
        "jobs": n,
        "never": never,
        "no_partition": no_partition,
        "avg_jct_s": mean(sum(jct_ms)),
        "p50_jct_s": percentile(jct_sorted, 0.50) / SECOND,
        "p99_jct_s": percentile(jct_sorted, 0.99) / SECOND,
        "avg_queue_s": mean(sum(queue_ms)),
        "p99_queue_s": percentile(sorted(queue_ms), 0.99) / SECOND,
        "makespan_s": makespan,
        "gpu_util_pct": 100.0 * (busy_ms / SECOND) / (gpus * makespan) if makespan > 0 and gpus else 0.0,
        "avg_slowdown": math.fsum(slowdown) / n if n else 0.0,
        "avg_runtime_s": mean(sum(runtime_ms)),
        "mode": "partitions",
        "queues": queues,
        "preemptions": 0,
        "cycles": cycles,
        "gpus": gpus,
    }


def write_jobs_csv(path, t0, runs):
    """One row per finished job, in the C++'s --jobs-csv format and order."""
    with open(path, "w") as f:
        f.write("partition,submit_s,start_s,end_s,runtime_s,gpus,preemptions\n")
        for name, _, vc in runs:
            for k, (submit, _, runtime, replicas, per) in enumerate(vc.jobs):
                if vc.end[k] is None:
                    continue
                f.write(f"{name},{(submit - t0) / SECOND:g},{(vc.start[k] - t0) / SECOND:g},"
                        f"{(vc.end[k] - t0) / SECOND:g},{runtime / SECOND:g},{replicas * per},0\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", required=True, help="philly.csv")
    ap.add_argument("--philly-vcs", required=True, help="philly_vc_nodes.csv")
    ap.add_argument("--policy", required=True, choices=["fifo", "fifo-backfill"])
    ap.add_argument("--load", type=float, default=1.0, help="divide the gaps between arrivals by F")
    ap.add_argument("--format", default="philly", choices=["philly"], help="accepted for symmetry")
    ap.add_argument("--from", dest="first", help="first submit day (YYYY-MM-DD), included")
    ap.add_argument("--to", dest="last", help="last submit day (YYYY-MM-DD), included")
    ap.add_argument("--json", help="write the metrics here")
    ap.add_argument("--jobs-csv", help="write one row per finished job here")
    a = ap.parse_args(argv)
    wall0 = time.perf_counter()
    try:
        vcs = read_vcs(a.philly_vcs)
        trace = read_philly_trace(a.trace)
        first = parse_utc(a.first, "--from") if a.first else None
        last = parse_utc(a.last, "--to") if a.last else None
        t0, no_partition, runs = replay(trace, vcs, a.policy, a.load, first, last)
    except TraceError as e:
        print(f"philly_model: {e}", file=sys.stderr)
        return 2
    out = metrics(t0, no_partition, runs)
    out["wall_s"] = time.perf_counter() - wall0
    out.update({"policy": a.policy, "trace": a.trace, "load": a.load, "from": a.first or "",
                "to": a.last or "", "format": "philly",
                "model": "bench/philly_model.py"})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
    if a.jobs_csv:
        write_jobs_csv(a.jobs_csv, t0, runs)
    print(f"{a.policy}: {out['jobs']} jobs ({out['never']} never fit), avg JCT {out['avg_jct_s']:.0f} s, "
          f"p50 {out['p50_jct_s']:.0f} s, p99 {out['p99_jct_s']:.0f} s, avg queue {out['avg_queue_s']:.0f} s, "
          f"GPU util {out['gpu_util_pct']:.1f}%, 0 preemptions; {out['cycles']} cycles in {out['wall_s']:.3f} s "
          f"(python model; avg_jct_s {out['avg_jct_s']!r})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
