A job's life at the terminal, on `hangar dev`'s default cluster (node-1 ... node-4, 8 GPUs each):
submit, watch, logs, explain, events, hold and release, cancel; a time limit; a checkpoint taken
when the job is requeued off a drained node, and the resume from the saved step on another node.

  $ . "$TESTDIR/journey.sh"
  $ dev_start
  $ cat > hello.yaml <<'YAML'
  > name: hello
  > tasks:
  >   - name: main
  >     gpus: 1
  >     command: ["/bin/sh", "-c", "echo hello from $HANGAR_JOB_ID on GPU $CUDA_VISIBLE_DEVICES; echo to stderr >&2"]
  > YAML
  $ hangar submit hello.yaml
  submitted job 1 (hello)
  $ hangar logs -f 1
  hello from 1 on GPU 0
  $ hangar logs 1 --stderr
  to stderr
  $ wait_job 1 succeeded
  $ hangar jobs
  ID  NAME   ARRAY  QUEUE    USER       STATE      GPUS  TASKS  AGE +REASON (re)
  1   hello  -      default  anonymous  succeeded  1     1 *ago *all 1 tasks exited 0 (glob)
  $ hangar explain 1
  job 1 (hello) is succeeded: all 1 tasks exited 0
  $ hangar events job/1
  TIME                  SUBJECT  EVENT
  ????-??-??T??:??:??Z  job/1    succeeded (glob)
  ????-??-??T??:??:??Z  job/1    running (1 tasks) (glob)
  ????-??-??T??:??:??Z  job/1    placed (attempt 0) on node-1, locality nvlink_domain (glob)
  ????-??-??T??:??:??Z  job/1    submitted 'hello' to queue default (glob)

A job held before it starts waits until released; cancelling takes ids or a selector.

  $ cat > big.yaml <<'YAML'
  > name: big
  > tasks:
  >   - {name: main, replicas: 4, gpus: 8, command: ["/bin/sh", "-c", "echo started; sleep 300"]}
  > YAML
  $ hangar submit big.yaml
  submitted job 2 (big)
  $ wait_job 2 running
  $ hangar submit hello.yaml && hangar hold 3
  submitted job 3 (hello)
  job 3 held
  $ hangar jobs --state held
  ID  NAME   ARRAY  QUEUE    USER       STATE  GPUS  TASKS  AGE      REASON
  3   hello  -      default  anonymous  held   1     1 *ago *held by anonymous: `hangar release 3` lets it start (glob)
  $ hangar explain 3
  job 3 (hello) is pending: held by anonymous: `hangar release 3` lets it start
  $ hangar release 3
  job 3 released
  $ hangar explain 3
  job 3 (hello) is pending: needs 1 free GPU on one node; the emptiest node has 0  [rule: node-gpus]
  $ hangar cancel --name big
  cancel: 1 matched, 1 changed, 0 already so
  $ wait_job 2 cancelled && wait_job 3 succeeded

A time limit: at the limit the checkpoint signal, the grace, then the kill; the job ends timed_out.

  $ cat > limited.yaml <<'YAML'
  > name: limited
  > time_limit: 3s
  > checkpoint: {signal: SIGUSR1, grace: 2s}
  > tasks:
  >   - name: main
  >     gpus: 1
  >     command: ["/bin/sh", "-c", "trap 'echo got USR1; exit 0' USR1; while :; do sleep 0.1; done"]
  > YAML
  $ hangar submit limited.yaml
  submitted job 4 (limited)
  $ wait_job 4 timed_out 30
  $ hangar job 4 -o json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["message"])'
  time limit 3s reached: sent SIGUSR1, then SIGTERM after at most 2s and SIGKILL 10s later
  $ hangar logs 4
  got USR1

A checkpoint that survives a move: the job counts steps and saves the count on SIGUSR1 in
$HANGAR_CHECKPOINT_DIR; its node is drained and the job requeued; it resumes from the saved
step on another node.

  $ cat > counter.yaml <<'YAML'
  > name: counter
  > checkpoint: {signal: SIGUSR1, grace: 20s}
  > tasks:
  >   - name: main
  >     gpus: 8
  >     command:
  >       - /bin/sh
  >       - -c
  >       - |
  >         step=0
  >         [ -f "$HANGAR_CHECKPOINT_DIR/step" ] && step=$(cat "$HANGAR_CHECKPOINT_DIR/step")
  >         echo "attempt $HANGAR_RESTART_COUNT starts at step $step on $HANGAR_NODE"
  >         trap 'echo $step > "$HANGAR_CHECKPOINT_DIR/step" && hangar checkpoint-done --step $step && exit 0' USR1
  >         while [ $step -lt 1000000 ]; do step=$((step + 1)); sleep 0.05; done
  > YAML
  $ hangar submit counter.yaml
  submitted job 5 (counter)
  $ wait_job 5 running
  $ node=$(hangar job 5 -o json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["task_list"][0]["node"])')
  $ sleep 1; hangar drain $node --reason "journey: moving the counter off"
  node node-1 drained: no new work will be placed on it, and its running jobs are requeued with their checkpoint signal
  $ wait_for 30 '[ "$(job_state 5)" = running ] && hangar job 5 | grep -q "1 restart)"'
  $ hangar logs 5 --attempt 0 | head -1 | sed "s/on $node/on the first node/"
  attempt 0 starts at step 0 on the first node
  $ saved=$(cat hangar-dev/checkpoints/job-5/step); wait_for 10 'hangar logs 5 | grep -q starts'
  $ hangar logs 5 | head -1 | sed "s/at step $saved /at the saved step /; s/on $node\$/on the drained node/; s/on node-[0-9]\$/on another node/"
  attempt 1 starts at the saved step on another node
  $ hangar events job/5 --limit 20 | grep -c "checkpoint written"
  1

Requeued by hand, it checkpoints again and resumes again; the drained node is given back.

  $ hangar requeue 5
  job 5 requeued
  $ wait_for 30 '[ "$(job_state 5)" = running ] && hangar job 5 | grep -q "2 restarts)"'
  $ hangar logs 5 | head -1 | sed "s/at step [1-9][0-9]* /at a later step /; s/on node-[0-9]/on a node/"
  attempt 2 starts at a later step on a node
  $ hangar cancel 5 && hangar undrain $node
  job 5 cancelled
  node node-1 undrained
  $ wait_job 5 cancelled
  $ wait_idle
  $ hangar nodes
  NAME    STATE  LEAF    MODEL          GPUS  FREE  CPU FREE  MEM FREE  JOBS  REASON
  node-1  ready  leaf-0  H100-SXM-80GB  8     8     64        512Gi     0
  node-2  ready  leaf-0  H100-SXM-80GB  8     8     64        512Gi     0
  node-3  ready  leaf-1  H100-SXM-80GB  8     8     64        512Gi     0
  node-4  ready  leaf-1  H100-SXM-80GB  8     8     64        512Gi     0
  $ hangar history -o json | /usr/bin/python3 -c 'import json,sys; h=json.load(sys.stdin); print(sorted((j["id"], j["state"], j["attempts"]) for j in h["jobs"]))'
  [(1, 'succeeded', 1), (2, 'cancelled', 1), (3, 'succeeded', 1), (4, 'timed_out', 1), (5, 'cancelled', 3)]
  $ cleanup
