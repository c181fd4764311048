#!/usr/bin/env python3
"""Runs Slurm batch scripts through a real Slurm 22.05 and through `hangar dev` of the same shape,
with a recording stub in place of the programs they call, and compares what happened.

    tests/slurm/slurm_diff.py HANGAR_BINARY SOURCE_DIR [--sample | SCRIPT...] [--nodes N]
                              [--allow-file FILE] [--keep]

Each side gets N nodes of 8 GPUs, 64 CPUs and 500 GiB (bench/peers/slurm/ for Slurm, a cluster
file for Hangar), both on this machine. A script is copied with one line added after its leading
comment block, `export PATH=STUBS:$PATH`, so that `python`, `torchrun`, `deepspeed`, ... are the
stub: it appends one line per run to a record file -- the program, its arguments, the node (its
index in the job's `scontrol show hostnames`), whether it ran inside a step, and the SLURM_*
values that matter. Site names the two clusters cannot share are overridden on both command
lines (the partition, and output files outside the work folder).

Compared, per script: whether it ran; each job's (array element's) exit status; and the records
as a multiset, so that the number of processes, on how many nodes, which ran once (the batch
step) and which per task, and each SLURM_* value must agree. A difference that is documented
and intended is in ALLOWED (or --allow-file), with its reason; any other fails (exit 1). Prints
one table row per script. Exit 0 only when every difference is allowed.
"""
import argparse
import collections
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

# The sample the ctest runs: single GPU, multi-node srun fan-out, setup run once, an array, a head
# step and worker steps at once then `wait`, exit statuses, a `#!/bin/bash -l` script whose login
# shell resets PATH, a step of a program that is not there.
SAMPLE = [
    "tests/data/slurm-corpus/single-gpu-basic.sbatch",
    "tests/data/slurm-corpus/deepspeed-hostfile.sbatch",
    "tests/data/slurm-corpus/gpus-total-2node.sbatch",
    "tests/data/slurm-corpus/accelerate-multinode-chdir.sbatch",
    "tests/data/slurm-corpus/user-log-dir-array.sbatch",
    "tests/data/slurm-corpus/torchrun-2node-exclusive.sbatch",
    "tests/slurm/scripts/head-and-workers-wait.sbatch",
    "tests/slurm/scripts/exit-status.sbatch",
    "tests/data/slurm-corpus/cpu-multinode-exclusive.sbatch",
    "tests/data/slurm-corpus/lumi-tasks-per-node.sbatch",
]

# What the stub records besides the program and its arguments. "-" is an unset variable.
VARIABLES = [
    "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS", "SLURM_NPROCS",
    "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
    "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NUM_NODES", "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_MAX", "SLURM_CPUS_PER_TASK", "SLURM_JOB_NAME",
]
STUBBED = ["python", "python3", "torchrun", "accelerate", "deepspeed", "ray", "jupyter", "julia",
           "mpirun", "wandb", "nvidia-smi", "conda", "vllm", "train.py"]

# Intended differences: (script file name or "*", recorded field) -> (Slurm's value it applies to,
# or None for any; the reason, as docs/slurm.md states it). A field is a variable above, or one
# of: exit, outcome, processes, node, args.
ALLOWED = {
    # Of the whole corpus (bench/slurm_diff_corpus.sh); docs/slurm.md lists them.
    ("accelerate-fsdp.sbatch", "SLURM_TASKS_PER_NODE"): (None, "no task count: Slurm's batch "
        "step reports the node's allocated CPUs as its tasks; Hangar the one task it runs"),
    ("checkpoint-signal-batch.sbatch", "SLURM_TASKS_PER_NODE"): (None, "as accelerate-fsdp"),
    ("elastic-node-range.sbatch", "args"): (None, "Hangar sets MASTER_ADDR for torchrun itself"),
    ("jupyter-on-gpu.sbatch", "args"): (None, "the script draws a random port"),
    ("hetjob-server-and-clients.sbatch", "exit"): (None, "Slurm accounts each component as a "
        "job of its own (ID+0, ID+1); Hangar runs the components as one job"),
    ("hetjob-server-and-clients.sbatch", "SLURM_CPUS_PER_TASK"): (None, "Slurm leaves "
        "SLURM_CPUS_PER_TASK out of a heterogeneous job's first component's steps; Hangar sets "
        "the component's"),
    ("constraint-choice.sbatch", "outcome"): (None, "a --constraint choice of features is "
        "dropped (warning); the peer Slurm's nodes have no features"),
    ("dependency-after-train.sbatch", "outcome"): (None, "Hangar refuses a dependency on a job "
        "that does not exist; Slurm without accounting accepts it"),
    ("cpu-preprocess-tmp.sbatch", "outcome"): (None, "--tmp has no effect (warning); the peer "
        "Slurm's nodes declare no TmpDisk"),
    ("ntasks-equal-nodes-gpus-per-task.sbatch", "outcome"): (None, "neither runs it (96 CPUs "
        "a task): Slurm keeps it pending, Hangar refuses it at submission"),
    ("topology-switches.sbatch", "outcome"): (None, "as ntasks-equal-nodes-gpus-per-task"),
    ("mpi-style-ntasks.sbatch", "exit"): (None, "the peer Slurm has no PMIx (--mpi=pmix fails); "
        "Hangar's srun accepts --mpi"),
    ("mpi-style-ntasks.sbatch", "processes"): (None, "as its exit"),
    ("megatron-pyxis-2node.sbatch", "exit"): (None, "srun --container-image: no pyxis on the "
        "peer Slurm; Hangar runs the step through podman, which cannot mount /data (not under "
        "containers.mounts_allowed) nor reach nvcr.io here"),
    ("megatron-one-line-directives.sbatch", "exit"): (None, "srun --output is refused by "
        "Hangar's srun"),
    ("megatron-one-line-directives.sbatch", "processes"): (None, "as its exit"),
    ("ray-head-and-workers.sbatch", "processes"): (None, "a race in the script: it ends without "
        "`wait` right after starting its worker step in the background"),
}

