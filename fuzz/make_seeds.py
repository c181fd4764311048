#!/usr/bin/env python3
"""Writes the seed inputs of every fuzz target into fuzz/corpus/<target>/seed-* from the repo's own
examples, test data and docs (run from the checkout's root; protoc encodes the protobuf seeds).
The committed corpus is these seeds plus what `scripts/fuzz.sh --merge` added."""
import glob, json, os, re, subprocess, sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(root)

def put(target, name, data):
    d = f"fuzz/corpus/{target}"
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(f"{d}/seed-{name}", "wb") as f:
        f.write(data)

def read(path):
    with open(path, "rb") as f:
        return f.read()

def head(path, lines):
    return b"".join(read(path).splitlines(keepends=True)[:lines])

# Job specs: the examples and the scenarios' job lists (YAML), and their JSON form for the API.
jobs = sorted(glob.glob("examples/jobs/*.yaml") + glob.glob("examples/mig/*.yaml") +
              glob.glob("examples/containers/*.yaml"))
for p in jobs:
    put("job_spec_yaml", os.path.basename(p), read(p))
put("job_spec_yaml", "array-after", "name: sweep\narray: 0-9:2%3\nafter: {ok: [1, 2]}\n"
    "tasks: [{gpus: 1, command: [python, train.py], env: {A: b}}]\n")
put("job_spec_json", "job", json.dumps({"name": "train", "queue": "default", "priority": 5,
    "tasks": [{"name": "w", "replicas": 2, "gpus": 8, "command": ["torchrun", "x.py"], "env": {"K": "v"}}],
    "topology": {"max_leaves": 1}, "array": "0-3", "after": {"ok": [1]}}))
put("job_spec_json", "runas", json.dumps({"name": "r", "run_as": {"uid": 1000, "gid": 1000, "groups": [5]},
    "tasks": [{"gpus": 0.5, "command": ["x"], "workdir": "/home/ada"}], "time_limit": "1h"}))
put("job_spec_json", "array-text", "0-49:2%8")
put("job_spec_json", "deps-text", "afterok:1:2,afterany:3")

# cluster.yaml: every example cluster and the scenarios' clusters.
for p in sorted(glob.glob("examples/clusters/*.yaml") + glob.glob("tests/scenarios/*/cluster.yaml")):
    name = p.replace("/", "_")
    data = read(p)
    if len(data) < 16384:
        put("cluster_yaml", name, data)

# queues.yaml: the docs' example and the scenarios' queue trees.
doc = read("docs/queues.md").decode()
for i, block in enumerate(re.findall(r"```yaml\n(.*?)```", doc, re.S)):
    if "queues:" in block:
        put("queues", f"doc-{i}", block)
for p in sorted(glob.glob("tests/scenarios/*/jobs.yaml")):
    text = read(p).decode()
    if "queues:" in text:
        put("queues", p.split("/")[2], text)

# sbatch scripts: the examples, one with command-line words.
for p in sorted(glob.glob("examples/slurm/*.sbatch")):
    put("sbatch", os.path.basename(p), read(p))
put("sbatch", "args", "ARGS --array=0-3%2 -J sweep --time=1-02:00:00 --gpus-per-node=a100:4\n"
    "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n#SBATCH --output=%x-%A_%a.out\n"
    "#SBATCH --dependency=afterok:1:2\n#SBATCH --signal=B:USR1@90\n#SBATCH --mem=64G\nsrun python x.py\n")

# Host lists: node ranges and plain names, one per line.
put("hostlist", "ranges", "gpu-[00-15]\nnode7\n10.77.0.[11-26]\nrack[1-3]-n\n")
put("hostlist", "one", "gpu-a\n")

# Traces: the first byte picks the reader (fuzz/trace_fuzz.cc).
hangar = ("submit,duration,replicas,gpus_per_replica,milli_gpu,gpu_models,cpu,memory,queue,priority,tier,time_limit\n"
          "# a comment\n0,3600,2,8,1000,H100|H200,32,256Gi,research,10,guaranteed,7200\n"
          "2017-10-09 07:01:55,60.5,1,1,250,,2,8Gi,,0,opportunistic,\n")
put("trace", "hangar", b"\x00" + hangar.encode())
put("trace", "philly", b"\x01" + b"timestamp,duration,num_gpus,gpu_time,cluster\n"
    b"2017-10-09 07:01:55,66.0,1,66.0,11cb48\n2017-10-03 01:00:00,100.0,16,1600.0,6214e9\n")
