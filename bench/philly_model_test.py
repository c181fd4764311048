#!/usr/bin/env python3
"""Checks of bench/philly_model.py: its backfill scan (per-shape segment trees merged by a heap)
against a plain scan of every waiting job, on random small VCs and on the Philly trace, and a
few hand-worked cases.

  python3 bench/philly_model_test.py                 # random cases and hand-worked ones
  python3 bench/philly_model_test.py --trace ../shared/traces/philly/philly.csv \
      --philly-vcs ../shared/traces/philly/philly_vc_nodes.csv   # also the whole trace, load 1 and 4
"""

import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import philly_model as pm  # noqa: E402


class PlainScan(pm.VirtualCluster):
    """EASY backfill as its definition reads: every waiting job in FIFO order, each tried."""

    def __init__(self, nodes, jobs, policy):
        super().__init__(nodes, jobs, policy)
        self.waiting = []

    def arrive(self, k):
        if self.jobs[k][3] > self.nodes:
            self.never += 1
        else:
            self.waiting.append(k)

    def cycle_backfill(self, now):
        reserved, res_at, excluded = False, 0, frozenset()
        left = []
        for k in self.waiting:
            short = not reserved or now + self.limit[k] <= res_at
            nodes = self.find(self.jobs[k][3], self.jobs[k][4], () if short else excluded)
            if nodes is not None:
                self.run(k, nodes, now)
                continue
            left.append(k)
            if not reserved:
                reserved = True
                res_at, excluded = self.reserve(k)
        self.waiting = left


def outcome(vc):
    return list(zip(vc.start, vc.end)), vc.never, vc.cycles


def random_jobs(rng, n, max_gpus):
    t, jobs = 0, []
    for row in range(2, n + 2):
        t += rng.choice([0, 0, 1000, 5000, 60000])
        g = rng.choice([1, 1, 1, 2, 4, 8, 16, 24, max_gpus])
        rt = rng.choice([0, 1000, 30000, 600000, 3600000, rng.randrange(1, 10 ** 7)])
        replicas, per = (1, g) if g <= 8 else ((g + 7) // 8, 8)
        jobs.append((t, row, rt, replicas, per))
    return jobs


def check_random(cases=300):
    rng = random.Random(14)
    for case in range(cases):
        nodes = rng.choice([1, 2, 3, 4, 8])
        jobs = random_jobs(rng, rng.randrange(1, 120), 8 * (nodes + 1))
        a = pm.VirtualCluster(nodes, jobs, "fifo-backfill")
        a.replay()
        b = PlainScan(nodes, jobs, "fifo-backfill")
        b.replay()
        assert outcome(a) == outcome(b), f"random case {case}: the scans differ"
    print(f"ok: {cases} random VCs, tree scan == plain scan")


def check_hand_worked():
    # One 8-GPU node. A (8 GPUs, 100 s) runs; B (8 GPUs) waits and reserves the node at 100 s;
    # C (1 GPU, 50 s) fits before the reservation... but no GPU is free: it waits. At 100 s B
    # starts; C starts at 200 s. FIFO gives the same here.
    jobs = [(0, 2, 100000, 1, 8), (0, 3, 100000, 1, 8), (0, 4, 50000, 1, 1)]
    for policy in ("fifo", "fifo-backfill"):
        vc = pm.VirtualCluster(1, jobs, policy)
        vc.replay()
        assert vc.start == [0, 100000, 200000], (policy, vc.start)
    # Two nodes. A (12 GPUs -> 2 x 8, 100 s) runs; B (4 GPUs, 10 s) at 1 s, C (16 GPUs) at 1 s
    # waits for A and reserves both nodes at 100 s; D (1 GPU, 1000 s) at 2 s would delay it.
    # E (1 GPU, 50 s) at 2 s ends before 100 s... but no GPU is free until A ends.
    jobs = [(0, 2, 100000, 2, 8), (1000, 3, 10000, 1, 4), (1000, 4, 50000, 2, 8),
            (2000, 5, 1000000, 1, 1), (2000, 6, 50000, 1, 1)]
    vc = pm.VirtualCluster(2, jobs, "fifo-backfill")
    vc.replay()
    # At 100 s: B (4 GPUs) on node 0, then C needs both nodes: reserves them at 110 s; D (1000 s)
    # may not use them; E (50 s) would end at 150 s > 110 s: may not either. B ends at 110 s,
    # C runs 110-160 s, D and E at 160 s (best fit: both on node 0).
    assert vc.start == [0, 100000, 110000, 160000, 160000], vc.start
    assert vc.held[3] is None and vc.end[3] == 1160000
    # Backfill proper: one node; A (4 GPUs, 100 s) runs; B (8 GPUs) reserves the node at 100 s;
    # C (4 GPUs, 50 s) fits on A's free half and ends first: it starts now; D (4 GPUs, 200 s)
    # would delay B: it waits.
    jobs = [(0, 2, 100000, 1, 4), (0, 3, 100000, 1, 8), (0, 4, 50000, 1, 4), (0, 5, 200000, 1, 4)]
    vc = pm.VirtualCluster(1, jobs, "fifo-backfill")
    vc.replay()
    assert vc.start == [0, 100000, 0, 200000], vc.start
    vc = pm.VirtualCluster(1, jobs, "fifo")
    vc.replay()
    assert vc.start == [0, 100000, 200000, 200000], vc.start
    # Best fit: two nodes; A (6 GPUs) on node 0; B (1 GPU) goes to node 0 (2 free beats 8), C (2)
    # to node 1, D (1) to node 0's last GPU.
    jobs = [(0, 2, 100000, 1, 6), (0, 3, 100000, 1, 1), (0, 4, 100000, 1, 2), (0, 5, 100000, 1, 1)]
    vc = pm.VirtualCluster(2, jobs, "fifo")
    got = []
    for k, (_, _, _, replicas, per) in enumerate(jobs):
        got.append(vc.find(replicas, per, ()))
        vc.run(k, got[-1], 0)
    assert got == [(0,), (0,), (1,), (0,)], got
    assert vc.find(2, 8, ()) is None and vc.find(1, 6, ()) == (1,) and vc.find(1, 6, {1}) is None
    # A gang wider than its VC never runs, and keeps the cycles coming.
    jobs = [(0, 2, 1000, 3, 8), (5000, 3, 1000, 1, 1)]
    vc = pm.VirtualCluster(2, jobs, "fifo")
    vc.replay()
    assert vc.never == 1 and vc.start == [None, 5000] and vc.cycles == 3, (vc.never, vc.start, vc.cycles)
    print("ok: hand-worked cases")


def check_trace(trace, vcs_path):
    trace_jobs = pm.read_philly_trace(trace)
    vcs = pm.read_vcs(vcs_path)
    for load in (1.0, 4.0):
        t0, _, runs = pm.replay(trace_jobs, vcs, "fifo-backfill", load)
        for name, nodes, vc in runs:
            b = PlainScan(nodes, vc.jobs, "fifo-backfill")
            b.replay()
            assert outcome(vc) == outcome(b), f"load {load}, VC {name}: the scans differ"
        print(f"ok: Philly at load {load:g}, tree scan == plain scan in all {len(runs)} VCs")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace")
    ap.add_argument("--philly-vcs")
    a = ap.parse_args()
    check_hand_worked()
    check_random()
    if a.trace:
        check_trace(a.trace, a.philly_vcs)


if __name__ == "__main__":
    main()