STUB = r"""#!/bin/bash
# Recording stub (tests/slurm/slurm_diff.py): one line per run, then exit 0.
node=?; i=0
for n in $(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null); do
  [ "$n" = "${SLURMD_NODENAME:-}" ] && node=$i
  i=$((i + 1))
done
line="prog=${0##*/}	node=$node	step=${SLURM_STEP_ID+yes}	job=${SLURM_JOB_ID:-}	array_job=${SLURM_ARRAY_JOB_ID:-}"
for v in VARIABLES; do line="$line	$v=${!v--}"; done
line="$line	hosts=$(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null | tr '\n' ' ')"
line="$line	args=$*"
printf '%s\n' "$line" >> RECORD
exit 0
"""


def read_text(path):
    with open(path) as f:
        return f.read()


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def prepare(script, work, stubs):
    """Copies SCRIPT into WORK with the stubs put first on PATH after its leading comment block
    (where sbatch stops reading #SBATCH lines, so the directives stay as they were)."""
    lines = read_text(script).splitlines(keepends=True)
    at = 1
    while at < len(lines) and (lines[at].strip() == "" or lines[at].lstrip().startswith("#")):
        at += 1
    lines.insert(at, f'export PATH="{stubs}:$PATH"\n')
    dest = os.path.join(work, os.path.basename(script))
    with open(dest, "w") as f:
        f.write("".join(lines))
    return dest


def make_stubs(folder, record):
    os.makedirs(folder, exist_ok=True)
    text = STUB.replace("VARIABLES", " ".join(VARIABLES)).replace("RECORD", record)
    for name in STUBBED:
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)


def overrides(script, work):
    """Command-line options (which override #SBATCH lines on both sides) for what the two
    clusters cannot share: output files outside the work folder go into it. A relative output
    folder is made, as the user's checkout would have it (both fail alike without it)."""
    extra = []
    for opt, value in directives(script):
        if opt not in ("--output", "-o", "--error", "-e"):
            continue
        long = "--output" if opt in ("--output", "-o") else "--error"
        if value.startswith("/"):
            extra.append(f"{long}=" + os.path.join(work, os.path.basename(value)))
        elif os.path.dirname(value):
            os.makedirs(os.path.join(work, os.path.dirname(value)), exist_ok=True)
    return extra


def directives(script):
    """(option, value) of the #SBATCH lines of the leading comment block."""
    out = []
    for line in read_text(script).splitlines()[1:]:
        if line.strip() and not line.startswith("#"):
            break
        if not line.startswith("#SBATCH"):
            continue
        try:
            words = shlex.split(line[len("#SBATCH"):], comments=True)
        except ValueError:
            continue
        i = 0
        while i < len(words):
            w = words[i]
            if w.startswith("--") and "=" in w:
                out.append(tuple(w.split("=", 1)))
            elif re.fullmatch(r"-[a-zA-Z]", w) and i + 1 < len(words):
                out.append((w, words[i + 1]))
                i += 1
            elif re.fullmatch(r"-[a-zA-Z].+", w):
                out.append((w[:2], w[2:]))
            elif w.startswith("--") and i + 1 < len(words) and not words[i + 1].startswith("-"):
                out.append((w, words[i + 1]))
                i += 1
            i += 1
    return out