put("trace", "partitions", b"\x02vc,node num\na,64\nb,8\n")
pods = head("data/traces/openb/openb_pod_list_default.csv", 12)
put("trace", "openb-replay", b"\x03" + pods)
put("trace", "openb-pods", b"\x04" + head("data/traces/openb/openb_pod_list_gpushare40.csv", 12))
put("trace", "openb-nodes", b"\x05" + head("data/traces/openb/openb_node_list_gpu_node.csv", 12))
put("trace", "seeds", b"\x0642-51")

# REST bodies and query strings.
for i, body in enumerate(['{"reason": "bad fan"}', '{"count": 3, "name": "x", "run_as": {"account": "ada"}}',
                          '{"after": {"ok": [1, 2], "any": [3]}, "priority": -5}', '', '[[[[1]]]]']):
    put("rest_body", str(i), body)
for i, q in enumerate(["state=pending&limit=50&cursor=1234&user=ada&queue=research",
                       "since=12h&until=2026-12-01T09:00:00Z&array=7", "follow=1&stream=stderr&attempt=2",
                       "name=a%20b+c&count=10&by=user&since=1733000000000"]):
    put("rest_query", str(i), q)

# Protobuf messages, encoded from text by protoc.
def encode(message, text):
    return subprocess.run(["protoc", "--proto_path=proto", f"--encode=hangar.agent.v1.{message}",
                           "proto/agent.proto"], input=text.encode(), capture_output=True, check=True).stdout

agent_msgs = {
    "register": 'register { inventory { node: "a" address: "127.0.0.1" gpus { index: 0 model: "H100-SXM-80GB" '
                'memory_mib: 81920 } } running { task_id: "1.0.0" } }',
    "heartbeat": 'heartbeat { seq: 1 time_ms: 4 gpus { index: 0 util_pct: 97 temperature_c: 60 ecc_dbe_volatile: 1 } }',
    "task-exit": 'task_status { task_id: "1.0.0" state: EXITED exit_code: 1 }',
    "task-running": 'task_status { task_id: "1.0.1" state: RUNNING }',
    "gpu-event": 'gpu_event { index: 3 kind: "xid" code: 79 }',
    "checkpoint": 'checkpoint_done { task_id: "1.0.0" step: 100 path: "/ckpt/100" }',
    "validation": 'validation { json: "{\\"gpus\\": []}" ok: true }',
    "mig": 'mig_reshaped { id: 1 gpu_index: 0 ok: true layout { start: 0 memory_slices: 4 compute_slices: 3 '
           'profile: "3g.40gb" } }',
    "stage": 'stage_result { job_id: 2 image: "reg/x@sha256:00" ok: true bytes: 100 }',
    "images": 'images { images { digest: "sha256:00" names: "reg/x:1" bytes: 5 } budget_bytes: 10 }',
}
for name, text in agent_msgs.items():
    try:
        data = encode("AgentMessage", text)
    except subprocess.CalledProcessError as e:
        sys.exit(f"{name}: {e.stderr.decode()}")
    for node in (0, 1):
        put("agent_message", f"{name}-{node}", bytes([node]) + data)

controller_msgs = {
    "launch": 'launch { task_id: "1.0.0" job_id: 1 argv: "sleep" argv: "1" gpu_indices: 0 '
              'mig_instances { gpu_index: 0 start: 0 memory_slices: 4 profile: "3g.40gb" } '
              'run_as { uid: 1000 gid: 1000 groups: 5 } container { image: "r/x@sha256:00" mounts { host: "/data" path: "/d" } } }',
    "launch-account": 'launch { task_id: "2.0.0" run_as { account: "nobody" } }',
    "reshape": 'mig_reshape { id: 7 gpu_index: 1 create { profile: "3g.40gb" start: 0 } '
               'create { profile: "4g.40gb" start: 4 } }',
    "registered": 'registered { heartbeat_interval_ms: 1000 stop_tasks: "9.0.0" }',
    "stop": 'stop { task_id: "1.0.0" grace_ms: 1000 checkpoint_signal: 10 } epoch: 3 store_id: "s"',
}
for name, text in controller_msgs.items():
    try:
        put("controller_message", name, encode("ControllerMessage", text))
    except subprocess.CalledProcessError as e:
        sys.exit(f"{name}: {e.stderr.decode()}")
