The documents' examples, taken from the documents as they stand (doc_block FILE N is the Nth
fenced block of FILE), on `hangar dev`'s default cluster.

  $ . "$TESTDIR/journey.sh"
  $ cp -r "$HANGAR_SRC/examples" .
  $ dev_start

docs/queues.md: the example queue tree applied as it is; `default` stays, so the shipped examples
still run; `hangar queues` and `hangar share` in people's units.

  $ doc_block docs/queues.md 1 > queues.yaml
  $ hangar apply -f queues.yaml
  queues applied: created adhoc, nlp, ops, research, vision; changed none; removed none
  $ hangar queues
  QUEUE     GUARANTEE                       BORROW LIMIT  LEND LIMIT  WEIGHT  IDLE POLICY                      USERS
  research  -                               0 GPUs        -           1       -                                -
    vision  16 GPUs, 256 cores, 2Ti memory  32 GPUs       -           2       <5% for 30m: checkpoint-requeue  alice,bob
    nlp     8 H100-SXM-80GB                 -             -           1       -                                -
  adhoc     -                               -             -           1       -                                -
  ops       -                               -             -           1       -                                ops
  default   -                               -             -           1       -                                -
  $ hangar submit examples/jobs/notebook.yaml
  submitted job 1 (notebook-alice)
  $ wait_job 1 running
  $ hangar share
  QUEUE     WEIGHT  GUARANTEE             IN USE  BORROWED  LENT  SHARE  RECENT  PENDING  HEAD JOB WAITS BECAUSE
  research  1       16 + 8 H100-SXM-80GB  0       0         0     0.0%   0.0%    0        -
    vision  2       16                    0       0         0     0.0%   0.0%    0        -
    nlp     1       8 H100-SXM-80GB       0       0         0     0.0%   0.0%    0        -
  adhoc     1       0                     0       0         0     0.0%   0.0%    0        -
  ops       1       0                     0       0         0     0.0%   0.0%    0        -
  default   1       0                     1       1         0     3.1%   3.1%    0        -
  GPUs are whole GPUs; SHARE is the dominant share of the cluster over the weight, RECENT the same over usage remembered with a 1800 s half-life.

IDLE (WASTE) is 0, or 0.0 when the notebook's GPU was counted idle for a moment (a slow machine):
a CI run saw that.

  $ hangar usage
  GPU-hours over the last 7d
  QUEUE    GPU-HOURS  GUARANTEED  OPPORTUNISTIC  IDLE (WASTE)  LOST TO PREEMPTION  JOBS
  default  0\.0        0           0\.0            0(\.0)? +0                   1 (re)
  total    0\.0                                   0(\.0)? +0 (re)

docs/job-format.md: its gang of 4 x 8 GPUs in one leaf is refused by the default cluster, whose
leaves have 16 GPUs, with a sentence that says so; the errors for a bad spec, as the document
lists them.

  $ doc_block docs/job-format.md 8 > pretrain.yaml
  $ hangar submit pretrain.yaml
  error: job 'pretrain-70b' can never run on this cluster: needs 32 GPUs under one leaf; the largest leaf has 16; change the request and submit it again
  [1]
  $ printf 'name: x\ntasks:\n  - name: main\n    gpus: -1\n    cpu_per_gpus: 2\n    command: [x]\n' > job.yaml
  $ hangar submit job.yaml
  error: job.yaml:5: unknown field 'cpu_per_gpus' in a task group (did you mean 'cpu_per_gpu'?); the fields are: name, replicas, gpus, gpu_fraction, gpu_memory, mig, gpu_models, min_gpu_memory, cpu_per_gpu, memory_per_gpu, cpu, memory, node_selector, command, env, workdir, image, mounts, shm_size, artifacts, max_per_node
  [1]
  $ printf 'name: x\ntasks:\n  - name: main\n    gpus: 9\n    command: [x]\n' > job.yaml
  $ hangar submit job.yaml
  error: job 'x' can never run on this cluster: asks 9 GPUs per replica, largest node has 8; change the request and submit it again
  [1]

