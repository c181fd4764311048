The first run, as README says: `hangar dev` with the shipped examples, every one placed and
finished, Ctrl-C stops every task within 3 s, and an immediate restart works and keeps the logs.

  $ . "$TESTDIR/journey.sh"
  $ cp -r "$HANGAR_SRC/examples" .
  $ dev_start --submit-examples examples/jobs --exit-when-done
  $ grep -o "Hangar dev cluster .* is up: [0-9]* nodes, [0-9]* GPUs" dev-1.out
  Hangar dev cluster 'dev' is up: 4 nodes, 32 GPUs
  $ dev_wait_exit 120
  hangar dev exited with 0
  $ grep "^submitted" dev-1.out
  submitted finetune-8gpu.yaml as job 1
  submitted inference-fractional.yaml as job 2
  submitted notebook.yaml as job 3
  submitted pretrain-4x8.yaml as job 4
  submitted sweep-array.yaml as job 5
  $ grep -o "placed (attempt [0-9]*" dev-1.out | awk '$3 > 1 {n++} END {print n + 0, "jobs placed more than twice"}'
  0 jobs placed more than twice

Restarted on the same directory: the store is restored, the jobs are all there, and all succeeded.

  $ dev_start
  $ hangar nodes
  NAME    STATE  LEAF    MODEL          GPUS  FREE  CPU FREE  MEM FREE  JOBS  REASON
  node-1  ready  leaf-0  H100-SXM-80GB  8     8     64        512Gi     0
  node-2  ready  leaf-0  H100-SXM-80GB  8     8     64        512Gi     0
  node-3  ready  leaf-1  H100-SXM-80GB  8     8     64        512Gi     0
  node-4  ready  leaf-1  H100-SXM-80GB  8     8     64        512Gi     0
  $ hangar jobs -o json | /usr/bin/python3 -c 'import json,sys; print(sorted((j["name"], j["state"]) for j in json.load(sys.stdin)["jobs"]))'
  [('embed-service', 'succeeded'), ('finetune-llama-8b', 'succeeded'), ('lr-sweep', 'succeeded'), ('lr-sweep', 'succeeded'), ('lr-sweep', 'succeeded'), ('lr-sweep', 'succeeded'), ('lr-sweep', 'succeeded'), ('lr-sweep', 'succeeded'), ('lr-sweep', 'succeeded'), ('lr-sweep', 'succeeded'), ('notebook-alice', 'succeeded'), ('pretrain-70b', 'succeeded')]
  $ ls hangar-dev/logs/ | sort
  agent-node-1.log
  agent-node-1.log.1
  agent-node-2.log
  agent-node-2.log.1
  agent-node-3.log
  agent-node-3.log.1
  agent-node-4.log
  agent-node-4.log.1
  controller.log
  controller.log.1
  haproxy.log
  $ hangar submit examples/jobs/notebook.yaml
  submitted job 13 (notebook-alice)
  $ wait_job 13 running

Ctrl-C: the notebook's task stops with everything else, within 3 s.

  $ start=$(date +%s.%N); dev_stop; end=$(date +%s.%N)
  $ /usr/bin/python3 -c "print('stopped in under 3 s' if $end - $start < 3 else 'took %.1f s' % ($end - $start))"
  stopped in under 3 s
  $ left_running

An immediate restart is not refused (the port's TIME_WAIT sockets do not count), and the notebook
that Ctrl-C stopped runs again: it did not fail, its node's agent was stopped.

  $ dev_start
  $ wait_job 13 running
  $ hangar job 13 | head -3
  job 13  notebook-alice
    state:    running (attempt 1, 1 restart)
    queue:    default  tier opportunistic  priority 0
  $ cleanup