class RealSlurm:
    """Debian's Slurm under FOLDER (bench/peers/slurm/), NODES nodes n001..."""

    def __init__(self, source, folder, nodes):
        self.peer = os.path.join(source, "bench/peers/slurm")
        self.folder = folder
        self.env = dict(os.environ, SLURM_NODES=str(nodes),
                        SLURM_CONF=os.path.join(folder, "etc/slurm.conf"))

    def start(self):
        for step in ("configure.sh", "start.sh"):
            r = run([os.path.join(self.peer, step), self.folder], env=self.env)
            if r.returncode != 0:
                raise RuntimeError(f"slurm {step} failed:\n{r.stdout}")

    def stop(self):
        r = run([os.path.join(self.peer, "stop.sh"), self.folder, "--clean"], env=self.env)
        if r.returncode != 0:
            raise RuntimeError(f"slurm stop.sh failed:\n{r.stdout}")

    def submit(self, script, work, extra):
        r = run(["sbatch", "--parsable", "-p", "gpu", *extra, script], cwd=work, env=self.env)
        if r.returncode != 0:
            return None, r.stdout.strip()
        return r.stdout.strip().splitlines()[-1].split(";")[0], ""

    def wait(self, job, timeout):
        """[(state, exit)] of the job's records (each array element's), once none is queued."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            q = run(["squeue", "-h", "-j", job, "-o", "%T %r"], env=self.env)
            if q.returncode == 0 and not q.stdout.strip():
                break
            if "PartitionConfig" in q.stdout or "BadConstraints" in q.stdout:
                return [("PENDING " + q.stdout.split()[1], "")]
            time.sleep(0.2)
        else:
            return [("TIMEOUT", "")]
        s = run(["scontrol", "-o", "show", "job", job], env=self.env).stdout
        rows = []
        for line in s.splitlines():
            st = re.search(r"JobState=(\S+)", line)
            ex = re.search(r" ExitCode=(\S+)", line)
            idx = re.search(r"ArrayTaskId=(\S+)", line)
            if st:
                rows.append((int(idx.group(1)) if idx else 0, st.group(1), ex.group(1)))
        return [(st, ex) for _, st, ex in sorted(rows)]


class HangarDev:
    """`hangar dev` under FOLDER on free ports: NODES nodes node-1... of the same shape."""

    def __init__(self, hangar, folder, nodes):
        self.hangar, self.folder, self.nodes = hangar, folder, nodes
        self.proc = None
        self.port = free_port_pair()
        self.env = dict(os.environ, HANGAR_URL=f"http://127.0.0.1:{self.port}")

    def start(self):
        os.makedirs(self.folder, exist_ok=True)
        cluster = os.path.join(self.folder, "cluster.yaml")
        with open(cluster, "w") as f:
            f.write("name: slurm-diff\n"
                    "node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, "
                    "cpu: 64, memory: 500Gi}\n"
                    "fabric:\n  spines:\n    - name: spine-0\n      leaves:\n"
                    f'        - {{name: leaf-0, nodes: [{{name: "node-[1-{self.nodes}]"}}]}}\n')
        self.log = os.path.join(self.folder, "dev.out")
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                [self.hangar, "dev", "--dir", os.path.join(self.folder, "dev"), "--port",
                 str(self.port), "--cluster", cluster], stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            if "is up" in read_text(self.log):
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("hangar dev did not come up:\n" + read_text(self.log))
        if self.proc.poll() is not None:
            raise RuntimeError("hangar dev exited:\n" + read_text(self.log))
        # Every node ready, as Slurm's start.sh waits for every node idle.
        while time.monotonic() < end:
            r = run([self.hangar, "nodes", "--server", f"127.0.0.1:{self.port}"], env=self.env)
            if r.stdout.count("ready") >= self.nodes:
                return
            time.sleep(0.1)
        raise RuntimeError("hangar dev's nodes did not become ready:\n" + r.stdout)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # stops its controller, agents and their tasks
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def submit(self, script, work, extra):
        r = run([self.hangar, "sbatch", "--parsable", "-p", "default", *extra, script,
                 "--server", f"127.0.0.1:{self.port}"], cwd=work, env=self.env)
        if r.returncode != 0:
            return None, r.stdout.strip()
        return r.stdout.strip().splitlines()[-1], ""

    def wait(self, job, timeout):
        end = time.monotonic() + timeout
        acct = [self.hangar, "slurm", "sacct", "-P", "-n", "-X", "--format=JobID,State,ExitCode",
                "-j", job]
        while time.monotonic() < end:
            r = run(acct, env=self.env)
            rows = [line.split("|") for line in r.stdout.splitlines() if line.count("|") == 2]
            if rows and all(s not in ("PENDING", "RUNNING", "CONFIGURING", "REQUEUED")
                            for _, s, _ in rows):
                key = lambda row: int(row[0].split("_")[1]) if "_" in row[0] else 0
                return [(s, e) for _, s, e in sorted(rows, key=key)]
            time.sleep(0.2)
        return [("TIMEOUT", "")]


def free_port_pair():
    import socket
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        with socket.socket() as t:
            try:
                t.bind(("127.0.0.1", p + 1))
                return p
            except OSError:
                continue
    raise RuntimeError("no two free consecutive ports on 127.0.0.1")


# A record's arguments before job ids became JOBID: a number an argument shares with the other
# side's job id by chance (`multiply.py 7 10` in Hangar's job 10) is not a difference.
RAW_ARGS = {}


def read_records(path, work):
    """The stub's lines as comparable tuples: job-specific names (host names, job ids, the work
    folder) become positions, so that Slurm's n001 and Hangar's node-1 compare equal."""
    out = []
    if not os.path.exists(path):
        return out
    for line in read_text(path).splitlines():
        rec = dict(kv.split("=", 1) for kv in line.split("\t") if "=" in kv)
        args = rec.pop("args", "").replace(work, "WORK")
        raw = args
        hosts = rec.pop("hosts", "").split()
        for i, h in enumerate(hosts):
            args = re.sub(r"\b%s\b" % re.escape(h), f"NODE{i}", args)
        for key in ("array_job", "job"):
            if rec.get(key):
                args = re.sub(r"\b%s\b" % re.escape(rec[key]), "JOBID", args)
        rec.pop("job", None)
        rec.pop("array_job", None)
        rec["args"] = args
        RAW_ARGS[tuple(sorted(rec.items()))] = raw
        rec["nodes_in_job"] = str(len(hosts))
        out.append(tuple(sorted(rec.items())))
    return out


def summary(records):
    """processes, distinct (job, node) pairs, and runs outside any step (the batch step)."""
    procs = len(records)
    batch = sum(1 for r in records if dict(r).get("step") == "")
    nodes = len({(dict(r).get("SLURM_ARRAY_TASK_ID"), dict(r).get("node")) for r in records})
    return procs, nodes, batch


def differences(name, slurm, hangar, allowed):
    """(unexplained, explained) lists of sentences."""
    bad, ok = [], []

    def note(field, text, slurm_value=None):
        rule = allowed.get((name, field)) or allowed.get(("*", field))
        reason = rule and (rule[0] is None or rule[0] == slurm_value) and rule[1]
        (ok if reason else bad).append(text + (" [allowed]" if reason else ""))

    if slurm["outcome"] != hangar["outcome"]:
        note("outcome", f"outcome: Slurm {slurm['outcome']!r}, Hangar {hangar['outcome']!r}")
        return bad, ok
    if slurm["exit"] != hangar["exit"]:
        note("exit", f"exit: Slurm {slurm['exit']}, Hangar {hangar['exit']}")
    only_s = collections.Counter(slurm["records"]) - collections.Counter(hangar["records"])
    only_h = collections.Counter(hangar["records"]) - collections.Counter(slurm["records"])
    # Pair each Slurm-only record with the Hangar-only one closest to it, and name the fields
    # that differ; an unpaired one is a process that ran on one side only.
    hs = list(only_h.elements())
    for s in only_s.elements():
        sd = dict(s)
        best = min(hs, key=lambda h: sum(dict(h).get(k) != v for k, v in sd.items()), default=None)
        if best is None:
            note("processes", f"only Slurm ran: {fmt(sd)}")
            continue
        hs.remove(best)
        hd = dict(best)
        for k in sorted(set(sd) | set(hd)):
            if k == "args" and RAW_ARGS.get(s) == RAW_ARGS.get(best):
                continue
            if sd.get(k) != hd.get(k):
                note(k, f"{k}: Slurm {sd.get(k)!r}, Hangar {hd.get(k)!r} ({sd.get('prog')} "
                        f"{'step' if sd.get('step') else 'batch'} rank {sd.get('SLURM_PROCID')})",
                     sd.get(k))
    for h in hs:
        note("processes", f"only Hangar ran: {fmt(dict(h))}")
    return bad, ok


def fmt(rec):
    keys = ("prog", "node", "step", "SLURM_PROCID", "SLURM_NTASKS", "args")
    return " ".join(f"{k}={rec.get(k)}" for k in keys)


def run_one(side, label, script, root, stubs_root, timeout):
    name = os.path.basename(script)
    work = os.path.join(root, label, name)
    os.makedirs(work, exist_ok=True)
    record = os.path.join(work, "record.txt")
    stubs = os.path.join(stubs_root, label, name)
    make_stubs(stubs, record)
    copy = prepare(script, work, stubs)
    job, refusal = side.submit(copy, work, overrides(script, work))
    if job is None:
        first = refusal.splitlines()[-1] if refusal else ""
        return {"outcome": "refused", "why": first, "exit": [], "records": [], "job": None}
    states = side.wait(job, timeout)
    outcome = "ran" if all(s[0] not in ("TIMEOUT",) and not s[0].startswith("PENDING")
                           for s in states) else "never ran"
    return {"outcome": outcome, "why": " ".join(s for s, _ in states),
            "exit": [e for _, e in states], "states": [s for s, _ in states],
            "records": read_records(record, work), "job": job}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("hangar")
    ap.add_argument("source")
    ap.add_argument("scripts", nargs="*")
    ap.add_argument("--sample", action="store_true", help="the sample the ctest runs")
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=60, help="seconds a job may take")
    ap.add_argument("--allow-file", help="more allowed differences: SCRIPT<TAB>FIELD<TAB>REASON")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    a = ap.parse_intermixed_args()
    scripts = [os.path.join(a.source, s) for s in SAMPLE] if a.sample else a.scripts
    if not scripts:
        ap.error("name scripts, or --sample")
    allowed = dict(ALLOWED)
    if a.allow_file:
        for line in read_text(a.allow_file).splitlines():
            if line.strip() and not line.startswith("#"):
                s, f, reason = line.rstrip("\n").split("\t", 2)
                allowed[(s, f)] = (None, reason)
    root = tempfile.mkdtemp(prefix="slurm_diff.")
    # Stubs live under a short path: Slurm's and Hangar's PATH are the same length either way.
    stubs_root = os.path.join(root, "stubs")
    slurm = RealSlurm(a.source, os.path.join(root, "slurm"), a.nodes)
    hangar = HangarDev(os.path.abspath(a.hangar), os.path.join(root, "hangar"), a.nodes)
    failed = 0
    t0 = time.monotonic()
    try:
        starts = [threading.Thread(target=x.start) for x in (slurm, hangar)]
        errors = []
        for t, x in zip(starts, (slurm, hangar)):
            t.run = (lambda x=x, f=t.run: _catch(errors, x.start))
            t.start()
        for t in starts:
            t.join()
        if errors:
            raise errors[0]
        print(f"# {len(scripts)} scripts, {a.nodes} nodes x 8 GPUs each side; up in "
              f"{time.monotonic() - t0:.0f} s ({root})")
        print("| script | Slurm 22.05: procs / nodes / batch / exit | Hangar | verdict |")
        print("|---|---|---|---|")
        for script in scripts:
            results = {}
            ts = [threading.Thread(target=lambda side=side, label=label: results.__setitem__(
                label, run_one(side, label, script, root, stubs_root, a.timeout)))
                for side, label in ((slurm, "slurm"), (hangar, "hangar"))]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            s, h = results["slurm"], results["hangar"]
            bad, ok = differences(os.path.basename(script), s, h, allowed)
            failed += bool(bad)
            verdict = "same" if not bad and not ok else ("allowed" if not bad else "DIFFERENT")
            print(f"| {os.path.basename(script)} | {cell(s)} | {cell(h)} | {verdict} |")
            for text in dict.fromkeys(bad + ok):
                print(f"#   {text}")
            sys.stdout.flush()
    finally:
        hangar.stop()
        slurm.stop()
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"# {len(scripts) - failed} of {len(scripts)} scripts agree (allowed differences "
          f"included); {time.monotonic() - t0:.0f} s in all")
    return 1 if failed else 0


def _catch(errors, fn):
    try:
        fn()
    except Exception as e:  # reported by the caller, after both have started or failed
        errors.append(e)


def cell(r):
    if r["outcome"] != "ran":
        return f"{r['outcome']}: {r['why'][:80]}"
    procs, nodes, batch = summary(r["records"])
    exits = collections.Counter(r["exit"])
    shown = ",".join(e if n == 1 else f"{e}×{n}" for e, n in sorted(exits.items()))
    return f"{procs} / {nodes} / {batch} / {shown}"


if __name__ == "__main__":
    sys.exit(main())
