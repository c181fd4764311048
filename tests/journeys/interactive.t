Working interactively (docs/interactive.md): `hangar run` starts a session job and comes back with
its program's status; `hangar exec` runs a program beside a running task, with its environment.

  $ . "$TESTDIR/journey.sh"
  $ dev_start
  $ hangar run -- sh -c 'echo hello from the node; exit 3'
  submitted interactive job 1 (run-sh)
  hello from the node
  [3]
  $ hangar jobs | grep -o 'run-sh .*failed (interactive)' | tr -s ' '
  run-sh - default anonymous failed (interactive)
  $ cat > sleeper.yaml <<'YAML'
  > name: sleeper
  > tasks: [{gpus: 2, env: {MODE: train}, command: [sleep, "300"]}]
  > YAML
  $ hangar submit sleeper.yaml
  submitted job 2 (sleeper)
  $ wait_job 2 running
  $ hangar exec 2 -- sh -c 'echo job=$HANGAR_JOB_ID mode=$MODE; exit 5'
  job=2 mode=train
  [5]
  $ hangar exec 2.7 -- true
  error: job 2 has no task 7 (it has 1)
  [1]
  $ cleanup
