Slurm's client commands as a Slurm user's fingers and tools type them (docs/slurm-commands.md):
`hangar slurm install` writes them into a folder, which goes first on PATH, and sbatch, squeue,
sacct, scontrol, scancel and sinfo then answer in Slurm's words and formats.

  $ . "$TESTDIR/journey.sh"
  $ dev_start
  $ hangar slurm install slurm-bin
  wrote squeue sacct scontrol scancel sinfo sacctmgr sbatch srun salloc into slurm-bin; put it first on PATH only where no real Slurm is wanted: export PATH=slurm-bin:$PATH
  $ export PATH=$PWD/slurm-bin:$PATH
  $ test -f slurm-bin/sacct && test ! -L slurm-bin/sacct && test -x slurm-bin/sacct && echo a regular executable
  a regular executable
  $ printf '#!/bin/bash\n#SBATCH -J hello\necho hello from $HANGAR_JOB_NODES\n' > hello.sbatch
  $ sbatch hello.sbatch
  Submitted batch job 1
  $ wait_job 1 succeeded

What Snakemake's Slurm executor asks to follow a job, and what a person asks:

  $ sacct -P -n --format=JobIdRaw,State -j 1
  1|COMPLETED
  $ sacct -j 1 --format=JobID,JobName,State,ExitCode
  JobID           JobName      State ExitCode 
  ------------ ---------- ---------- -------- 
  1                 hello  COMPLETED      0:0 
  $ scontrol show jobid -dd 1 | grep -o 'JobState=[A-Z]*'
  JobState=COMPLETED
  $ sed 's/node-[0-9]*/NODE/' slurm-1.out
  hello from NODE
  $ printf '#!/bin/bash\n#SBATCH -J long\nsleep 600\n' > long.sbatch; sbatch long.sbatch
  Submitted batch job 2
  $ wait_job 2 running
  $ squeue -h -o '%i %j %T %D'
  2 long RUNNING 1
  $ squeue -t pd -h
  $ scancel 2
  $ wait_job 2 cancelled
  $ sacct -Pn -o JobIdRaw,State -j 1,2
  1|COMPLETED
  2|CANCELLED
A batch script reads its nodes as Slurm's scripts do:

  $ printf '#!/bin/bash\n#SBATCH -J where\necho "$SLURM_JOB_NODELIST"\nscontrol show hostnames "$SLURM_JOB_NODELIST"\n' > where.sbatch
  $ sbatch where.sbatch
  Submitted batch job 3
  $ wait_job 3 succeeded
  $ cat slurm-3.out
  node-? (glob)
  node-? (glob)
  $ scontrol show hostnames 'node-[1-2],gpu-a'
  node-1
  node-2
  gpu-a
  $ sinfo | head -1
  PARTITION AVAIL  TIMELIMIT NODES STATE  NODELIST
  $ sacct --bogus
  sacct: error: option --bogus is not one hangar's sacct takes (it takes --jobs, --user, --name, --states, --partition, --format, --noheader, --parsable2, --parsable, --allocations, --starttime, --allusers, --brief, --long, --accounts; docs/slurm.md lists what differs from Slurm)
  [1]
  $ srun true
  srun: error: srun launches steps inside a job: put it in a batch script and submit that with sbatch (hangar sbatch)
  [1]
  $ cleanup
