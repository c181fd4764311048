An idle notebook (docs/queues.md, "idle"): while nobody waits for its GPU it keeps running, however
idle (its kernel is not killed for nothing); once a job waits for that GPU, the notebook is
checkpointed and requeued and the job starts.

  $ . "$TESTDIR/journey.sh"
  $ dev_start
  $ cat > queues.yaml <<'YAML'
  > queues:
  >   - name: notebooks
  >     idle: {gpu_util_below: 5, for: 2s, action: checkpoint-requeue}
  >   - name: default
  > YAML
  $ hangar apply -f queues.yaml
  queues applied: created notebooks; changed none; removed none
  $ cat > notebook.yaml <<'YAML'
  > name: notebook
  > queue: notebooks
  > checkpoint: {signal: SIGUSR1, grace: 5s}
  > tasks:
  >   - {name: jupyter, gpus: 1, command: ["/bin/sh", "-c", "echo 0 > $HANGAR_FAKE_GPU_UTIL_FILE; trap 'exit 0' USR1; while :; do sleep 0.1; done"]}
  > YAML
  $ hangar submit notebook.yaml
  submitted job 1 (notebook)
  $ wait_job 1 running

Idle for three times its `for`, with free GPUs all around: not restarted.

  $ sleep 6; hangar job 1 | sed -n 2p
    state:    running (attempt 0, 0 restarts)

A gang that needs every GPU of the cluster arrives: the idle notebook makes way.

  $ printf 'name: gang\ntasks:\n  - {name: w, replicas: 4, gpus: 8, command: [sleep, "2"]}\n' > gang.yaml
  $ hangar submit gang.yaml
  submitted job 2 (gang)
  $ wait_job 2 running 30
  $ hangar job 1 | sed -n 2p
    state:    pending (attempt 1, 1 restart)
  $ hangar events job/1 --limit 20 | grep -o "requeued whole: .*" | head -1
  requeued whole: reclaimed: its GPUs stayed below 5% utilisation for *s (queue notebooks: its idle policy, checkpoint-requeue) (glob)
  $ cleanup
