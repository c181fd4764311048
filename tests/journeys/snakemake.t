Snakemake 7.21 from Debian, unmodified, drives Hangar as it drives Slurm (docs/slurm-commands.md):
its Slurm executor submits each rule with sbatch --wrap, follows it with sacct, and runs the rule
inside the job through srun; and its generic cluster mode submits with a plain sbatch command.

  $ . "$TESTDIR/journey.sh"
  $ dev_start
  $ hangar slurm install slurm-bin > /dev/null
  $ export PATH=$PWD/slurm-bin:$PATH USER=${USER:-$(id -un)}
  $ cat > Snakefile <<'SNAKE'
  > rule all:
  >     input: "c.txt"
  > rule a:
  >     output: "a.txt"
  >     shell: "echo a from $SLURM_JOB_ID > {output}"
  > rule b:
  >     input: "a.txt"
  >     output: "b.txt"
  >     shell: "cat {input} > {output}; echo b >> {output}"
  > rule c:
  >     input: "b.txt"
  >     output: "c.txt"
  >     shell: "cat {input} > {output}; echo c >> {output}"
  > SNAKE
  $ snakemake --slurm --jobs 2 --max-status-checks-per-second 1 --latency-wait 10 \
  >   --default-resources slurm_partition=default runtime=10 mem_mb=100 > slurm-mode.log 2>&1 || tail -30 slurm-mode.log
  $ sed 's/[0-9][0-9]*$/ID/' c.txt
  a from ID
  b
  c
  $ sacct -P -n --format=JobName,State | sort
  python3|COMPLETED
  python3|COMPLETED
  python3|COMPLETED
  snakejob_a_3|COMPLETED
  snakejob_b_2|COMPLETED
  snakejob_c_1|COMPLETED

The generic cluster mode, as many site profiles use it:

  $ rm -f a.txt b.txt c.txt
  $ snakemake --jobs 2 --cluster "sbatch -J smk -t 10 --parsable" --latency-wait 10 > cluster-mode.log 2>&1 || tail -30 cluster-mode.log
  $ cat c.txt | wc -l
  3
  $ cleanup
