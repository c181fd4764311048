docs/slurm.md as a Slurm user walks it on `hangar dev`: the document's hello.sbatch (taken from its
transcript), sbatch, squeue's columns, the output file, a refusal, --dry-run, and the shipped
array example.

  $ . "$TESTDIR/journey.sh"
  $ cp -r "$HANGAR_SRC/examples" .
  $ dev_start
  $ doc_block docs/slurm.md 3 | sed -n '/^\$ cat hello.sbatch$/,/^\$ /p' | sed '1d;$d' > hello.sbatch
  $ head -3 hello.sbatch
  #!/bin/bash
  #SBATCH --job-name=hello
  #SBATCH --nodes=1 --ntasks-per-node=2
  $ hangar sbatch hello.sbatch
  Submitted batch job 1
  $ hangar sbatch -J sleepy -t 1 hello.sbatch
  Submitted batch job 2
  $ wait_job 1 succeeded && wait_job 2 succeeded
  $ sed "s/ on $(hostname)$/ on HOST/" hello-1.out
  job 1 (hello) on HOST
  task 0 of 2
  task 1 of 2
  $ hangar jobs -o slurm
  JOBID  PARTITION  NAME    USER       ST  TIME  NODES  NODELIST(REASON)
  2      default    sleepy  anonymous  CD  ?:??  1      node-? (glob)
  1      default    hello   anonymous  CD  ?:??  1      node-? (glob)
  $ printf '#!/bin/bash\n#SBATCH -N 1\n#SBATCH --exclusive\n' > bad.sbatch; hangar sbatch bad.sbatch
  error: bad.sbatch:3: #SBATCH --exclusive is not supported by hangar sbatch; Hangar gives a job only what it asks; ask for all of a node's GPUs (--gpus-per-node) to have it alone
  [1]
  $ hangar sbatch --dry-run examples/slurm/checkpoint-usr1.sbatch | head -8
  name: resumable
  time_limit: 11h58m
  checkpoint:
    signal: SIGUSR1
    grace: 2m
  tasks:
    - name: batch
      replicas: 1

The array example, as block 4 of the document runs it, with a train.py that trains for longer
than the journey looks (without one, each element fails at once and may be over before the cancel):

  $ printf 'import time\ntime.sleep(600)\n' > train.py
  $ doc_run docs/slurm.md 4
  [doc] $ hangar sbatch examples/slurm/sweep-array.sbatch
  Submitted batch job 3
  $ hangar jobs --array 3 -o json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]), "elements")'
  50 elements
  $ hangar cancel --array 3
  cancel: 50 matched, 50 changed, 0 already so
  $ cleanup