docs/sharing.md: the fractional service runs on half a GPU; its `python3 serve.py` is the user's
file beside the job file (the job's working directory).

  $ doc_block docs/sharing.md 1 > embeddings.yaml
  $ echo 'import os; print("serving on GPU", os.environ["CUDA_VISIBLE_DEVICES"], "with", os.environ["HANGAR_GPU_FRACTION"])' > serve.py
  $ hangar submit embeddings.yaml
  submitted job 2 (embeddings)
  $ wait_job 2 succeeded
  $ hangar logs 2
  serving on GPU GPU-fake-node-?-? with 0.5 (glob)

docs/health.md: an Xid 79 injected on node-3 while it runs: the node drains, is quarantined, and
`hangar undrain` points to `hangar remediate`.

  $ doc_block docs/health.md 6 | bash > /dev/null
  $ wait_for 20 'hangar node node-3 | grep -q quarantined'
  $ hangar node node-3 | head -3
  node node-3  quarantined (Xid 79 on GPU 3 (GPU fell off the bus))
    fabric: leaf leaf-1, spine spine-0
    gpus:   8 x H100-SXM-80GB, 8 free
  $ hangar node node-3 | grep "condition:"
    condition: fatal xid_79 (GPU 3): Xid 79 on GPU 3 (GPU fell off the bus); action: drain_node_and_reboot
  $ hangar undrain node-3
  error: node 'node-3' is not drained by an operator: quarantined for Xid 79 on GPU 3 (GPU fell off the bus); undrain does not clear a health finding: fix it, then record the fix with `hangar remediate node-3 --remedy reboot (or repair)`, and validation returns the node to service
  [1]
  $ hangar remediate node-3 --remedy reboot --note "journey: rebooted"
  node node-3: reboot recorded; it takes work again once it passes validation
  $ wait_for 20 'hangar nodes | grep -q "node-3  ready"'

docs/job-format.md's dependencies, its transcript run as written (37 array elements first, so that
prep is job 40 as there; each job runs 3 s, so that train has not ended when alert names it),
and its errors as the API gives them too:

  $ printf 'name: filler\ntasks:\n  - {name: main, gpus: 1, command: [true]}\n' > filler.yaml
  $ hangar submit --array 0-36 filler.yaml
  submitted array 3 (filler): jobs 3-39, 37 elements
  $ for n in prep train alert; do printf "name: $n\ntasks:\n  - {name: main, gpus: 1, command: [sleep, '3']}\n" > $n.yaml; done
  $ doc_run docs/job-format.md 3
  [doc] $ hangar submit prep.yaml
  submitted job 40 (prep)
  [doc] $ hangar submit --after ok:40 train.yaml
  submitted job 41 (train)
  [doc] $ hangar submit --after notok:41 alert.yaml
  submitted job 42 (alert)
  $ wait_job 42 cancelled && hangar explain 42
  job 42 (alert) is cancelled: dependency can never be met: job 41 succeeded, so after.notok can never be met
  $ printf 'name: x\ntasks:\n  - {gpus: -1, command: [x]}\n' > job.yaml
  $ hangar submit job.yaml
  error: job.yaml:3: 'gpus' must be between 0 and 64, not -1
  [1]
  $ curl -s -X POST -H "Authorization: Bearer $(cat hangar-dev/dev-token)" -H 'Content-Type: application/json' -d '{"name": "x", "tasks": [{"gpus": 9, "command": ["x"]}]}' $HANGAR_URL/v1/jobs; echo
  {"error":{"code":"OUT_OF_RANGE","message":"job 'x' can never run on this cluster: asks 9 GPUs per replica, largest node has 8; change the request and submit it again"}}
  

docs/health.md's fault script is one the fake backend takes as it is (a typo is named):

  $ doc_block docs/health.md 5 > faults.yaml
  $ hangar gpu-check --faults faults.yaml | head -1
  backend fake, driver fake-570.00, CUDA 13.0, 8 GPUs
  $ sed 's/kind: xid,/kind: xidd,/' faults.yaml > typo.yaml; hangar gpu-check --faults typo.yaml
  hangar gpu-check: typo.yaml:2: unknown fault kind 'xidd'; the kinds are: xid, thermal_throttle, pcie_downgrade, ecc_sbe, ecc_dbe, nvlink_down, fall_off_bus, slow
  [2]

docs/operations.md: the cluster's CA and certificates, in a directory of the journey's own
instead of /etc/hangar/tls.

  $ doc_block docs/operations.md 4 | grep '^hangar certs' | sed "s|/etc/hangar/tls|$PWD/tls|; s|cluster.yaml|examples/clusters/dev-4x8.yaml|" | bash | sed "s|$PWD|.|g"
  made the CA: ./tls/ca.crt (share it) and ./tls/ca.key (keep it secret; it issues certificates)
  issued ./tls/controller.crt and ./tls/controller.key
  issued ./tls/node-gpu-001.crt and ./tls/node-gpu-001.key
  issued 4 node certificates in ./tls (node-NAME.crt and .key for each node of examples/clusters/dev-4x8.yaml)
  $ ls tls | sort
  ca.crt
  ca.key
  controller.crt
  controller.key
  node-gpu-001.crt
  node-gpu-001.key
  node-node-1.crt
  node-node-1.key
  node-node-2.crt
  node-node-2.key
  node-node-3.crt
  node-node-3.key
  node-node-4.crt
  node-node-4.key
  $ cleanup
