docs/slurm.md as a Slurm user walks it on `hangar dev`: the document's hello.sbatch (taken from its
transcript), sbatch, squeue's columns, the output file, a refusal, --dry-run, and the shipped
array example.

  $ . "$TESTDIR/journey.sh"
  $ cp -r "$HANGAR_SRC/examples" .
  $ dev_start
  $ doc_block docs/slurm.md 6 | sed -n '/^\$ cat hello.sbatch$/,/^\$ /p' | sed '1d;$d' > hello.sbatch
  $ head -3 hello.sbatch
  #!/bin/bash
  #SBATCH --job-name=hello
  #SBATCH --nodes=1 --ntasks-per-node=2
  $ hangar sbatch hello.sbatch
  Submitted batch job 1
  $ hangar sbatch -J sleepy -t 1 hello.sbatch
  Submitted batch job 2
  $ wait_job 1 succeeded && wait_job 2 succeeded
  $ cat hello-1.out
  job 1 (hello) on node-? (glob)
  task 0 of 2
  task 1 of 2
  $ hangar jobs -o slurm
  JOBID  PARTITION  NAME    USER       ST  TIME  NODES  NODELIST(REASON)
  2      default    sleepy  anonymous  CD  ?:??  1      node-? (glob)
  1      default    hello   anonymous  CD  ?:??  1      node-? (glob)
  $ doc_block docs/slurm.md 6 | sed -n 's/^\$ \(printf .*bad.sbatch\)$/\1/p' > make-bad.sh; . ./make-bad.sh; hangar sbatch bad.sbatch
  error: bad.sbatch:3: #SBATCH --begin=tonight: 'tonight' is not a time sbatch reads: write now+30minutes, 22:00, 10:00pm, tomorrow, midnight, 2026-12-24 or 2026-12-24T18:00:00
  error: bad.sbatch:4: #SBATCH -t soon: 'soon' is not a Slurm time; write minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS
  [1]
  $ hangar squeue
  error: unknown command 'hangar squeue': Slurm's squeue is 'hangar jobs -o slurm' here, or 'hangar slurm squeue' with squeue's own options ('hangar explain ID' says why a job waits); docs/slurm-commands.md lists them all
  [2]
  $ hangar sbatch --dry-run examples/slurm/checkpoint-usr1.sbatch | head -8
  name: resumable
  time_limit: 11h58m
  checkpoint:
    signal: SIGUSR1
    grace: 2m
  tasks:
    - name: batch
      replicas: 1

The shipped examples, as block 4 of the document runs them (the sweep cut to 6 elements here;
the counting and the output are checked once the jobs are done):

  $ DOC_SED='s/hangar sbatch sweep-array.sbatch/hangar sbatch --array=0-5%8 sweep-array.sbatch/' doc_run docs/slurm.md 7 '^cat |^hangar jobs'
  [doc] $ cd examples/slurm
  [doc] $ hangar sbatch torchrun-2node.sbatch; hangar sbatch checkpoint-usr1.sbatch; hangar sbatch --array=0-5%8 sweep-array.sbatch
  Submitted batch job 3
  Submitted batch job 4
  Submitted batch job 5
  $ wait_job 3 succeeded && wait_job 4 succeeded
  $ wait_for 120 '[ "$(hangar jobs --array 5 --state succeeded -o json | /usr/bin/python3 -c "import json,sys; print(len(json.load(sys.stdin)[\"jobs\"]))")" = 6 ]'
  $ hangar jobs -o slurm | grep -c ' CD '
  10
  $ grep -c 'done at step 5' examples/slurm/pretrain-llama-pretrain-3.out
  2
  $ cleanup
