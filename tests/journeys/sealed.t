docs/operations.md's job environments at rest, its transcript run as written: the API shows a job's
env, the store holds it sealed with the secrets key.

  $ . "$TESTDIR/journey.sh"
  $ cp -r "$HANGAR_SRC/examples" .
  $ dev_start
  $ grep -o "job environments are sealed in the store with the secrets key [0-9a-f]*" hangar-dev/logs/controller.log | sed 's/key [0-9a-f]*$/key KEYID/'
  job environments are sealed in the store with the secrets key KEYID
  $ doc_run docs/operations.md 3 '^hangar dev &' | sed -E 's/hangar-sealed:v1:[0-9a-f]+:[A-Za-z0-9+\/=]+/hangar-sealed:v1:KEYID:SEALED/' | grep -o '^\[doc\].*\|^submitted.*\|^{"NCCL_DEBUG":"WARN"}\|"env":{[^}]*}'
  [doc] $ hangar submit examples/jobs/finetune-8gpu.yaml
  submitted job 1 (finetune-llama-8b)
  [doc] $ hangar job 1 -o json | jq -c .spec.tasks[0].env
  {"NCCL_DEBUG":"WARN"}
  [doc] $ sqlite3 hangar-dev/state.db "select text from specs join jobs on jobs.spec_key = specs.key where jobs.id = 1"
  "env":{"NCCL_DEBUG":"hangar-sealed:v1:KEYID:SEALED"}
  $ cleanup
